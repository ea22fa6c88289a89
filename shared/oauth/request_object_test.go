package oauth_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/oauth/rar"
	"github.com/acmebank/authserver/shared/store/embedded"
)

const jarRedirect = "https://tpp.example/cb"

// jarService is a Service over a real embedded store with one private_key_jwt client, c.
func jarService(tb testing.TB, c oauth.Client, now time.Time) *oauth.Service {
	tb.Helper()
	st, err := embedded.OpenWith(tb.TempDir(), embedded.Options{NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	c.RedirectURIs, c.Scopes = []string{jarRedirect}, []string{"openid", "email"}
	c.CreatedAt, c.UpdatedAt = now, now
	if err := st.CreateClient(context.Background(), c); err != nil {
		tb.Fatal(err)
	}
	return &oauth.Service{Replay: st, Clients: st, Interactions: st, Grants: st, Issuer: testIssuer,
		Clock: oauth.ClockFunc(func() time.Time { return now }), Lifetimes: oauth.Lifetimes{Request: 10 * time.Minute},
		Origins: []string{"https://auth.bank.example"}}
}

// requestObjectClaims is a good request object of client "tpp" at now.
func requestObjectClaims(now time.Time) map[string]any {
	return map[string]any{"iss": "tpp", "aud": testIssuer, "client_id": "tpp", "jti": oauth.NewID("j_"),
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(),
		"response_type": "code", "redirect_uri": jarRedirect, "scope": "openid", "state": "st-1",
		"code_challenge": strings.Repeat("a", 43), "code_challenge_method": "S256"}
}

func push(s *oauth.Service, assertion string, form url.Values) (string, error) {
	form.Set("client_id", "tpp")
	uri, _, err := s.Push(context.Background(), oauth.ClientRequest{Credentials: oauth.ClientCredentials{
		ID: "tpp", Assertion: assertion, AssertionType: oauth.AssertionTypeJWTBearer}}, form)
	return uri, err
}

// TestPush_RequestObjectRefusedForEachFlawAndWritesNothing: a request object that breaks one
// rule of RFC 9101 or FAPI 2.0 Message Signing (Final) 5.3.1 is invalid_request_object, with
// the reason, and writes nothing: the client assertion of every refused push (these, and pushes
// refused by an authorization rule, with an object or without) is the same one (same jti), and
// the good push that follows still authenticates with it.
func TestPush_RequestObjectRefusedForEachFlawAndWritesNothing(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	es, ps := newClientKey(t, "es-1", jose.ES256), newClientKey(t, "ps-1", jose.PS256)
	rs := newClientKey(t, "rs-1", jose.RS256)
	stranger := newClientKey(t, "es-1", jose.ES256) // same kid, another key
	c := oauth.Client{ID: "tpp", TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT, JWKS: jwksOf(t, es, ps, rs)}
	s := jarService(t, c, now)
	assertion := es.sign(t, assertionClaims("tpp", now))
	with := func(k string, v any) map[string]any {
		m := requestObjectClaims(now)
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	b64 := func(v any) string { b, _ := json.Marshal(v); return base64.RawURLEncoding.EncodeToString(b) }
	typ := oauth.RequestObjectType
	cases := []struct {
		name, object, want string
	}{
		{"unsigned (alg none)", b64(map[string]string{"alg": "none"}) + "." + b64(requestObjectClaims(now)) + ".", "alg none"},
		{"encrypted (JWE)", "eyJhbGciOiJSU0EtT0FFUCJ9.a.b.c.d", "encrypted request objects are not supported"},
		{"not a JWT", "hello", "not a compact JWS"},
		{"RS256", rs.signJWS(t, typ, requestObjectClaims(now)), "signed with PS256 or ES256"},
		{"typ of another JWT", es.signJWS(t, "JWT", requestObjectClaims(now)), "typ must be oauth-authz-req+jwt"},
		{"a key the client did not register", stranger.signJWS(t, typ, requestObjectClaims(now)), "not signed by a key the client registered"},
		{"iss another client", es.signJWS(t, typ, with("iss", "other")), "iss must be the client_id"},
		{"no client_id claim", es.signJWS(t, typ, with("client_id", nil)), "client_id claim"},
		{"client_id claim of another client", es.signJWS(t, typ, with("client_id", "other")), "client_id claim"},
		{"no aud", es.signJWS(t, typ, with("aud", nil)), "aud must be the issuer"},
		{"aud another server", es.signJWS(t, typ, with("aud", "https://other.example")), "aud must be the issuer"},
		{"aud the token endpoint", es.signJWS(t, typ, with("aud", tokenURL)), "aud must be the issuer"},
		{"aud an array without the issuer", es.signJWS(t, typ, with("aud", []string{"https://other.example"})), "aud must be the issuer"},
		{"no nbf", es.signJWS(t, typ, with("nbf", nil)), "needs an nbf"},
		{"no exp", es.signJWS(t, typ, with("exp", nil)), "needs an exp"},
		{"nbf 11 s ahead", es.signJWS(t, typ, with("nbf", now.Add(11*time.Second).Unix())), "not valid yet"},
		{"nbf 61 minutes ago", es.signJWS(t, typ, with("nbf", now.Add(-61*time.Minute).Unix())), "60 minutes in the past"},
		{"expired", es.signJWS(t, typ, with("exp", now.Unix())), "has expired"},
		{"exp 61 minutes after nbf", es.signJWS(t, typ, with("exp", now.Add(61*time.Minute).Unix())), "more than 60 minutes after its nbf"},
		{"a request claim", es.signJWS(t, typ, with("request", "x")), "may not contain a request claim"},
		{"a request_uri claim", es.signJWS(t, typ, with("request_uri", oauth.RequestURIPrefix+"x")), "may not contain a request_uri claim"},
		{"scope not a string", es.signJWS(t, typ, with("scope", []string{"openid"})), "scope claim must be a string"},
		{"over the size bound", es.signJWS(t, typ, with("pad", strings.Repeat("x", oauth.MaxRequestObjectBytes))), "at most"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := push(s, assertion, url.Values{"request": {tc.object}})
			var e *oauth.Error
			if !errors.As(err, &e) || e.Code != oauth.ErrCodeInvalidRequestObject || e.Status != 400 || !strings.Contains(e.Description, tc.want) {
				t.Fatalf("push: %v; want invalid_request_object (400) saying %q", err, tc.want)
			}
		})
	}
	// A well-made object whose request breaks an authorization rule is refused as a plain
	// push would be, and writes nothing either.
	for _, bad := range []map[string]any{with("redirect_uri", "https://evil.example/cb"), with("scope", "openid admin")} {
		_, err := push(s, assertion, url.Values{"request": {es.signJWS(t, typ, bad)}})
		var e *oauth.Error
		if !errors.As(err, &e) || (e.Code != oauth.ErrCodeInvalidRequest && e.Code != oauth.ErrCodeInvalidScope) {
			t.Fatalf("push of %v: %v; want invalid_request or invalid_scope", bad, err)
		}
	}
	// So is a plain push refused by an authorization rule.
	if _, err := push(s, assertion, url.Values{"response_type": {"code"}, "redirect_uri": {jarRedirect}, "scope": {"openid admin"}}); err == nil {
		t.Fatal("a plain push with a scope the client may not use was accepted")
	}
	// Nothing was recorded: the same assertion authenticates the good push.
	if _, err := push(s, assertion, url.Values{"request": {ps.signJWS(t, typ, requestObjectClaims(now))}}); err != nil {
		t.Fatalf("the good push after the refused ones: %v", err)
	}
}

// TestPush_RequestObjectIsTheRequestsOnlySource: the parameters kept are the object's; the
// form's authorization parameters beside it are ignored (RFC 9101 6.3), even a redirect_uri
// that is not registered. What FAPI 2.0 Message Signing (Final) 5.3.1 accepts is accepted: no
// typ, typ with the application/ prefix, aud as an array with the issuer, nbf 10 s ahead,
// exp 60 minutes after nbf, max_age as a number.
func TestPush_RequestObjectIsTheRequestsOnlySource(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	es := newClientKey(t, "es-1", jose.ES256)
	c := oauth.Client{ID: "tpp", TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT, JWKS: jwksOf(t, es)}
	s := jarService(t, c, now)
	good := requestObjectClaims(now)
	good["max_age"] = 300
	good["aud"] = []string{"https://other.example", testIssuer}
	good["nbf"] = now.Add(10 * time.Second).Unix()
	good["exp"] = now.Add(10*time.Second + 60*time.Minute).Unix()
	for i, typ := range []string{"", "application/oauth-authz-req+JWT", oauth.RequestObjectType} {
		form := url.Values{"request": {es.signJWS(t, typ, good)},
			"scope": {"openid email"}, "state": {"outer"}, "redirect_uri": {"https://evil.example/cb"}}
		uri, err := push(s, es.sign(t, assertionClaims("tpp", now)), form)
		if err != nil {
			t.Fatalf("typ %q: %v", typ, err)
		}
		_, req, err := s.OpenPushedRequest(context.Background(), "tpp", uri)
		if err != nil {
			t.Fatal(err)
		}
		if req.RedirectURI != jarRedirect || req.State != "st-1" || strings.Join(req.Scopes, " ") != "openid" || req.MaxAge != 300 {
			t.Fatalf("push %d kept redirect_uri %q state %q scopes %v max_age %d; want the object's", i, req.RedirectURI, req.State, req.Scopes, req.MaxAge)
		}
	}
}

// TestPush_ClientRequiringSignedRequestObjectsIsRefusedWithoutOne: with
// require_signed_request_object (RFC 9101 10.5) a plain push is invalid_request and writes
// nothing; a client without it may push either way.
func TestPush_ClientRequiringSignedRequestObjectsIsRefusedWithoutOne(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	es := newClientKey(t, "es-1", jose.ES256)
	plain := func() url.Values {
		v := url.Values{}
		for k, x := range requestObjectClaims(now) {
			if s, ok := x.(string); ok && k != "iss" && k != "aud" && k != "jti" {
				v.Set(k, s)
			}
		}
		return v
	}
	for _, required := range []bool{true, false} {
		c := oauth.Client{ID: "tpp", TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT, JWKS: jwksOf(t, es), RequireSignedRequestObject: required}
		s := jarService(t, c, now)
		assertion := es.sign(t, assertionClaims("tpp", now))
		_, err := push(s, assertion, plain())
		var e *oauth.Error
		if required && (!errors.As(err, &e) || e.Code != oauth.ErrCodeInvalidRequest || !strings.Contains(e.Description, "signed request object")) {
			t.Fatalf("required: plain push %v; want invalid_request naming the signed request object", err)
		}
		if !required && err != nil {
			t.Fatalf("not required: plain push %v", err)
		}
		if _, err := push(s, es.sign(t, assertionClaims("tpp", now)), url.Values{"request": {es.signJWS(t, oauth.RequestObjectType, requestObjectClaims(now))}}); err != nil {
			t.Fatalf("required %v: signed push %v", required, err)
		}
		if required { // the refused push recorded nothing: its assertion still works
			if _, err := push(s, assertion, url.Values{"request": {es.signJWS(t, "", requestObjectClaims(now))}}); err != nil {
				t.Fatalf("the refused push's assertion, reused: %v", err)
			}
		}
	}
}

// TestValidRequestObjectSetting_NeedsTheClientsKeys: only a client with registered keys
// (private_key_jwt) can be made to sign its requests; others could never push.
func TestValidRequestObjectSetting_NeedsTheClientsKeys(t *testing.T) {
	for _, tc := range []struct {
		c  oauth.Client
		ok bool
	}{
		{oauth.Client{RequireSignedRequestObject: true}, false},
		{oauth.Client{RequireSignedRequestObject: true, CertSubjectDN: "CN=tpp", TokenEndpointAuthMethod: oauth.AuthMethodTLSClient}, false},
		{oauth.Client{RequireSignedRequestObject: true, TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT}, true},
		{oauth.Client{}, true},
	} {
		if err := tc.c.ValidRequestObjectSetting(); (err == nil) != tc.ok {
			t.Errorf("%+v: %v, want ok=%v", tc.c, err, tc.ok)
		}
	}
}

// BenchmarkPush is the in-process cost of one pushed authorization request of a
// private_key_jwt client, with its parameters in the form and in a signed request object
// (embedded store without fsync). Both write the same: the assertion's jti and the pushed
// request (in AWS one conditional PutItem and one PutItem); the object adds one signature
// verification and no write (its jti is not recorded).
func BenchmarkPush(b *testing.B) {
	now := time.Unix(1_800_000_000, 0)
	for _, alg := range []jose.SignatureAlgorithm{jose.ES256, jose.PS256} {
		for _, withObject := range []bool{false, true} {
			name := fmt.Sprintf("%s/form", alg)
			if withObject {
				name = fmt.Sprintf("%s/request_object", alg)
			}
			b.Run(name, func(b *testing.B) {
				k := newClientKey(b, "k1", alg)
				c := oauth.Client{ID: "tpp", TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT, JWKS: jwksOf(b, k)}
				s := jarService(b, c, now)
				forms := make([]url.Values, 2048)
				assertions := make([]string, len(forms))
				for i := range forms {
					claims := assertionClaims("tpp", now)
					claims["jti"] = fmt.Sprint("j", i)
					assertions[i] = k.sign(b, claims)
					if withObject {
						forms[i] = url.Values{"request": {k.signJWS(b, oauth.RequestObjectType, requestObjectClaims(now))}}
						continue
					}
					forms[i] = url.Values{}
					for n, x := range requestObjectClaims(now) {
						if v, ok := x.(string); ok && n != "iss" && n != "aud" && n != "jti" {
							forms[i].Set(n, v)
						}
					}
				}
				var writes atomic.Int64
				count := func(s *oauth.Service) *oauth.Service {
					s.Replay = countedReplay{s.Replay, &writes}
					s.Interactions = countedInteractions{s.Interactions, &writes}
					return s
				}
				s = count(s)
				cpu0 := cpuTime()
				i := 0
				for b.Loop() {
					if i == len(forms) {
						b.StopTimer()
						s = count(jarService(b, c, now))
						i = 0
						b.StartTimer()
					}
					if _, err := push(s, assertions[i], forms[i]); err != nil {
						b.Fatal(err)
					}
					i++
				}
				b.ReportMetric(float64(writes.Load())/float64(b.N), "writes/op")
				b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			})
		}
	}
}

// cpuTime is the process's user and system CPU time so far: the benchmark's CPU per push, which
// on a shared machine says more than the wall time (it includes the embedded store's work,
// and any setup a b.StopTimer excluded from the wall time).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// countedReplay and countedInteractions count the store writes a push makes: the one-time
// values recorded and the pushed request kept.
type countedReplay struct {
	oauth.ReplayStore
	n *atomic.Int64
}

func (r countedReplay) UseOnce(ctx context.Context, key string, expires, now time.Time) error {
	r.n.Add(1)
	return r.ReplayStore.UseOnce(ctx, key, expires, now)
}

type countedInteractions struct {
	oauth.InteractionStore
	n *atomic.Int64
}

func (r countedInteractions) PutAuthRequest(ctx context.Context, req oauth.AuthRequest) error {
	r.n.Add(1)
	return r.InteractionStore.PutAuthRequest(ctx, req)
}

// TestPush_RequestObjectCarriesAuthorizationDetailsAsJSON: a request object's
// authorization_details claim is a JSON array (RFC 9396 3), validated and kept as that JSON;
// the same array sent as a JSON string in the object is not an array, and is refused with
// invalid_authorization_details.
func TestPush_RequestObjectCarriesAuthorizationDetailsAsJSON(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	es := newClientKey(t, "es-1", jose.ES256)
	c := oauth.Client{ID: "tpp", TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT, JWKS: jwksOf(t, es),
		AuthorizationDetailsTypes: []string{rar.TypeAccountInformation}}
	s := jarService(t, c, now)
	s.AuthorizationDetails, _ = rar.Shipped()
	const details = `[{"type":"account_information","permissions":["balances"]}]`
	claims := requestObjectClaims(now)
	claims["authorization_details"] = json.RawMessage(details) // the array, member order kept
	uri, err := push(s, es.sign(t, assertionClaims("tpp", now)), url.Values{"request": {es.signJWS(t, "", claims)}})
	if err != nil {
		t.Fatal(err)
	}
	_, req, err := s.OpenPushedRequest(context.Background(), "tpp", uri)
	if err != nil || string(req.AuthorizationDetails) != details {
		t.Fatalf("kept %s (%v), want %s", req.AuthorizationDetails, err, details)
	}
	claims["authorization_details"] = details // the JSON text, as a string claim
	_, err = push(s, es.sign(t, assertionClaims("tpp", now.Add(time.Second))), url.Values{"request": {es.signJWS(t, "", claims)}})
	var oe *oauth.Error
	if !errors.As(err, &oe) || oe.Code != oauth.ErrCodeInvalidAuthorizationDetails {
		t.Fatalf("a string claim: %v, want invalid_authorization_details", err)
	}
}
