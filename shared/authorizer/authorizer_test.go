package authorizer_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/golang-jwt/jwt/v5"

	"github.com/acmebank/authserver/shared/authorizer"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// fixture is a token domain over the real embedded store, with a clock the tests move.
type fixture struct {
	svc    *oauth.Service
	store  *embedded.Store
	clock  *clock
	client *oauth.Client
	az     *authorizer.Authorizer
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newFixture(tb testing.TB) *fixture {
	tb.Helper()
	st, err := embedded.Open(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	clk := &clock{now: time.Now()}
	svc := &oauth.Service{Clients: st, Interactions: st, Grants: st, Clock: clk, Signer: stubSigner{},
		Issuer: "https://auth.example/v2/authentication/oauth2",
		Lifetimes: oauth.Lifetimes{AccessToken: time.Hour, RefreshToken: 24 * time.Hour, Grant: 30 * 24 * time.Hour,
			Code: 2 * time.Minute, IDToken: time.Hour}}
	return &fixture{svc: svc, store: st, clock: clk, client: &oauth.Client{ID: "cl-app"},
		az: authorizer.New(svc, authorizer.DefaultRoutes(), nil)}
}

// stubSigner stands in for the id_token signer, which the authorizer never sees: the
// exchange only needs some id_token string when openid is granted.
type stubSigner struct{}

func (stubSigner) SignJWT(context.Context, string, jwt.MapClaims) (string, error) {
	return "stub.id.token", nil
}

func (stubSigner) SignJWTWithType(context.Context, string, string, jwt.MapClaims) (string, error) {
	return "stub.signed.jwt", nil
}

// issue runs a real code exchange and returns the access and refresh tokens.
func (f *fixture) issue(tb testing.TB, scopes oauth.Scopes, certThumbprint string) (access, refresh string) {
	tb.Helper()
	ctx := context.Background()
	now := f.clock.Now()
	g := oauth.Grant{ID: oauth.NewID(oauth.PrefixGrant), ClientID: f.client.ID, UID: "uid-ada", Scopes: scopes,
		CompanyProfileID: "cp-7", CompanyUserID: "cu-9", AuthTime: now, CreatedAt: now, ExpiresAt: now.Add(30 * 24 * time.Hour)}
	code := oauth.NewSecret(oauth.PrefixCode)
	if err := f.store.CreateCode(ctx, oauth.Code{Hash: oauth.HashToken(code), Grant: g, RedirectURI: "https://app.example/cb",
		ExpiresAt: now.Add(time.Minute)}); err != nil {
		tb.Fatal(err)
	}
	resp, err := f.svc.ExchangeCode(ctx, f.client, oauth.CodeExchange{Code: code, RedirectURI: "https://app.example/cb", CertThumbprint: certThumbprint})
	if err != nil {
		tb.Fatal(err)
	}
	return resp.AccessToken, resp.RefreshToken
}

// baseEvent is the sample event of events/, as `sam local invoke -e` sends it.
func baseEvent(tb testing.TB, name string) events.APIGatewayV2CustomAuthorizerV2Request {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "events", name))
	if err != nil {
		tb.Fatal(err)
	}
	var ev events.APIGatewayV2CustomAuthorizerV2Request
	if err := json.Unmarshal(b, &ev); err != nil {
		tb.Fatal(err)
	}
	return ev
}

// event returns the sample event with authorization as its header (absent when empty) and
// certPEM as the mutual-TLS client certificate.
func event(tb testing.TB, name, authorization, certPEM string) events.APIGatewayV2CustomAuthorizerV2Request {
	ev := baseEvent(tb, name)
	delete(ev.Headers, "authorization")
	ev.IdentitySource = nil
	if authorization != "" {
		ev.Headers["authorization"] = authorization
		ev.IdentitySource = []string{authorization}
	}
	ev.RequestContext.Authentication.ClientCert.ClientCertPem = certPEM
	return ev
}

