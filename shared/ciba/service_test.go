package ciba_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"

	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/ciba"
	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/localkey"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/oauth/rar"
	"github.com/acmebank/authserver/shared/store/embedded"
)

const (
	issuer  = "https://auth.example.test/v2/authentication/oauth2"
	payment = `[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"123.50"},"creditorName":"Merchant A","creditorAccount":{"iban":"DE02100100109307118603"}}]`
)

// device is the Device port's recorder: what reached it.
type device struct {
	mu   sync.Mutex
	seen []ciba.DeviceRequest
}

func (d *device) Reach(_ context.Context, r ciba.DeviceRequest) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seen = append(d.seen, r)
	return nil
}

func (d *device) requests() []ciba.DeviceRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]ciba.DeviceRequest(nil), d.seen...)
}

// pinger records the pings (the Pinger port; D's https poster is tested on its own).
type pinger struct {
	mu    sync.Mutex
	pings []string
}

func (p *pinger) Ping(_ context.Context, endpoint, token, authReqID string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pings = append(p.pings, endpoint+" "+token+" "+authReqID)
	return nil
}

// fixture is CIBA over a real embedded store, a real key registry and the token domain.
type fixture struct {
	st     *embedded.Store
	svc    *ciba.Service
	tokens *oauth.Service
	dev    *device
	ping   *pinger
	signer *keys.Signer
	now    atomic.Pointer[time.Time]
	key    *ecdsa.PrivateKey
}

func (f *fixture) clock() time.Time { return *f.now.Load() }
func (f *fixture) advance(d time.Duration) {
	t := f.clock().Add(d)
	f.now.Store(&t)
}

