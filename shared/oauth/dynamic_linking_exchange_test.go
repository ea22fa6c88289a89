package oauth_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// linkFixture is the token domain over an embedded store, with a client, for the exchange
// and the approval of payments.
type linkFixture struct {
	svc    *oauth.Service
	store  *embedded.Store
	client *oauth.Client
	now    time.Time
}

func newLinkFixture(t *testing.T) *linkFixture {
	t.Helper()
	st, err := embedded.OpenWith(t.TempDir(), embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	svc := &oauth.Service{Clients: st, Interactions: st, Grants: st, Clock: oauth.ClockFunc(func() time.Time { return now }),
		Issuer: "https://auth.bank.example/v2/authentication/oauth2",
		Lifetimes: oauth.Lifetimes{AccessToken: time.Hour, RefreshToken: 24 * time.Hour, Grant: 30 * 24 * time.Hour,
			Code: 2 * time.Minute, IDToken: time.Hour}}
	return &linkFixture{svc: svc, store: st, client: &oauth.Client{ID: "cl-app", RedirectURIs: []string{"https://app.example/cb"}}, now: now}
}

// code stores a code of a payment grant with details and evidence, as Approve would.
func (f *linkFixture) code(t *testing.T, details string, ev *oauth.PaymentEvidence) (string, oauth.Grant) {
	t.Helper()
	g := oauth.Grant{ID: oauth.NewID(oauth.PrefixGrant), ClientID: f.client.ID, UID: "uid-ada", Scopes: oauth.Scopes{oauth.ScopeTransfersWrite},
		AuthTime: f.now, CreatedAt: f.now, ExpiresAt: f.now.Add(time.Hour), AuthorizationDetails: json.RawMessage(details), PaymentEvidence: ev}
	code := oauth.NewSecret(oauth.PrefixCode)
	if err := f.store.CreateCode(context.Background(), oauth.Code{Hash: oauth.HashToken(code), Grant: g,
		RedirectURI: "https://app.example/cb", ExpiresAt: f.now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	return code, g
}

func (f *linkFixture) exchange(code string) (*oauth.TokenResponse, error) {
	return f.svc.ExchangeCode(context.Background(), f.client, oauth.CodeExchange{Code: code, RedirectURI: "https://app.example/cb"})
}

func TestExchange_PaymentWithItsEvidenceIssuesAndKeepsTheEvidenceOnTheGrant(t *testing.T) {
	f := newLinkFixture(t)
	ev := newSigner(t).linked(t, linkedDetails)
	code, g := f.code(t, linkedDetails, ev)
	resp, err := f.exchange(code)
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	rec, err := f.store.GetGrant(context.Background(), g.ID, f.now)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Grant.PaymentEvidence == nil || rec.Grant.PaymentEvidence.Check(rec.Grant.AuthorizationDetails) != nil {
		t.Fatalf("the grant keeps no evidence that checks: %+v", rec.Grant.PaymentEvidence)
	}
	// An ES256 passkey's evidence, as bytes (the stores keep binary attributes; JSON adds a
	// third in base64): under 1 KB (SECURITY.md).
	e := rec.Grant.PaymentEvidence
	if n := len(e.CredentialID) + len(e.AuthenticatorData) + len(e.ClientDataJSON) + len(e.Signature) + len(e.PublicKey) + len(e.Nonce) + len(e.DetailsHash); n >= 1024 {
		t.Errorf("an ES256 evidence of %d bytes, want under 1 KB", n)
	}
	tok, err := f.store.GetToken(context.Background(), oauth.HashToken(resp.AccessToken), f.now)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Grant.PaymentEvidence != nil {
		t.Error("the access token's copy of the grant carries the evidence: every read of the token pays for it")
	}
}

// TestExchange_RefusesAPaymentGrantWhoseDetailsNoLongerMatchItsEvidence: a code whose grant's
// details were changed after the customer's step (another amount, another payee, the evidence
// dropped) is invalid_grant, and nothing is issued.
func TestExchange_RefusesAPaymentGrantWhoseDetailsNoLongerMatchItsEvidence(t *testing.T) {
	for name, c := range map[string]struct {
		details string
		ev      func(s *signer) *oauth.PaymentEvidence
	}{
		"amount changed": {otherAmount, func(s *signer) *oauth.PaymentEvidence { return s.linked(t, linkedDetails) }},
		"payee changed":  {otherPayee, func(s *signer) *oauth.PaymentEvidence { return s.linked(t, linkedDetails) }},
		"no evidence":    {linkedDetails, func(*signer) *oauth.PaymentEvidence { return nil }},
		"TOTP evidence over the old amount": {otherAmount, func(*signer) *oauth.PaymentEvidence {
			return oauth.NewTOTPEvidence(json.RawMessage(linkedDetails), oauth.NewPaymentNonce(), time.Now())
		}},
	} {
		t.Run(name, func(t *testing.T) {
			f := newLinkFixture(t)
			code, g := f.code(t, c.details, c.ev(newSigner(t)))
			resp, err := f.exchange(code)
			if e := oauth.AsError(err); resp != nil || e.Code != oauth.ErrCodeInvalidGrant {
				t.Fatalf("exchange: %v, %v; want invalid_grant", resp, err)
			}
			if _, err := f.store.GetGrant(context.Background(), g.ID, f.now); !errors.Is(err, oauth.ErrNotFound) {
				t.Fatalf("GetGrant after the refusal: %v, want nothing issued", err)
			}
		})
	}
}

// TestApprove_RefusesAPaymentWithoutEvidenceOverItsDetails: the domain issues no code for a
// payment whose request carries no evidence, or evidence over other details, whatever its
// caller; a request with no payment needs none.
func TestApprove_RefusesAPaymentWithoutEvidenceOverItsDetails(t *testing.T) {
	f := newLinkFixture(t)
	u := &oauth.User{UID: "uid-ada"}
	sess := &oauth.Session{UID: "uid-ada", AuthTime: f.now}
	req := func(details string, ev *oauth.PaymentEvidence) *oauth.AuthRequest {
		return &oauth.AuthRequest{ID: oauth.NewID(oauth.PrefixRequest), ClientID: f.client.ID, RedirectURI: "https://app.example/cb",
			AuthorizationDetails: json.RawMessage(details), PaymentEvidence: ev}
	}
	s := newSigner(t)
	for name, r := range map[string]*oauth.AuthRequest{
		"no evidence":             req(linkedDetails, nil),
		"evidence of another sum": req(otherAmount, s.linked(t, linkedDetails)),
	} {
		if _, err := f.svc.Approve(context.Background(), r, f.client, u, sess); !errors.Is(err, oauth.ErrPaymentNotLinked) {
			t.Errorf("%s: Approve %v, want ErrPaymentNotLinked", name, err)
		}
	}
	if _, err := f.svc.Approve(context.Background(), req(linkedDetails, s.linked(t, linkedDetails)), f.client, u, sess); err != nil {
		t.Errorf("linked payment: %v", err)
	}
	if _, err := f.svc.Approve(context.Background(), req(`[{"type":"account_information","permissions":["balances"]}]`, nil), f.client, u, sess); err != nil {
		t.Errorf("account information: %v", err)
	}
}
