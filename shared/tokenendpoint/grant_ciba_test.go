package tokenendpoint

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/acmebank/authserver/shared/oauth"
)

// movingClock is a clock a test moves forward.
type movingClock struct{ t atomic.Pointer[time.Time] }

func (c *movingClock) Now() time.Time      { return *c.t.Load() }
func (c *movingClock) set(t time.Time)     { c.t.Store(&t) }
func (c *movingClock) add(d time.Duration) { c.set(c.Now().Add(d)) }

// cibaFixture is the token endpoint's fixture with the embedded store's backchannel requests
// and a clock the test moves.
type cibaFixture struct {
	*fixture
	clock *movingClock
}

func newCIBAFixture(t *testing.T) *cibaFixture {
	t.Helper()
	f := newFixture(t)
	clk := &movingClock{}
	clk.set(f.now)
	f.ep.tokens.Clock = clk
	f.ep.tokens.Backchannel = f.store
	return &cibaFixture{fixture: f, clock: clk}
}

// registeredForCIBA registers a client for the ciba grant (and the code grant beside it).
func registeredForCIBA(c *oauth.Client) {
	c.GrantTypes = []string{oauth.GrantTypeCIBA, oauth.GrantTypeAuthorizationCode}
}

const cibaInterval = 5

// request stores a pending request of client for alice, expiring in 2 minutes, and returns its
// auth_req_id.
func (f *cibaFixture) request(t *testing.T, client string, details json.RawMessage) string {
	t.Helper()
	id := oauth.NewSecret(oauth.PrefixAuthReqID)
	now := f.clock.Now()
	err := f.store.PutBackchannelRequest(context.Background(), oauth.BackchannelRequest{
		ID: oauth.BackchannelRequestID(id), ClientID: client, UID: "alice", Scopes: oauth.Scopes{"openid", "bank:transfers:write"},
		AuthorizationDetails: details, Mode: oauth.CIBAModePoll, Interval: cibaInterval,
		CreatedAt: now, ExpiresAt: now.Add(2 * time.Minute), KeepUntil: now.Add(12 * time.Minute), State: oauth.CIBAPending,
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// decide records the device's decision on the request authReqID names: an approval carries
// a grant of alice's with a strong authentication.
func (f *cibaFixture) decide(t *testing.T, authReqID string, approve bool, evidence *oauth.PaymentEvidence) {
	t.Helper()
	r, err := f.store.GetBackchannelRequest(context.Background(), oauth.BackchannelRequestID(authReqID), f.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	d := oauth.BackchannelDecision{Approve: approve}
	if approve {
		now := f.clock.Now()
		d.Grant = &oauth.Grant{ID: oauth.NewID(oauth.PrefixGrant), ClientID: r.ClientID, UID: r.UID, Scopes: r.Scopes,
			AuthTime: now, AMR: []string{"hwk", "user"}, AuthorizationDetails: r.AuthorizationDetails, PaymentEvidence: evidence,
			CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour)}
	}
	if _, err := f.store.DecideBackchannelRequest(context.Background(), r.ID, r.UID, d, f.clock.Now()); err != nil {
		t.Fatal(err)
	}
}

func cibaParams(authReqID string) url.Values {
	return url.Values{"grant_type": {oauth.GrantTypeCIBA}, "auth_req_id": {authReqID}}
}

// TestCIBA_EveryPollAnswer: each state of a request answers a poll as CIBA Core 11 says, and
// an approved request is issued once, to its own client: a second poll of it is invalid_grant
// and leaves what the first got valid (an auth_req_id is not a code: flow_ciba.go).
func TestCIBA_EveryPollAnswer(t *testing.T) {
	f := newCIBAFixture(t)
	cred := f.client(t, "app", registeredForCIBA)
	other := f.client(t, "other", registeredForCIBA)
	pending := f.request(t, "app", nil)
	expiring := f.request(t, "app", nil)
	denied := f.request(t, "app", nil)
	f.decide(t, denied, false, nil)
	approved := f.request(t, "app", nil)
	f.decide(t, approved, true, nil)

	poll := func(c oauth.ClientCredentials, id string) (*oauth.TokenResponse, error) {
		return f.token(c, cibaParams(id))
	}
	// The first poll of a pending request is authorization_pending; one sooner than the
	// interval after it slow_down; one after the interval authorization_pending again.
	_, err := poll(cred, pending)
	wantCode(t, err, oauth.ErrCodeAuthorizationPending)
	f.clock.add(cibaInterval*time.Second - time.Second)
	_, err = poll(cred, pending)
	wantCode(t, err, oauth.ErrCodeSlowDown)
	f.clock.add(time.Second)
	_, err = poll(cred, pending)
	wantCode(t, err, oauth.ErrCodeAuthorizationPending)

	_, err = poll(cred, denied)
	wantCode(t, err, oauth.ErrCodeAccessDenied)
	var oe *oauth.Error
	if errors.As(err, &oe) && oe.Status != 400 {
		t.Errorf("access_denied at the token endpoint is %d, want 400 (RFC 6749 5.2)", oe.Status)
	}
	for name, id := range map[string]string{"unknown": "ciba_not-a-request", "empty-looking": oauth.PrefixAuthReqID} {
		_, err = poll(cred, id)
		wantCode(t, err, oauth.ErrCodeInvalidGrant)
		_ = name
	}
	_, err = poll(other, approved)
	wantCode(t, err, oauth.ErrCodeInvalidGrant)
	_, err = f.token(cred, url.Values{"grant_type": {oauth.GrantTypeCIBA}})
	wantCode(t, err, oauth.ErrCodeInvalidRequest)

	resp, err := poll(cred, approved)
	if err != nil {
		t.Fatal(err)
	}
	if resp.AccessToken == "" || resp.IDToken == "" || resp.RefreshToken == "" || resp.Scope != "openid bank:transfers:write" ||
		resp.TokenType != "Bearer" || resp.Metadata.UID != "alice" {
		t.Fatalf("response %+v", resp)
	}
	if _, err := f.ep.tokens.ValidateAccessToken(context.Background(), resp.AccessToken, ""); err != nil {
		t.Fatalf("the issued access token is not valid: %v", err)
	}
	_, err = poll(cred, approved)
	wantCode(t, err, oauth.ErrCodeInvalidGrant)
	if _, err := f.ep.tokens.ValidateAccessToken(context.Background(), resp.AccessToken, ""); err != nil {
		t.Fatalf("a second poll of an issued request revoked its tokens: %v", err)
	}

	// Past its expiry, an undecided request is expired_token.
	f.clock.add(2 * time.Minute)
	_, err = poll(cred, expiring)
	wantCode(t, err, oauth.ErrCodeExpiredToken)
}

// TestCIBA_OnlyForClientsRegisteredForIt: a client registered without the grant is
// unauthorized_client, and its poll touches nothing (the request stays pending, its next poll
// time unmoved).
func TestCIBA_OnlyForClientsRegisteredForIt(t *testing.T) {
	f := newCIBAFixture(t)
	cred := f.client(t, "code-only", func(c *oauth.Client) { c.GrantTypes = []string{oauth.GrantTypeAuthorizationCode} })
	id := f.request(t, "code-only", nil)
	before, err := f.store.GetBackchannelRequest(context.Background(), oauth.BackchannelRequestID(id), f.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.token(cred, cibaParams(id))
	wantCode(t, err, oauth.ErrCodeUnauthorizedClient)
	after, err := f.store.GetBackchannelRequest(context.Background(), oauth.BackchannelRequestID(id), f.clock.Now())
	if err != nil || !after.NextPollAt.Equal(before.NextPollAt) || after.State != oauth.CIBAPending {
		t.Fatalf("the refused poll changed the request: %+v -> %+v (%v)", before, after, err)
	}
}

// TestCIBA_TokensAreBoundToThisPollsKey: the tokens are bound to the DPoP key and the
// certificate of the poll that takes them, whatever the authentication request was sent with.
func TestCIBA_TokensAreBoundToThisPollsKey(t *testing.T) {
	f := newCIBAFixture(t)
	f.client(t, "app", registeredForCIBA)
	client, err := f.store.GetClient(context.Background(), "app")
	if err != nil {
		t.Fatal(err)
	}
	id := f.request(t, "app", nil)
	f.decide(t, id, true, nil)
	resp, err := f.ep.tokens.ExchangeBackchannel(context.Background(), &client, oauth.BackchannelExchange{AuthReqID: id, DPoPJKT: "jkt-of-this-poll", CertThumbprint: "cert-of-this-poll"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.TokenType != oauth.TokenTypeDPoP {
		t.Fatalf("token_type %q, want DPoP", resp.TokenType)
	}
	tok, err := f.store.GetToken(context.Background(), oauth.HashToken(resp.AccessToken), f.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if tok.Grant.DPoPJKT != "jkt-of-this-poll" || tok.Grant.CertThumbprint != "cert-of-this-poll" {
		t.Fatalf("token bound to %q / %q", tok.Grant.DPoPJKT, tok.Grant.CertThumbprint)
	}
}

// TestCIBA_PaymentIsIssuedOnlyWithItsLink: an approved payment whose evidence does not cover
// its authorization_details is invalid_grant and issues nothing.
func TestCIBA_PaymentIsIssuedOnlyWithItsLink(t *testing.T) {
	f := newCIBAFixture(t)
	cred := f.client(t, "app", registeredForCIBA)
	details := json.RawMessage(`[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"25.00"},"creditorName":"Shop","creditorAccount":{"iban":"DE02100100109307118603"}}]`)
	other := json.RawMessage(`[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"9999.00"},"creditorName":"Shop","creditorAccount":{"iban":"DE02100100109307118603"}}]`)
	id := f.request(t, "app", details)
	f.decide(t, id, true, oauth.NewTOTPEvidence(other, []byte("nonce"), f.clock.Now()))
	_, err := f.token(cred, cibaParams(id))
	wantCode(t, err, oauth.ErrCodeInvalidGrant)
	if n := len(f.grants(t, "app")); n != 0 {
		t.Fatalf("%d grants issued for a broken payment link", n)
	}
}

// TestCIBA_FiftyRacingPollsOfAnApprovedRequestIssueOnce: 50 polls of one approved request at
// once: exactly one gets tokens, every other is invalid_grant, one grant is written, and the
// winner's tokens stay valid (the losers are the client's own duplicates: flow_ciba.go).
func TestCIBA_FiftyRacingPollsOfAnApprovedRequestIssueOnce(t *testing.T) {
	f := newCIBAFixture(t)
	cred := f.client(t, "app", registeredForCIBA)
	id := f.request(t, "app", nil)
	f.decide(t, id, true, nil)
	const n = 50
	var wg sync.WaitGroup
	var mu sync.Mutex
	var winners []*oauth.TokenResponse
	codes := map[string]int{}
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := f.token(cred, cibaParams(id))
			mu.Lock()
			defer mu.Unlock()
			var oe *oauth.Error
			switch {
			case err == nil:
				winners = append(winners, resp)
			case errors.As(err, &oe):
				codes[oe.Code]++
			default:
				codes[err.Error()]++
			}
		}()
	}
	wg.Wait()
	if len(winners) != 1 || codes[oauth.ErrCodeInvalidGrant] != n-1 {
		t.Fatalf("%d polls got tokens, the others %v; want 1 and invalid_grant", len(winners), codes)
	}
	if g := f.grants(t, "app"); len(g) != 1 {
		t.Fatalf("%d grants written, want 1", len(g))
	}
	if _, err := f.ep.tokens.ValidateAccessToken(context.Background(), winners[0].AccessToken, ""); err != nil {
		t.Fatalf("the winner's token after 49 racing duplicates: %v", err)
	}
}

// TestCIBA_FiftyRacingPollsOfAPendingRequestAnswerPendingOnce: 50 polls of one pending
// request at one instant: one is authorization_pending, the other 49 slow_down.
func TestCIBA_FiftyRacingPollsOfAPendingRequestAnswerPendingOnce(t *testing.T) {
	f := newCIBAFixture(t)
	cred := f.client(t, "app", registeredForCIBA)
	id := f.request(t, "app", nil)
	const n = 50
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[string]int{}
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.token(cred, cibaParams(id))
			var oe *oauth.Error
			mu.Lock()
			defer mu.Unlock()
			if errors.As(err, &oe) {
				codes[oe.Code]++
			} else {
				codes["other"]++
			}
		}()
	}
	wg.Wait()
	if codes[oauth.ErrCodeAuthorizationPending] != 1 || codes[oauth.ErrCodeSlowDown] != n-1 {
		t.Fatalf("answers %v, want 1 authorization_pending and %d slow_down", codes, n-1)
	}
}

// TestCIBA_AReplayedAssertionConsumesNothing: a poll of an approved request whose client
// assertion was used before is invalid_client and leaves the request approved (its consuming
// write carried the jti and was refused whole); a poll with a fresh assertion then gets the
// tokens. A fapi2 client's poll with neither DPoP nor a certificate is refused before the
// request is touched.
func TestCIBA_AReplayedAssertionConsumesNothing(t *testing.T) {
	f := newCIBAFixture(t)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Use: "sig", Algorithm: "ES256"}}})
	f.client(t, "keyed", func(c *oauth.Client) {
		registeredForCIBA(c)
		c.SecretHashes, c.TokenEndpointAuthMethod, c.JWKS = nil, oauth.AuthMethodPrivateKeyJWT, jwks
	})
	signer, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: "k1"}}, nil)
	assertionOf := func(id string) oauth.ClientCredentials {
		claims, _ := json.Marshal(map[string]any{"iss": id, "sub": id, "aud": "https://auth.example.test",
			"jti": oauth.NewID("j_"), "iat": f.clock.Now().Unix(), "exp": f.clock.Now().Add(time.Minute).Unix()})
		jws, _ := signer.Sign(claims)
		a, _ := jws.CompactSerialize()
		return oauth.ClientCredentials{ID: id, Assertion: a, AssertionType: oauth.AssertionTypeJWTBearer}
	}
	assertion := func() oauth.ClientCredentials { return assertionOf("keyed") }
	first, second := f.request(t, "keyed", nil), f.request(t, "keyed", nil)
	f.decide(t, first, true, nil)
	f.decide(t, second, true, nil)
	used := assertion()
	if _, err := f.token(used, cibaParams(first)); err != nil {
		t.Fatal(err)
	}
	_, err := f.token(used, cibaParams(second))
	wantCode(t, err, oauth.ErrCodeInvalidClient)
	r, err := f.store.GetBackchannelRequest(context.Background(), oauth.BackchannelRequestID(second), f.clock.Now())
	if err != nil || r.State != oauth.CIBAApproved {
		t.Fatalf("after the replayed assertion the request is %q (%v), want still approved", r.State, err)
	}
	if _, err := f.token(assertion(), cibaParams(second)); err != nil {
		t.Fatalf("a fresh assertion: %v", err)
	}

	f.client(t, "fapi", func(c *oauth.Client) {
		registeredForCIBA(c)
		c.SecretHashes, c.TokenEndpointAuthMethod, c.JWKS = nil, oauth.AuthMethodPrivateKeyJWT, jwks
		c.Profile, c.RequirePKCE, c.RequirePAR, c.IDTokenSignedResponseAlg = oauth.ProfileFAPI2, true, true, "PS256"
	})
	id := f.request(t, "fapi", nil)
	f.decide(t, id, true, nil)
	_, err = f.token(assertionOf("fapi"), cibaParams(id))
	wantCode(t, err, oauth.ErrCodeInvalidRequest)
	if r, err := f.store.GetBackchannelRequest(context.Background(), oauth.BackchannelRequestID(id), f.clock.Now()); err != nil || r.State != oauth.CIBAApproved {
		t.Fatalf("the refused fapi2 poll touched the request: %q (%v)", r.State, err)
	}
}