// newCert returns a self-signed client certificate as PEM and its RFC 8705 thumbprint.
func newCert(tb testing.TB, cn string) (string, string) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	sum := sha256.Sum256(der)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), base64.RawURLEncoding.EncodeToString(sum[:])
}

func TestHandleEvent_Decisions(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	openid := oauth.Scopes{oauth.ScopeOpenID, oauth.ScopeEmail}
	valid, _ := f.issue(t, openid, "")
	noOpenID, _ := f.issue(t, oauth.Scopes{oauth.ScopeEmail}, "")
	certA, thumbA := newCert(t, "app-a")
	certB, _ := newCert(t, "app-b")
	bound, _ := f.issue(t, openid, thumbA)
	revokedAccess, _ := f.issue(t, openid, "")
	if err := f.svc.Revoke(ctx, f.client, revokedAccess, "access_token"); err != nil {
		t.Fatal(err)
	}
	revokedByRefresh, refresh := f.issue(t, openid, "")
	if err := f.svc.Revoke(ctx, f.client, refresh, "refresh_token"); err != nil {
		t.Fatal(err)
	}
	_, refreshOnly := f.issue(t, openid, "")

	tests := []struct {
		name, file, auth, cert string
		allow                  bool
	}{
		{"valid token on accounts", "authorizer.json", "Bearer " + valid, "", true},
		{"valid token on a deprecated invoice route", "authorizer-deprecated-invoice.json", "Bearer " + valid, "", true},
		{"scheme is case-insensitive", "authorizer.json", "bEaReR " + valid, "", true},
		{"missing header", "authorizer.json", "", "", false},
		{"another scheme", "authorizer.json", "Basic " + base64.StdEncoding.EncodeToString([]byte("a:b")), "", false},
		{"bearer without token", "authorizer.json", "Bearer", "", false},
		{"two tokens", "authorizer.json", "Bearer " + valid + " " + valid, "", false},
		{"repeated headers joined by API Gateway", "authorizer.json", "Bearer " + valid + ", Bearer " + valid, "", false},
		{"token with forbidden characters", "authorizer.json", "Bearer " + valid + "\"", "", false},
		{"unknown token", "authorizer.json", "Bearer at_" + base64.RawURLEncoding.EncodeToString(make([]byte, 32)), "", false},
		{"refresh token used as access token", "authorizer.json", "Bearer " + refreshOnly, "", false},
		{"access token revoked", "authorizer.json", "Bearer " + revokedAccess, "", false},
		{"access token of a grant revoked through its refresh token", "authorizer.json", "Bearer " + revokedByRefresh, "", false},
		{"token without the route's scope", "authorizer.json", "Bearer " + noOpenID, "", false},
		{"bound token with its certificate", "authorizer.json", "Bearer " + bound, certA, true},
		{"bound token with another certificate", "authorizer.json", "Bearer " + bound, certB, false},
		{"bound token without certificate", "authorizer.json", "Bearer " + bound, "", false},
		{"bound token with a garbled certificate", "authorizer.json", "Bearer " + bound, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", false},
		{"unbound token with a certificate", "authorizer.json", "Bearer " + valid, certB, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := f.az.HandleEvent(ctx, event(t, tc.file, tc.auth, tc.cert))
			if err != nil {
				t.Fatalf("HandleEvent failed: %v", err)
			}
			if resp.IsAuthorized != tc.allow {
				t.Fatalf("isAuthorized = %v, want %v", resp.IsAuthorized, tc.allow)
			}
			if !tc.allow {
				if resp.Context != nil {
					t.Errorf("a denial carries context %v", resp.Context)
				}
				return
			}
			want := map[string]any{"uid": "uid-ada", "companyProfileId": "cp-7", "companyUserId": "cu-9", "client_id": "cl-app", "scope": "openid email", "payment": ""}
			if len(resp.Context) != len(want) {
				t.Errorf("context = %v, want %v", resp.Context, want)
			}
			for k, v := range want {
				if resp.Context[k] != v {
					t.Errorf("context[%s] = %v, want %v", k, resp.Context[k], v)
				}
			}
		})
	}
}