func newFixture(t *testing.T, mod func(*ciba.Deps)) *fixture {
	t.Helper()
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{st: st, dev: &device{}, ping: &pinger{}}
	now := time.Now().UTC().Truncate(time.Second)
	f.now.Store(&now)
	clock := oauth.ClockFunc(f.clock)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	details, err := rar.Shipped()
	if err != nil {
		t.Fatal(err)
	}
	f.tokens, err = oauth.New(oauth.Deps{Clients: st, Interactions: st, Grants: st, Replay: st, Clock: clock, Log: log, Issuer: issuer,
		Lifetimes:            oauth.Lifetimes{AccessToken: time.Hour, RefreshToken: time.Hour, Grant: 24 * time.Hour, Code: time.Minute, IDToken: time.Hour, Request: time.Hour},
		AuthorizationDetails: details})
	if err != nil {
		t.Fatal(err)
	}
	backend, err := localkey.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keys.NewRotator(st, backend, keys.Policy{}, nil, nil).Rotate(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.signer = keys.NewSigner(st, backend, nil, 0)
	f.key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: f.key.Public(), KeyID: "k1", Use: "sig", Algorithm: "ES256"}}})
	ctx := t.Context()
	grants := []string{oauth.GrantTypeCIBA}
	for _, c := range []oauth.Client{
		{ID: "cl_poll", Name: "Poll App", Scopes: []string{"openid", "email"}, GrantTypes: grants, AuthorizationDetailsTypes: []string{"payment_initiation"}},
		{ID: "cl_other", Name: "Other App", Scopes: []string{"openid"}, GrantTypes: grants},
		{ID: "cl_ping", Name: "Ping App", Scopes: []string{"openid"}, GrantTypes: grants, BackchannelTokenDeliveryMode: oauth.CIBAModePing,
			BackchannelClientNotificationEndpoint: "https://ping.example/cb"},
		{ID: "cl_code", Name: "Code App", Scopes: []string{"openid"}, RedirectURIs: []string{"https://code.example/cb"}},
		{ID: "cl_signed", Name: "Signed App", Scopes: []string{"openid"}, GrantTypes: grants, TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT,
			JWKS: jwks, BackchannelAuthenticationRequestSigningAlg: "ES256"},
	} {
		if err := st.CreateClient(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []oauth.User{
		{UID: "u-ada", Username: "ada", Claims: oauth.Claims{Email: "ada@example.com"}},
		{UID: "u-bob", Username: "bob"},
		{UID: "u-off", Username: "off", Disabled: true},
	} {
		if err := st.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	d := ciba.Deps{Tokens: f.tokens, Requests: st, Users: st, Limits: st, Keys: st, Device: f.dev, Pinger: f.ping, Clock: clock, Log: log}
	if mod != nil {
		mod(&d)
	}
	if f.svc, err = ciba.New(d); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) client(t *testing.T, id string) *oauth.Client {
	t.Helper()
	c, err := f.st.GetClient(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

func (f *fixture) start(t *testing.T, clientID string, v url.Values) (*ciba.StartResponse, error) {
	t.Helper()
	return f.svc.Start(t.Context(), f.client(t, clientID), v)
}

func form(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

// idToken signs an id_token of ours for sub and aud, issued at iat.
func (f *fixture) idToken(t *testing.T, sub, aud string, iat time.Time) string {
	t.Helper()
	tok, err := f.signer.SignJWT(t.Context(), "", jwt.MapClaims{"iss": issuer, "sub": sub, "aud": aud, "iat": iat.Unix(), "exp": iat.Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// signedRequest signs claims as cl_signed's authentication request (CIBA Core 7.1.1).
func (f *fixture) signedRequest(t *testing.T, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: f.key}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(claims)
	jws, err := s.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (f *fixture) requestClaims(extra map[string]any) map[string]any {
	now := f.clock()
	m := map[string]any{"iss": "cl_signed", "aud": issuer, "iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(),
		"jti": oauth.NewID("jti_"), "scope": "openid", "login_hint": "ada"}
	for k, v := range extra {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	return m
}

func oauthCode(err error) string {
	var e *oauth.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// TestNew_NamesEveryMissingDependency: CIBA built without its token domain, store, users,
// limits, keys, device, clock or log says which, rather than failing at its first request.
func TestNew_NamesEveryMissingDependency(t *testing.T) {
	_, err := ciba.New(ciba.Deps{})
	for _, name := range []string{"Tokens", "Requests", "Users", "Limits", "Keys", "Device", "Clock", "Log"} {
		if err == nil || !strings.Contains(err.Error(), "missing "+name) {
			t.Errorf("New without %s: %v", name, err)
		}
	}
	if err != nil && strings.Contains(err.Error(), "Pinger") {
		t.Errorf("the Pinger is optional: %v", err)
	}
}

// TestStart_RefusesEachBadRequestWithItsErrorAndStoresNothing: every malformed or forbidden
// request gets its CIBA Core 13 error, reaches no device, stores no request and counts nothing
// against the hint (the limit's five requests all pass afterwards).
func TestStart_RefusesEachBadRequestWithItsErrorAndStoresNothing(t *testing.T) {
	f := newFixture(t, nil)
	long := strings.Repeat("x", ciba.MaxBindingMessage+1)
	cases := []struct {
		name, client string
		v            url.Values
		want         string
	}{
		{"client not registered for CIBA", "cl_code", form("scope", "openid", "login_hint", "ada"), "unauthorized_client"},
		{"no hint", "cl_poll", form("scope", "openid"), "invalid_request"},
		{"two hints", "cl_poll", form("scope", "openid", "login_hint", "ada", "id_token_hint", "x.y.z"), "invalid_request"},
		{"login_hint_token", "cl_poll", form("scope", "openid", "login_hint_token", "abc"), "invalid_request"},
		{"no openid", "cl_poll", form("scope", "email", "login_hint", "ada"), "invalid_scope"},
		{"no scope", "cl_poll", form("login_hint", "ada"), "invalid_scope"},
		{"a scope the client may not ask", "cl_poll", form("scope", "openid profile", "login_hint", "ada"), "invalid_scope"},
		{"binding_message with markup", "cl_poll", form("scope", "openid", "login_hint", "ada", "binding_message", `<script>alert(1)</script>`), "invalid_binding_message"},
		{"binding_message with a newline", "cl_poll", form("scope", "openid", "login_hint", "ada", "binding_message", "pay\nnow"), "invalid_binding_message"},
		{"binding_message too long", "cl_poll", form("scope", "openid", "login_hint", "ada", "binding_message", long), "invalid_binding_message"},
		{"binding_message not UTF-8", "cl_poll", form("scope", "openid", "login_hint", "ada", "binding_message", "\xff\xfe"), "invalid_binding_message"},
		{"requested_expiry zero", "cl_poll", form("scope", "openid", "login_hint", "ada", "requested_expiry", "0"), "invalid_request"},
		{"requested_expiry too long", "cl_poll", form("scope", "openid", "login_hint", "ada", "requested_expiry", "601"), "invalid_request"},
		{"requested_expiry not a number", "cl_poll", form("scope", "openid", "login_hint", "ada", "requested_expiry", "1e3"), "invalid_request"},
		{"authorization_details malformed", "cl_poll", form("scope", "openid", "login_hint", "ada", "authorization_details", "[{"), "invalid_authorization_details"},
		{"authorization_details of a type the client may not use", "cl_other", form("scope", "openid", "login_hint", "ada", "authorization_details", payment), "invalid_authorization_details"},
		{"ping without client_notification_token", "cl_ping", form("scope", "openid", "login_hint", "ada"), "invalid_request"},
		{"client_notification_token too long", "cl_ping", form("scope", "openid", "login_hint", "ada", "client_notification_token", strings.Repeat("t", ciba.MaxNotificationToken+1)), "invalid_request"},
		{"login_hint too long", "cl_poll", form("scope", "openid", "login_hint", strings.Repeat("a", 257)), "invalid_request"},
		{"id_token_hint not ours", "cl_poll", form("scope", "openid", "id_token_hint", "eyJhbGciOiJub25lIn0.e30."), "invalid_request"},
		{"unsigned request of a client that must sign", "cl_signed", form("scope", "openid", "login_hint", "ada"), "invalid_request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := f.start(t, tc.client, tc.v)
			if got := oauthCode(err); got != tc.want || resp != nil {
				t.Fatalf("Start: %v %v, want %s", resp, err, tc.want)
			}
		})
	}
	if got := f.dev.requests(); len(got) != 0 {
		t.Fatalf("refused requests reached the device: %+v", got)
	}
	if list, err := f.st.ListBackchannelRequests(t.Context(), "u-ada", f.clock()); err != nil || len(list) != 0 {
		t.Fatalf("refused requests were stored: %+v %v", list, err)
	}
	for i := range ciba.DefaultMaxPerClientHint {
		if _, err := f.start(t, "cl_poll", form("scope", "openid", "login_hint", "ada")); err != nil {
			t.Fatalf("request %d after the refusals: %v (a refusal counted against the hint)", i+1, err)
		}
	}
}

// TestStart_StoresTheRequestAndReachesTheCustomersDevice: a good request answers auth_req_id
// (with the home prefix), expires_in and interval 5; the stored request is keyed by the hash,
// holds no auth_req_id for a poll client, and the device gets the reference, never the
// auth_req_id.
func TestStart_StoresTheRequestAndReachesTheCustomersDevice(t *testing.T) {
	f := newFixture(t, nil)
	resp, err := f.start(t, "cl_poll", form("scope", "openid email", "login_hint", "  ADA ", "binding_message", "W4SP-42 pay €123.50",
		"requested_expiry", "300", "authorization_details", payment, "acr_values", oauth.ACRStrong))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.AuthReqID, oauth.PrefixAuthReqID) || resp.ExpiresIn != 300 || resp.Interval != ciba.Interval {
		t.Fatalf("answer %+v", resp)
	}
	r, err := f.st.GetBackchannelRequest(t.Context(), oauth.BackchannelRequestID(resp.AuthReqID), f.clock())
	if err != nil {
		t.Fatal(err)
	}
	if r.UID != "u-ada" || r.ClientID != "cl_poll" || r.State != oauth.CIBAPending || r.AuthReqID != "" || r.Mode != oauth.CIBAModePoll ||
		r.BindingMessage != "W4SP-42 pay €123.50" || !r.ExpiresAt.Equal(f.clock().Add(300*time.Second)) || len(r.AuthorizationDetails) == 0 ||
		!reflect.DeepEqual(r.ACRValues, []string{oauth.ACRStrong}) {
		t.Fatalf("stored %+v", r)
	}
	got := f.dev.requests()
	if len(got) != 1 || got[0].Ref != r.ID || got[0].UID != "u-ada" || got[0].ClientName != "Poll App" || got[0].BindingMessage != r.BindingMessage {
		t.Fatalf("device got %+v", got)
	}
	if b, _ := json.Marshal(got[0]); strings.Contains(string(b), resp.AuthReqID) {
		t.Fatal("the device was given the auth_req_id")
	}
}

// TestStart_UnknownCustomerIsAnsweredAsAKnownOneAndNeverReachesADevice: a hint naming nobody
// (or a disabled customer) gets the same answer, field for field but the random id, a request
// stored with no customer, and no device call.
func TestStart_UnknownCustomerIsAnsweredAsAKnownOneAndNeverReachesADevice(t *testing.T) {
	f := newFixture(t, nil)
	known, err := f.start(t, "cl_poll", form("scope", "openid", "login_hint", "ada"))
	if err != nil {
		t.Fatal(err)
	}
	for _, hint := range []string{"nobody", "off"} {
		unknown, err := f.start(t, "cl_poll", form("scope", "openid", "login_hint", hint))
		if err != nil {
			t.Fatalf("%s: %v", hint, err)
		}
		kj, _ := json.Marshal(known)
		uj, _ := json.Marshal(unknown)
		var km, um map[string]any
		json.Unmarshal(kj, &km)
		json.Unmarshal(uj, &um)
		if len(km) != len(um) || km["expires_in"] != um["expires_in"] || km["interval"] != um["interval"] ||
			len(known.AuthReqID) != len(unknown.AuthReqID) {
			t.Fatalf("%s: answers differ: %s vs %s", hint, kj, uj)
		}
		r, err := f.st.GetBackchannelRequest(t.Context(), oauth.BackchannelRequestID(unknown.AuthReqID), f.clock())
		if err != nil || r.UID != "" || r.State != oauth.CIBAPending {
			t.Fatalf("%s: stored %+v %v", hint, r, err)
		}
	}
	if got := f.dev.requests(); len(got) != 1 || got[0].UID != "u-ada" {
		t.Fatalf("device calls %+v, want only ada's", got)
	}
}

// TestStart_LimitsCountTheHintPerClientAndOverall: past MaxPerClientHint requests of one client
// for one hint, or MaxPerHint of all clients, a request is refused (access_denied, 429) with a
// description that names no customer; an unknown hint is counted exactly as a known one.
func TestStart_LimitsCountTheHintPerClientAndOverall(t *testing.T) {
	f := newFixture(t, func(d *ciba.Deps) { d.MaxPerClientHint, d.MaxPerHint = 2, 3 })
	for _, hint := range []string{"ada", "nobody"} {
		var answers []string
		for _, c := range []string{"cl_poll", "cl_poll", "cl_poll", "cl_other", "cl_other"} {
			_, err := f.start(t, c, form("scope", "openid", "login_hint", hint))
			var e *oauth.Error
			switch {
			case err == nil:
				answers = append(answers, "ok")
			case errors.As(err, &e) && e.Code == oauth.ErrCodeAccessDenied && e.Status == 429:
				if strings.Contains(e.Description, hint) {
					t.Fatalf("the refusal names the hint: %s", e.Description)
				}
				answers = append(answers, "limited")
			default:
				t.Fatalf("%s by %s: %v", hint, c, err)
			}
		}
		// Per client: the third of cl_poll; overall: cl_other's second is the fourth of the hint.
		if want := []string{"ok", "ok", "limited", "ok", "limited"}; !reflect.DeepEqual(answers, want) {
			t.Fatalf("%s: %v, want %v", hint, answers, want)
		}
	}
	f.advance(ciba.DefaultLimitWindow + time.Second)
	if _, err := f.start(t, "cl_poll", form("scope", "openid", "login_hint", "ada")); err != nil {
		t.Fatalf("after the window: %v", err)
	}
}

// TestStart_IDTokenHintNamesItsSubjectExpiredOrNot: one of our id_tokens issued to the client
// names its sub, also long expired (CIBA Core 7.1); another client's id_token or one signed by
// another key is invalid_request.
func TestStart_IDTokenHintNamesItsSubjectExpiredOrNot(t *testing.T) {
	f := newFixture(t, nil)
	old := f.idToken(t, "u-bob", "cl_poll", f.clock().Add(-48*time.Hour))
	resp, err := f.start(t, "cl_poll", form("scope", "openid", "id_token_hint", old))
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.st.GetBackchannelRequest(t.Context(), oauth.BackchannelRequestID(resp.AuthReqID), f.clock())
	if err != nil || r.UID != "u-bob" {
		t.Fatalf("stored %+v %v", r, err)
	}
	if _, err := f.start(t, "cl_other", form("scope", "openid", "id_token_hint", old)); oauthCode(err) != "invalid_request" {
		t.Fatalf("another client's id_token: %v", err)
	}
	forged := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": issuer, "sub": "u-bob", "aud": "cl_poll"})
	forged.Header["kid"] = "k1"
	raw, _ := forged.SignedString(f.key)
	if _, err := f.start(t, "cl_poll", form("scope", "openid", "id_token_hint", raw)); oauthCode(err) != "invalid_request" {
		t.Fatalf("an id_token signed by another key: %v", err)
	}
}

// TestStart_SignedRequestIsVerifiedAndItsJTIUsedOnce: a client registered with
// backchannel_authentication_request_signing_alg must sign; a good signed request is taken
// (its parameters only), the same jti again is refused, and each flaw of CIBA Core 7.1.1 is
// invalid_request.
func TestStart_SignedRequestIsVerifiedAndItsJTIUsedOnce(t *testing.T) {
	f := newFixture(t, nil)
	good := f.signedRequest(t, f.requestClaims(map[string]any{"binding_message": "SIGNED-1", "requested_expiry": 60}))
	resp, err := f.start(t, "cl_signed", url.Values{"request": {good}, "binding_message": {"from the form"}})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := f.st.GetBackchannelRequest(t.Context(), oauth.BackchannelRequestID(resp.AuthReqID), f.clock())
	if r.BindingMessage != "SIGNED-1" || resp.ExpiresIn != 60 || r.UID != "u-ada" {
		t.Fatalf("the signed request's parameters were not the ones used: %+v %+v", r, resp)
	}
	if _, err := f.start(t, "cl_signed", url.Values{"request": {good}}); oauthCode(err) != "invalid_request" {
		t.Fatalf("the same signed request again: %v", err)
	}
	now := f.clock()
	for name, claims := range map[string]map[string]any{
		"aud another server": f.requestClaims(map[string]any{"aud": "https://other.example"}),
		"iss another client": f.requestClaims(map[string]any{"iss": "cl_poll"}),
		"no jti":             f.requestClaims(map[string]any{"jti": nil}),
		"no iat":             f.requestClaims(map[string]any{"iat": nil}),
		"no nbf":             f.requestClaims(map[string]any{"nbf": nil}),
		"expired":            f.requestClaims(map[string]any{"exp": now.Unix()}),
		"lives over an hour": f.requestClaims(map[string]any{"exp": now.Add(61 * time.Minute).Unix()}),
	} {
		if _, err := f.start(t, "cl_signed", url.Values{"request": {f.signedRequest(t, claims)}}); oauthCode(err) != "invalid_request" {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestStart_FAPI2ClientMustSignAndUseKeyAuthentication: a fapi2 client's unsigned request is
// refused (FAPI-CIBA 5.2.2), as is a signed one without a binding_message (5.2.2-2) and a
// fapi2 client with a secret; its signed request with a binding_message is taken.
func TestStart_FAPI2ClientMustSignAndUseKeyAuthentication(t *testing.T) {
	f := newFixture(t, nil)
	c := f.client(t, "cl_signed")
	c.Profile, c.BackchannelAuthenticationRequestSigningAlg = oauth.ProfileFAPI2, ""
	if _, err := f.svc.Start(t.Context(), c, form("scope", "openid", "login_hint", "ada")); oauthCode(err) != "invalid_request" {
		t.Fatalf("an unsigned request of a fapi2 client: %v", err)
	}
	c.BackchannelAuthenticationRequestSigningAlg = "ES256"
	if _, err := f.svc.Start(t.Context(), c, url.Values{"request": {f.signedRequest(t, f.requestClaims(nil))}}); oauthCode(err) != "invalid_request" {
		t.Fatalf("a signed request of a fapi2 client without a binding_message: %v", err)
	}
	if _, err := f.svc.Start(t.Context(), c, url.Values{"request": {f.signedRequest(t, f.requestClaims(map[string]any{"binding_message": "FAPI-1"}))}}); err != nil {
		t.Fatalf("a signed request of a fapi2 client with a binding_message: %v", err)
	}
	c.TokenEndpointAuthMethod = oauth.AuthMethodSecretBasic
	if _, err := f.svc.Start(t.Context(), c, form("scope", "openid", "login_hint", "ada")); oauthCode(err) != "unauthorized_client" {
		t.Fatalf("a fapi2 client with a secret: %v", err)
	}
}

// started starts a request of ada (or hint) by client and returns its auth_req_id and ref.
func (f *fixture) started(t *testing.T, client string, v url.Values) (string, string) {
	t.Helper()
	if v == nil {
		v = form("scope", "openid email", "login_hint", "ada")
	}
	resp, err := f.start(t, client, v)
	if err != nil {
		t.Fatal(err)
	}
	return resp.AuthReqID, oauth.BackchannelRequestID(resp.AuthReqID)
}

var strong = []string{"hwk", "user", "mfa"}

// TestDecide_EveryActionOnEveryState: on a pending, decided or expired request, an approval or
// a denial by its customer, another customer and nobody: only the customer's first decision
// of a pending request is recorded; another's and an expired one are ErrUnknownRequest (alike),
// a second is ErrDecided; a refused one changes nothing.
func TestDecide_EveryActionOnEveryState(t *testing.T) {
	for _, approve := range []bool{true, false} {
		for _, who := range []string{"u-ada", "u-bob", ""} {
			for _, state := range []string{"pending", "decided", "expired"} {
				t.Run(state+"/"+who+"/"+map[bool]string{true: "approve", false: "deny"}[approve], func(t *testing.T) {
					f := newFixture(t, nil)
					_, ref := f.started(t, "cl_poll", nil)
					switch state {
					case "decided":
						if err := f.svc.Decide(t.Context(), ciba.Decision{Ref: ref, UID: "u-ada", Approve: false}); err != nil {
							t.Fatal(err)
						}
					case "expired":
						f.advance(ciba.DefaultExpiry)
					}
					before, _ := f.st.GetBackchannelRequest(t.Context(), ref, f.clock())
					err := f.svc.Decide(t.Context(), ciba.Decision{Ref: ref, UID: who, Approve: approve, AMR: strong, AuthTime: f.clock()})
					var want error
					switch {
					case who != "u-ada" || state == "expired":
						want = ciba.ErrUnknownRequest
					case state == "decided":
						want = ciba.ErrDecided
					}
					if !errors.Is(err, want) && !(want == nil && err == nil) {
						t.Fatalf("Decide: %v, want %v", err, want)
					}
					after, _ := f.st.GetBackchannelRequest(t.Context(), ref, f.clock())
					if want != nil && !reflect.DeepEqual(before, after) {
						t.Fatalf("a refused decision changed the request: %+v -> %+v", before, after)
					}
					if want == nil {
						wantState := map[bool]string{true: oauth.CIBAApproved, false: oauth.CIBADenied}[approve]
						if after.State != wantState || (approve && (after.Grant == nil || after.Grant.UID != "u-ada" || after.Grant.Claims.Email != "ada@example.com")) {
							t.Fatalf("decided %+v", after)
						}
					}
				})
			}
		}
	}
}

// TestDecide_ApprovalWithoutStrongAuthenticationIsRefused: a password alone (or nothing) is
// ErrNotStrong and the request stays pending; a denial needs no factor.
func TestDecide_ApprovalWithoutStrongAuthenticationIsRefused(t *testing.T) {
	f := newFixture(t, nil)
	_, ref := f.started(t, "cl_poll", nil)
	for _, amr := range [][]string{nil, {"pwd"}, {"otp"}} {
		if err := f.svc.Decide(t.Context(), ciba.Decision{Ref: ref, UID: "u-ada", Approve: true, AMR: amr}); !errors.Is(err, ciba.ErrNotStrong) {
			t.Fatalf("approval with %v: %v", amr, err)
		}
	}
	if r, _ := f.st.GetBackchannelRequest(t.Context(), ref, f.clock()); r.State != oauth.CIBAPending {
		t.Fatalf("state %s after weak approvals", r.State)
	}
	if err := f.svc.Decide(t.Context(), ciba.Decision{Ref: ref, UID: "u-ada"}); err != nil {
		t.Fatalf("denial: %v", err)
	}
}

// TestDecide_PaymentApprovalNeedsEvidenceOverItsDetails: a request holding a payment is
// approved only with evidence over its authorization_details (dynamic linking); without it,
// or with evidence over other details, ErrPaymentLink and nothing written.
func TestDecide_PaymentApprovalNeedsEvidenceOverItsDetails(t *testing.T) {
	f := newFixture(t, nil)
	_, ref := f.started(t, "cl_poll", form("scope", "openid", "login_hint", "ada", "authorization_details", payment))
	r, _ := f.st.GetBackchannelRequest(t.Context(), ref, f.clock())
	nonce := make([]byte, 32)
	other := oauth.NewTOTPEvidence(json.RawMessage(strings.Replace(payment, "123.50", "9123.50", 1)), nonce, f.clock())
	for _, ev := range []*oauth.PaymentEvidence{nil, other} {
		if err := f.svc.Decide(t.Context(), ciba.Decision{Ref: ref, UID: "u-ada", Approve: true, AMR: strong, Evidence: ev}); !errors.Is(err, ciba.ErrPaymentLink) {
			t.Fatalf("approval with evidence %v: %v", ev, err)
		}
	}
	if got, _ := f.st.GetBackchannelRequest(t.Context(), ref, f.clock()); got.State != oauth.CIBAPending {
		t.Fatalf("state %s after unlinked approvals", got.State)
	}
	ev := oauth.NewTOTPEvidence(r.AuthorizationDetails, nonce, f.clock())
	if err := f.svc.Decide(t.Context(), ciba.Decision{Ref: ref, UID: "u-ada", Approve: true, AMR: strong, Evidence: ev}); err != nil {
		t.Fatalf("linked approval: %v", err)
	}
	if got, _ := f.st.GetBackchannelRequest(t.Context(), ref, f.clock()); got.Grant == nil || got.Grant.PaymentEvidence == nil {
		t.Fatalf("approved %+v", got)
	}
}

// TestDecide_FiftyRacingDecisionsOneWins: of 50 racing decisions (approvals and denials) on one
// request exactly one is recorded; the others are ErrDecided.
func TestDecide_FiftyRacingDecisionsOneWins(t *testing.T) {
	f := newFixture(t, nil)
	_, ref := f.started(t, "cl_ping", form("scope", "openid", "login_hint", "ada", "client_notification_token", "nt-1"))
	var wg sync.WaitGroup
	var won, decided, other atomic.Int32
	for i := range 50 {
		wg.Go(func() {
			err := f.svc.Decide(context.Background(), ciba.Decision{Ref: ref, UID: "u-ada", Approve: i%2 == 0, AMR: strong})
			switch {
			case err == nil:
				won.Add(1)
			case errors.Is(err, ciba.ErrDecided):
				decided.Add(1)
			default:
				other.Add(1)
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if won.Load() != 1 || decided.Load() != 49 {
		t.Fatalf("%d won, %d decided before, %d other; want 1 and 49", won.Load(), decided.Load(), other.Load())
	}
	if n := len(f.ping.pings); n != 1 {
		t.Fatalf("%d pings, want 1 (the winner's)", n)
	}
}

// TestDecide_PingsAPingClientOnceWithItsTokenAndNeverAPollClient.
func TestDecide_PingsAPingClientOnceWithItsTokenAndNeverAPollClient(t *testing.T) {
	f := newFixture(t, nil)
	authReqID, ref := f.started(t, "cl_ping", form("scope", "openid", "login_hint", "ada", "client_notification_token", "nt-secret"))
	_, pollRef := f.started(t, "cl_poll", nil)
	for _, r := range []string{ref, pollRef} {
		if err := f.svc.Decide(t.Context(), ciba.Decision{Ref: r, UID: "u-ada", Approve: true, AMR: strong}); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"https://ping.example/cb nt-secret " + authReqID}; !reflect.DeepEqual(f.ping.pings, want) {
		t.Fatalf("pings %q, want %q", f.ping.pings, want)
	}
}

// TestPendingAndRequest_ShowOnlyTheCustomersPendingRequests: the listing and the single read
// show the customer's own pending, unexpired requests, newest first; never another's, a
// decided one or an expired one.
func TestPendingAndRequest_ShowOnlyTheCustomersPendingRequests(t *testing.T) {
	f := newFixture(t, nil)
	_, first := f.started(t, "cl_poll", nil)
	f.advance(time.Second)
	_, second := f.started(t, "cl_other", form("scope", "openid", "login_hint", "ada", "binding_message", "B-2"))
	_, bobs := f.started(t, "cl_poll", form("scope", "openid", "login_hint", "bob"))
	list, err := f.svc.Pending(t.Context(), "u-ada")
	if err != nil || len(list) != 2 || list[0].Ref != second || list[1].Ref != first || list[0].BindingMessage != "B-2" || list[0].ClientName != "Other App" {
		t.Fatalf("Pending: %+v %v", list, err)
	}
	if _, err := f.svc.Request(t.Context(), bobs, "u-ada"); !errors.Is(err, ciba.ErrUnknownRequest) {
		t.Fatalf("another customer's request: %v", err)
	}
	if r, err := f.svc.Request(t.Context(), first, "u-ada"); err != nil || r.Ref != first {
		t.Fatalf("own request: %+v %v", r, err)
	}
	if err := f.svc.Decide(t.Context(), ciba.Decision{Ref: first, UID: "u-ada"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Request(t.Context(), first, "u-ada"); !errors.Is(err, ciba.ErrUnknownRequest) {
		t.Fatalf("a decided request: %v", err)
	}
	f.advance(ciba.DefaultExpiry)
	if list, err := f.svc.Pending(t.Context(), "u-ada"); err != nil || len(list) != 0 {
		t.Fatalf("after expiry: %+v %v", list, err)
	}
}

// TestNormalizeUsername_IsTheSignIns: a login_hint names a username as the sign-in reads one.
func TestNormalizeUsername_IsTheSignIns(t *testing.T) {
	for _, s := range []string{"Ada", "  ada ", "ADA\t", "Ünïcode", ""} {
		if ciba.NormalizeUsername(s) != authn.NormalizeUsername(s) {
			t.Errorf("%q: %q vs %q", s, ciba.NormalizeUsername(s), authn.NormalizeUsername(s))
		}
	}
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAudit_EveryDecisionAndRefusalIsAuditedWithoutTheAuthReqIDHintOrMessage: ciba_requested,
// ciba_refused (with its reason), ciba_approved and ciba_denied are written with the request's
// reference; no log or audit line carries an auth_req_id, an id_token_hint, a notification
// token or a binding message.
func TestAudit_EveryDecisionAndRefusalIsAuditedWithoutTheAuthReqIDHintOrMessage(t *testing.T) {
	var out syncBuffer
	logger := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f := newFixture(t, func(d *ciba.Deps) { d.Log = logger })
	f.tokens.Audit = logger
	hint := f.idToken(t, "u-ada", "cl_ping", f.clock())
	a1, ref1 := f.started(t, "cl_ping", form("scope", "openid", "id_token_hint", hint, "binding_message", "SECRET-MSG-1", "client_notification_token", "nt-secret-1"))
	a2, ref2 := f.started(t, "cl_poll", form("scope", "openid", "login_hint", "ada", "binding_message", "SECRET-MSG-2"))
	if _, err := f.start(t, "cl_poll", form("scope", "openid", "login_hint", "ada", "binding_message", "<b>SECRET-MSG-3</b>")); err == nil {
		t.Fatal("a hostile binding message was accepted")
	}
	if err := f.svc.Decide(t.Context(), ciba.Decision{Ref: ref1, UID: "u-ada", Approve: true, AMR: strong}); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Decide(t.Context(), ciba.Decision{Ref: ref2, UID: "u-ada"}); err != nil {
		t.Fatal(err)
	}
	logs := out.String()
	for _, want := range []string{`"event":"ciba_requested"`, `"event":"ciba_approved"`, `"event":"ciba_denied"`, `"event":"ciba_refused"`, `"event":"ciba_pinged"`,
		`"reason":"invalid_binding_message"`, ref1, ref2} {
		if !strings.Contains(logs, want) {
			t.Errorf("no %s in the logs:\n%s", want, logs)
		}
	}
	for _, secret := range []string{a1, a2, hint, "nt-secret-1", "SECRET-MSG"} {
		if strings.Contains(logs, secret) {
			t.Errorf("the logs carry %q", secret)
		}
	}
}

// failingDevice is a channel that cannot be reached.
type failingDevice struct{ calls atomic.Int32 }

func (d *failingDevice) Reach(context.Context, ciba.DeviceRequest) error {
	d.calls.Add(1)
	return errors.New("the channel is down")
}

// TestStart_UnreachableDeviceStillAnswersAndLeavesTheRequestToExpire: a device that cannot be
// reached does not change the client's answer (an error would tell a known customer from an
// unknown one): the request is stored, pending, and the failure is audited.
func TestStart_UnreachableDeviceStillAnswersAndLeavesTheRequestToExpire(t *testing.T) {
	var out syncBuffer
	logger := slog.New(slog.NewJSONHandler(&out, nil))
	dev := &failingDevice{}
	f := newFixture(t, func(d *ciba.Deps) { d.Device, d.Log = dev, logger })
	f.tokens.Audit = logger
	resp, err := f.start(t, "cl_poll", form("scope", "openid", "login_hint", "ada"))
	if err != nil || dev.calls.Load() != 1 {
		t.Fatalf("Start: %+v %v (%d device calls)", resp, err, dev.calls.Load())
	}
	if r, err := f.st.GetBackchannelRequest(t.Context(), oauth.BackchannelRequestID(resp.AuthReqID), f.clock()); err != nil || r.State != oauth.CIBAPending {
		t.Fatalf("stored %+v %v", r, err)
	}
	if !strings.Contains(out.String(), `"event":"ciba_device_failed"`) {
		t.Fatalf("no ciba_device_failed in\n%s", out.String())
	}
}
