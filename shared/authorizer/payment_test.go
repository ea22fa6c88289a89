package authorizer_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/authorizer"
	"github.com/acmebank/authserver/shared/oauth"
)

const paymentDetails = `[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"123.50"},"creditorName":"Merchant A","creditorAccount":{"iban":"DE02100100109307118603"}}]`

// issuePayment runs a real code exchange of a grant with authorization_details.
func (f *fixture) issuePayment(tb testing.TB, details string, scopes oauth.Scopes) *oauth.TokenResponse {
	tb.Helper()
	ctx := context.Background()
	now := f.clock.Now()
	g := oauth.Grant{ID: oauth.NewID(oauth.PrefixGrant), ClientID: f.client.ID, UID: "uid-ada", Scopes: scopes,
		CompanyProfileID: "cp-7", CompanyUserID: "cu-9", AuthTime: now, CreatedAt: now, ExpiresAt: now.Add(30 * 24 * time.Hour),
		AuthorizationDetails: json.RawMessage(details)}
	// The customer's step over these details (dynamic linking): a payment's code needs it.
	g.PaymentEvidence = oauth.NewTOTPEvidence(g.AuthorizationDetails, oauth.NewPaymentNonce(), now)
	code := oauth.NewSecret(oauth.PrefixCode)
	if err := f.store.CreateCode(ctx, oauth.Code{Hash: oauth.HashToken(code), Grant: g, RedirectURI: "https://app.example/cb",
		ExpiresAt: now.Add(time.Minute)}); err != nil {
		tb.Fatal(err)
	}
	resp, err := f.svc.ExchangeCode(ctx, f.client, oauth.CodeExchange{Code: code, RedirectURI: "https://app.example/cb"})
	if err != nil {
		tb.Fatal(err)
	}
	return resp
}

func (f *fixture) grantOf(tb testing.TB, access string) oauth.GrantRecord {
	tb.Helper()
	t, err := f.store.GetToken(context.Background(), oauth.HashToken(access), f.clock.Now())
	if err != nil {
		tb.Fatal(err)
	}
	rec, err := f.store.GetGrant(context.Background(), t.Grant.ID, f.clock.Now())
	if err != nil {
		tb.Fatal(err)
	}
	return rec
}

func TestPayment_CodeExchangeIssuesNoRefreshTokenAndAShortLivedAccessToken(t *testing.T) {
	f := newFixture(t)
	resp := f.issuePayment(t, paymentDetails, oauth.Scopes{oauth.ScopeOpenID, oauth.ScopeTransfersWrite})
	if resp.RefreshToken != "" {
		t.Errorf("a payment grant got a refresh token (every other grant gets one)")
	}
	if want := int64(oauth.DefaultPaymentTokenTTL / time.Second); resp.ExpiresIn != want {
		t.Errorf("expires_in = %d, want %d (the payment lifetime)", resp.ExpiresIn, want)
	}
	body, _ := json.Marshal(resp)
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	if _, ok := m["refresh_token"]; ok {
		t.Errorf("the token response names refresh_token: %s", body)
	}
	f.svc.Lifetimes.PaymentAccessToken = 2 * time.Minute
	if resp := f.issuePayment(t, paymentDetails, oauth.Scopes{oauth.ScopeOpenID}); resp.ExpiresIn != 120 {
		t.Errorf("with a 2m payment lifetime, expires_in = %d, want 120", resp.ExpiresIn)
	}
}

func TestPayment_AccountInformationGrantStillGetsARefreshToken(t *testing.T) {
	f := newFixture(t)
	resp := f.issuePayment(t, `[{"type":"account_information","permissions":["balances"]}]`, oauth.Scopes{oauth.ScopeOpenID, oauth.ScopeTransfersWrite})
	if resp.RefreshToken == "" || resp.ExpiresIn != int64(time.Hour/time.Second) {
		t.Errorf("an account_information grant: refresh %q, expires_in %d; want a refresh token and the usual hour", resp.RefreshToken, resp.ExpiresIn)
	}
	// Its token is not one-time at the bank API.
	for i := range 2 {
		if _, err := f.az.Authorize(context.Background(), authorizer.Request{RouteKey: authorizer.RouteAccounts, Authorization: "Bearer " + resp.AccessToken}); err != nil {
			t.Fatalf("use %d: %v", i+1, err)
		}
	}
}

func TestPayment_TokenIsAcceptedOnceAndPassesItsDetails(t *testing.T) {
	f := newFixture(t)
	resp := f.issuePayment(t, paymentDetails, oauth.Scopes{oauth.ScopeOpenID})
	req := authorizer.Request{RouteKey: authorizer.RouteAccounts, Authorization: "Bearer " + resp.AccessToken}
	id, err := f.az.Authorize(context.Background(), req)
	if err != nil {
		t.Fatalf("first use: %v", err)
	}
	got, err := base64.RawURLEncoding.DecodeString(id.Payment)
	if err != nil || string(got) != paymentDetails {
		t.Errorf("payment header decodes to %s (%v), want the grant's details", got, err)
	}
	if id.Context()["payment"] != id.Payment {
		t.Errorf("the authorizer's context lacks the payment")
	}
	if f.grantOf(t, resp.AccessToken).ConsumedAt.IsZero() {
		t.Error("the grant is not marked consumed after its first use")
	}
	_, err = f.az.Authorize(context.Background(), req)
	if e := oauth.AsError(err); e.Code != oauth.ErrCodeInvalidToken || e.Status != 401 {
		t.Fatalf("second use: %v, want invalid_token 401", err)
	}
	if c := authorizer.Challenge(err); c == "" {
		t.Error("second use: no WWW-Authenticate challenge")
	}
}

func TestPayment_RefusedCallDoesNotConsumeTheGrant(t *testing.T) {
	f := newFixture(t)
	resp := f.issuePayment(t, paymentDetails, oauth.Scopes{oauth.ScopeEmail})
	// The route needs openid, which the token lacks: refused before anything is written.
	_, err := f.az.Authorize(context.Background(), authorizer.Request{RouteKey: authorizer.RouteAccounts, Authorization: "Bearer " + resp.AccessToken})
	var se *authorizer.ScopeError
	if !errors.As(err, &se) {
		t.Fatalf("got %v, want insufficient_scope", err)
	}
	if at := f.grantOf(t, resp.AccessToken).ConsumedAt; !at.IsZero() {
		t.Errorf("a refused call consumed the payment grant at %v", at)
	}
}

func TestPayment_FiftyRacingCallsWithOneTokenLetOneThrough(t *testing.T) {
	f := newFixture(t)
	resp := f.issuePayment(t, paymentDetails, oauth.Scopes{oauth.ScopeOpenID})
	const n = 50
	errs := make([]error, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-gate
			_, errs[i] = f.az.Authorize(context.Background(), authorizer.Request{RouteKey: authorizer.RouteAccounts, Authorization: "Bearer " + resp.AccessToken})
		})
	}
	close(gate)
	wg.Wait()
	passed := 0
	for i, err := range errs {
		switch {
		case err == nil:
			passed++
		case oauth.AsError(err).Code != oauth.ErrCodeInvalidToken:
			t.Errorf("racer %d: %v, want nil or invalid_token", i, err)
		}
	}
	if passed != 1 {
		t.Errorf("%d of %d racing calls passed, want exactly 1", passed, n)
	}
}