func TestHandleEvent_ExpiredTokenDenied(t *testing.T) {
	f := newFixture(t)
	tok, _ := f.issue(t, oauth.Scopes{oauth.ScopeOpenID}, "")
	ev := event(t, "authorizer.json", "Bearer "+tok, "")
	if resp, _ := f.az.HandleEvent(context.Background(), ev); !resp.IsAuthorized {
		t.Fatal("fresh token refused")
	}
	f.clock.advance(time.Hour)
	if resp, err := f.az.HandleEvent(context.Background(), ev); err != nil || resp.IsAuthorized {
		t.Fatalf("token at its expiry: isAuthorized=%v err=%v, want denied", resp.IsAuthorized, err)
	}
}

func TestHandleEvent_RouteTable(t *testing.T) {
	f := newFixture(t)
	transfers, _ := f.issue(t, oauth.Scopes{oauth.ScopeOpenID, oauth.ScopeTransfersWriteDotted}, "")
	plain, _ := f.issue(t, oauth.Scopes{oauth.ScopeOpenID}, "")
	routes, err := authorizer.ParseRoutes(`{"GET /v2/bank/accounts":["openid","bank:transfers:write"]}`)
	if err != nil {
		t.Fatal(err)
	}
	az := authorizer.New(f.svc, routes, nil)
	tests := []struct {
		name, file, token, route string
		allow                    bool
	}{
		{"overridden route needs the extra scope", "authorizer.json", plain, "", false},
		{"either spelling of the transfers scope satisfies it", "authorizer.json", transfers, "", true},
		{"routes not overridden keep their default", "authorizer-deprecated-invoice.json", plain, "", true},
		{"a route missing from the table admits nobody", "authorizer.json", transfers, "DELETE /v2/bank/accounts", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := event(t, tc.file, "Bearer "+tc.token, "")
			if tc.route != "" {
				ev.RouteKey = tc.route
			}
			resp, err := az.HandleEvent(context.Background(), ev)
			if err != nil || resp.IsAuthorized != tc.allow {
				t.Fatalf("isAuthorized=%v err=%v, want %v", resp.IsAuthorized, err, tc.allow)
			}
		})
	}
}

// failingTokens is a store outage: the authorizer must fail the invocation (API Gateway's
// 500, retryable), not deny the client as if its token were bad.
type failingTokens struct{}

func (failingTokens) ValidatePresented(context.Context, oauth.Presentation) (oauth.Token, error) {
	return oauth.Token{}, oauth.Unavailable(errors.Join(oauth.ErrTransient, errors.New("throttled")))
}

func TestHandleEvent_StoreFailureFailsTheInvocation(t *testing.T) {
	az := authorizer.New(failingTokens{}, authorizer.DefaultRoutes(), nil)
	_, err := az.HandleEvent(context.Background(), event(t, "authorizer.json", "Bearer at_x", ""))
	if err == nil {
		t.Fatal("a store failure was answered as a decision")
	}
}

func TestBearerToken(t *testing.T) {
	tests := []struct {
		header, token string
		err           error
		code          string
	}{
		{"Bearer at_abc-._~+/==", "at_abc-._~+/==", nil, ""},
		{"bearer at_x", "at_x", nil, ""},
		{"BEARER   at_x", "at_x", nil, ""},
		{"", "", authorizer.ErrNoToken, ""},
		{"Basic YTpi", "", authorizer.ErrNoToken, ""},
		{"Bearertoken", "", authorizer.ErrNoToken, ""},
		{"Bearer", "", nil, oauth.ErrCodeInvalidRequest},
		{"Bearer ", "", nil, oauth.ErrCodeInvalidRequest},
		{"Bearer a b", "", nil, oauth.ErrCodeInvalidRequest},
		{"Bearer a,b", "", nil, oauth.ErrCodeInvalidRequest},
		{"Bearer ===", "", nil, oauth.ErrCodeInvalidRequest},
		{"Bearer a=b", "", nil, oauth.ErrCodeInvalidRequest},
		{"Bearer é", "", nil, oauth.ErrCodeInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.header, func(t *testing.T) {
			got, err := authorizer.BearerToken(tc.header)
			switch {
			case tc.err != nil:
				if err != tc.err {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
			case tc.code != "":
				if err == nil || oauth.AsError(err).Code != tc.code || err == authorizer.ErrNoToken {
					t.Fatalf("err = %v, want %s", err, tc.code)
				}
			default:
				if err != nil || got != tc.token {
					t.Fatalf("got %q, %v; want %q", got, err, tc.token)
				}
			}
		})
	}
}

func TestChallenge(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"no token: no error code, both schemes", authorizer.ErrNoToken, `Bearer realm="acmebank", DPoP algs="ES256 PS256 EdDSA RS256"`},
		{"DPoP presentation: the DPoP scheme", authorizer.DPoPAware(oauth.InvalidToken("expired"), true), `DPoP algs="ES256 PS256 EdDSA RS256", error="invalid_token", error_description="expired"`},
		{"bad proof: the DPoP scheme", authorizer.DPoPAware(oauth.InvalidDPoPProof("old"), false), `DPoP algs="ES256 PS256 EdDSA RS256", error="invalid_dpop_proof", error_description="old"`},
		{"invalid token", oauth.InvalidToken("expired"), `Bearer realm="acmebank", error="invalid_token", error_description="expired"`},
		{"malformed", oauth.InvalidRequest("bad"), `Bearer realm="acmebank", error="invalid_request", error_description="bad"`},
		{"insufficient scope names the scope", &authorizer.ScopeError{Err: oauth.InsufficientScope("more"), Required: oauth.Scopes{"openid", "bank:transfers:write"}},
			`Bearer realm="acmebank", error="insufficient_scope", error_description="more", scope="openid bank:transfers:write"`},
		{"server failure: no challenge", oauth.ServerError(errors.New("boom")), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := authorizer.Challenge(tc.err); got != tc.want {
				t.Errorf("Challenge = %s\nwant        %s", got, tc.want)
			}
		})
	}
}

func TestParseRoutes(t *testing.T) {
	tests := []struct {
		name, js string
		ok       bool
	}{
		{"empty means defaults", "", true},
		{"override and add", `{"GET /v2/bank/accounts":["openid","bank:transfers.write"],"POST /v2/bank/transfers":["bank:transfers:write"]}`, true},
		{"empty list admits any token", `{"GET /invoicing/invoices":[]}`, true},
		{"unknown scope", `{"GET /v2/bank/accounts":["accounts:read"]}`, false},
		{"not a route key", `{"/v2/bank/accounts":["openid"]}`, false},
		{"lower-case method", `{"get /v2/bank/accounts":["openid"]}`, false},
		{"not JSON", `GET /v2/bank/accounts=openid`, false},
		{"scopes as a string", `{"GET /v2/bank/accounts":"openid"}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := authorizer.ParseRoutes(tc.js)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if err != nil {
				return
			}
			for k := range authorizer.DefaultRoutes() {
				if _, ok := r.Required(k); !ok {
					t.Errorf("default route %s lost", k)
				}
			}
		})
	}
	r, _ := authorizer.ParseRoutes(`{"GET /v2/bank/accounts":["openid","bank:transfers.write"]}`)
	if got, _ := r.Required(authorizer.RouteAccounts); got.String() != "openid bank:transfers.write" {
		t.Errorf("override = %q", got)
	}
	if got, _ := r.Required(authorizer.RouteInvoices); got.String() != "openid" {
		t.Errorf("default kept = %q", got)
	}
}

func TestDefaultRoutes_CoverEveryProtectedRoute(t *testing.T) {
	r := authorizer.DefaultRoutes()
	for _, k := range []string{"GET /v2/bank/accounts", "GET /invoicing/invoices", "GET /invoicing/invoices/{invoiceId}",
		"GET /invoices/query", "GET /invoices/{invoiceId}"} {
		if s, ok := r.Required(k); !ok || len(s) == 0 {
			t.Errorf("%s: no default scopes", k)
		}
	}
}

func TestCertThumbprintPEM(t *testing.T) {
	certPEM, want := newCert(t, "x")
	if got := authorizer.CertThumbprintPEM(certPEM); got != want {
		t.Errorf("thumbprint = %s, want %s", got, want)
	}
	for _, bad := range []string{"", "junk", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"} {
		if got := authorizer.CertThumbprintPEM(bad); got != "" {
			t.Errorf("CertThumbprintPEM(%q) = %q, want empty", bad, got)
		}
	}
}

// BenchmarkAuthorizer measures one authorizer invocation on the embedded store: event in,
// decision out (bearer parsing, one store read, scope check, context).
func BenchmarkAuthorizer(b *testing.B) {
	f := newFixture(b)
	certPEM, thumb := newCert(b, "bench")
	cases := []struct {
		name string
		ev   events.APIGatewayV2CustomAuthorizerV2Request
	}{
		{"allowed", event(b, "authorizer.json", "Bearer "+must(f.issue(b, oauth.Scopes{oauth.ScopeOpenID}, "")), "")},
		{"allowed_bound_mtls", event(b, "authorizer.json", "Bearer "+must(f.issue(b, oauth.Scopes{oauth.ScopeOpenID}, thumb)), certPEM)},
		{"denied_unknown", event(b, "authorizer.json", "Bearer at_unknownTokenUnknownTokenUnknownTokenUnknow", "")},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			start := cpuTime()
			for b.Loop() {
				if _, err := f.az.HandleEvent(ctx, c.ev); err != nil {
					b.Fatal(err)
				}
			}
			// Process CPU per request: steadier than wall time on a shared, loaded machine.
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N)/1e3, "cpu-µs/op")
		})
	}
}

// BenchmarkAuthorizerInvocation is what one Lambda invocation of the authorizer costs besides
// the runtime's own transport: the event's JSON decoded into the aws-lambda-go type (as the
// runtime does, by reflection), the decision, and the response encoded. The decoding of the
// 1.2 KB event costs far more than the decision (BenchmarkAuthorizer).
func BenchmarkAuthorizerInvocation(b *testing.B) {
	f := newFixture(b)
	// The sample event as API Gateway sends it, with a live token in place of its sample one.
	raw, err := os.ReadFile(filepath.Join("..", "..", "events", "authorizer.json"))
	if err != nil {
		b.Fatal(err)
	}
	payload := []byte(strings.ReplaceAll(string(raw), "at_sampleTokenThatWasNeverIssued", must(f.issue(b, oauth.Scopes{oauth.ScopeOpenID}, ""))))
	ctx := context.Background()
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		var ev events.APIGatewayV2CustomAuthorizerV2Request
		if err := json.Unmarshal(payload, &ev); err != nil {
			b.Fatal(err)
		}
		resp, err := f.az.HandleEvent(ctx, ev)
		if err != nil || !resp.IsAuthorized {
			b.Fatalf("isAuthorized=%v err=%v", resp.IsAuthorized, err)
		}
		if _, err := json.Marshal(resp); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N)/1e3, "cpu-µs/op")
}

func must(access, _ string) string { return access }

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestHandleEvent_PathParameterThatEscapesItsRouteIsDenied: the Lambda authorizer denies an
// invoice id that holds a path separator, a dot segment or a double-encoded separator, raw as
// API Gateway passes it or decoded, even with a valid token; ordinary ids are allowed.
func TestHandleEvent_PathParameterThatEscapesItsRouteIsDenied(t *testing.T) {
	f := newFixture(t)
	valid, _ := f.issue(t, oauth.Scopes{oauth.ScopeOpenID}, "")
	for _, tc := range []struct {
		id      string
		allowed bool
	}{
		{"INV-1", true}, {"INV%201", true}, {"INV 1", true}, {"INV.1", true}, {"..INV", true},
		{"..%2F..%2Fadmin", false}, {"../../admin", false}, {"..%2f", false}, {"%2e%2e", false}, {"..", false}, {".", false},
		{`a\b`, false}, {"a%5Cb", false}, {"..%252F..%252Fadmin", false}, {"a%00b", false}, {"a\nb", false}, {"%zz", false}, {"", false},
	} {
		ev := event(t, "authorizer-deprecated-invoice.json", "Bearer "+valid, "")
		ev.PathParameters = map[string]string{"invoiceId": tc.id}
		resp, err := f.az.HandleEvent(context.Background(), ev)
		if err != nil || resp.IsAuthorized != tc.allowed {
			t.Errorf("invoiceId %q: authorized %v (%v), want %v", tc.id, resp.IsAuthorized, err, tc.allowed)
		}
	}
}

// TestAuthorize_ClientOnlyTokenOnlyOnClientRoutes: a client_credentials token, holding the
// route's scopes, is accepted only on a route of ClientRoutes, with the client and no user;
// on any other route, and on every route when ClientRoutes is empty (the default), it is
// insufficient_scope. A user's token is unaffected.
func TestAuthorize_ClientOnlyTokenOnlyOnClientRoutes(t *testing.T) {
	f := newFixture(t)
	client := &oauth.Client{ID: "cl-m2m", Scopes: []string{oauth.ScopeTransfersWrite}}
	resp, err := f.svc.ClientCredentials(context.Background(), client, oauth.ClientCredentialsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	user, _ := f.issue(t, oauth.Scopes{oauth.ScopeOpenID, oauth.ScopeTransfersWrite}, "")
	routes, err := authorizer.ParseRoutes(`{"GET /v2/bank/accounts":["bank:transfers:write"],"GET /invoicing/invoices":["bank:transfers:write"]}`)
	if err != nil {
		t.Fatal(err)
	}
	clientRoutes, err := authorizer.ParseClientRoutes("GET /v2/bank/accounts", routes)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, token, route string
		clientRoutes       authorizer.ClientRoutes
		wantUID            string // "-": refused
	}{
		{"client token on a client route", resp.AccessToken, authorizer.RouteAccounts, clientRoutes, ""},
		{"client token on another route", resp.AccessToken, authorizer.RouteInvoices, clientRoutes, "-"},
		{"client token with no client routes (the default)", resp.AccessToken, authorizer.RouteAccounts, nil, "-"},
		{"user token on a client route", user, authorizer.RouteAccounts, clientRoutes, "uid-ada"},
		{"user token on another route", user, authorizer.RouteInvoices, clientRoutes, "uid-ada"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			az := authorizer.New(f.svc, routes, nil)
			az.ClientRoutes = tc.clientRoutes
			id, err := az.Authorize(context.Background(), authorizer.Request{RouteKey: tc.route, Authorization: "Bearer " + tc.token})
			if tc.wantUID == "-" {
				if e := oauth.AsError(err); err == nil || e.Code != oauth.ErrCodeInsufficientScope || e.Status != 403 {
					t.Fatalf("accepted or wrong refusal: %+v %v, want 403 insufficient_scope", id, err)
				}
				return
			}
			if err != nil || id.UID != tc.wantUID {
				t.Fatalf("%+v %v, want uid %q", id, err, tc.wantUID)
			}
			if tc.wantUID == "" && (id.ClientID != client.ID || id.Scopes.String() != oauth.ScopeTransfersWrite || id.CompanyProfileID != "") {
				t.Errorf("identity %+v, want the client, its scope and no user", id)
			}
		})
	}
	if _, err := authorizer.ParseClientRoutes("DELETE /v2/bank/accounts", routes); err == nil {
		t.Error("a client route outside the route table was accepted")
	}
}
