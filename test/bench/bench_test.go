// Package bench measures every operation of the service in-process: the real handlers over the
// embedded store and a local key, called without a network, one request per iteration. Besides
// ns/op (wall time, which includes the store's fsync) each benchmark reports cpu-µs/op, the
// process CPU time per operation, which is what the performance goals are about.
//
//	go test -run '^$' -bench . -benchmem ./test/bench/
package bench

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/app"
	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/boot"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/seed"
)

const (
	clientID     = "bench-client"
	clientSecret = "bench-secret-0123456789abcdef-0123456789"
	redirectURI  = "http://127.0.0.1:4499/callback"
	username     = "alice"
	password     = "correct-horse-battery-staple"
)

// cheap keeps argon2id at a trivial cost so login benchmarks measure everything but the hash;
// BenchmarkPasswordHash measures the hash at the production cost on its own.
var cheap = authn.PasswordHasher{Time: 1, MemoryKiB: 64, Threads: 1}

type bench struct {
	app    *app.App
	mux    http.Handler
	client *oauth.Client
	user   *oauth.User
}

func setup(b *testing.B) *bench {
	b.Helper()
	cfg := config.Defaults()
	cfg.Issuer = cfg.BaseURL + "/v2/authentication/oauth2" // what config.FromLookup derives
	cfg.DataDir = b.TempDir()
	cfg.LogLevel = "error"
	// Without fsync, so the figures are the service's own CPU; the store's fsync cost is
	// measured by shared/store/embedded's benchmarks.
	cfg.NoSync = true
	cfg.AuditLog = filepath.Join(b.TempDir(), "audit.jsonl") // written, as in production, but not on the console
	a, err := app.New(context.Background(), cfg, boot.Logger(cfg))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close() })
	a.Authn.Passwords = cheap
	a.Authn.LoginPolicy.MaxFailures = 0
	ctx := context.Background()
	if _, err := a.Rotator().Rotate(ctx); err != nil {
		b.Fatal(err)
	}
	f := &seed.File{
		Clients: []seed.Client{{ClientID: clientID, ClientSecret: clientSecret, Name: "Bench", RedirectURIs: []string{redirectURI},
			Scopes: []string{"openid", "email", "phone", "profile"}}},
		Users: []seed.User{{UID: "uid-1", Username: username, Password: password, Email: "a@example.com", Name: "Alice",
			CompanyProfileID: "cp", CompanyUserID: "cu"}},
	}
	if _, err := seed.Load(ctx, a.Store, f, cheap, time.Now()); err != nil {
		b.Fatal(err)
	}
	mux, err := a.Mux()
	if err != nil {
		b.Fatal(err)
	}
	c, _ := a.Store.GetClient(ctx, clientID)
	u, _ := a.Store.GetUser(ctx, "uid-1")
	return &bench{app: a, mux: mux, client: &c, user: &u}
}

// cpu reports process CPU time per operation over the timed loop.
type cpu struct{ start time.Duration }

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU(b *testing.B) *cpu {
	b.ReportAllocs()
	b.ResetTimer()
	return &cpu{start: cpuNow()}
}

func (c *cpu) stop(b *testing.B) {
	b.StopTimer()
	b.ReportMetric(float64(cpuNow()-c.start)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
}

func (s *bench) serve(b *testing.B, req *http.Request, want int) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	s.mux.ServeHTTP(w, req)
	if w.Code != want {
		b.Fatalf("%s %s: %d, want %d: %.300s", req.Method, req.URL.Path, w.Code, want, w.Body.String())
	}
	return w
}

func tokenRequest(v url.Values) *http.Request {
	return clientPost(httpapi.PathToken, v.Encode())
}

// clientPost is a client-authenticated form POST (client_secret_basic), built with
// http.NewRequest: httptest.NewRequest parses a whole HTTP message through a new 4 KiB
// bufio.Reader for each request, a third of the bytes a code exchange iteration allocated
// (a server reuses its connection's reader), and the GC it caused counted in cpu-µs/op.
func clientPost(path, body string) *http.Request {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, path, strings.NewReader(body))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(clientID, clientSecret)
	return req
}

// codes approves n authorization requests directly through the domain (untimed setup).
func (s *bench) codes(b *testing.B, n int, scope string) []string {
	b.Helper()
	ctx := context.Background()
	sess := &oauth.Session{UID: s.user.UID, AuthTime: time.Now()}
	out := make([]string, n)
	for i := range out {
		r := &oauth.AuthRequest{ClientID: clientID, RedirectURI: redirectURI, Scopes: oauth.ParseScopes(scope), State: "s", Nonce: "n"}
		red, err := s.app.Service.Approve(ctx, r, s.client, s.user, sess)
		if err != nil {
			b.Fatal(err)
		}
		out[i] = red.Params.Get("code")
	}
	return out
}

func (s *bench) exchange(b *testing.B, code string) map[string]any {
	w := s.serve(b, tokenRequest(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI}}), 200)
	var m map[string]any
	json.Unmarshal(w.Body.Bytes(), &m)
	return m
}

func benchExchange(b *testing.B, scope string) {
	s := setup(b)
	codes := s.codes(b, b.N, scope)
	c := startCPU(b)
	for i := 0; i < b.N; i++ {
		s.serve(b, tokenRequest(url.Values{"grant_type": {"authorization_code"}, "code": {codes[i]}, "redirect_uri": {redirectURI}}), 200)
	}
	c.stop(b)
}

// BenchmarkCodeExchange is a code exchange without openid: no RSA signature.
func BenchmarkCodeExchange(b *testing.B) { benchExchange(b, "email") }

// BenchmarkCodeExchangeOpenID adds the id_token's RS256 signature with the local key.
func BenchmarkCodeExchangeOpenID(b *testing.B) { benchExchange(b, "openid email") }

func benchRefresh(b *testing.B, scope string) {
	s := setup(b)
	rt := s.exchange(b, s.codes(b, 1, scope)[0])["refresh_token"].(string)
	c := startCPU(b)
	for i := 0; i < b.N; i++ {
		w := s.serve(b, tokenRequest(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}}), 200)
		rt = refreshTokenOf(b, w.Body.String())
	}
	c.stop(b)
}

// refreshTokenOf finds the rotated refresh token in a token response. It is a string search
// rather than a JSON decoding between b.StopTimer and b.StartTimer: those read the memory
// statistics, stopping the world every iteration, and the process CPU time (cpu-µs/op) counted
// that too (a refresh measured 110-130 cpu-µs for 35-40 µs of wall time).
func refreshTokenOf(b *testing.B, body string) string {
	const key = `"refresh_token":"`
	i := strings.Index(body, key)
	if i < 0 {
		b.Fatalf("no refresh_token in %.300s", body)
	}
	rest := body[i+len(key):]
	return rest[:strings.IndexByte(rest, '"')]
}

// BenchmarkRefresh is a refresh without openid (no signature).
func BenchmarkRefresh(b *testing.B) { benchRefresh(b, "email") }

// BenchmarkRefreshOpenID adds the new id_token's signature.
func BenchmarkRefreshOpenID(b *testing.B) { benchRefresh(b, "openid email") }

// BenchmarkRevoke revokes a refresh token (and so its grant).
func BenchmarkRevoke(b *testing.B) {
	s := setup(b)
	codes := s.codes(b, b.N, "email")
	rts := make([]string, b.N)
	for i, code := range codes {
		rts[i] = s.exchange(b, code)["refresh_token"].(string)
	}
	c := startCPU(b)
	for i := 0; i < b.N; i++ {
		s.serve(b, clientPost(httpapi.PathRevoke, "token="+rts[i]), 200)
	}
	c.stop(b)
}

// BenchmarkValidateAccessToken is the authorizer's check: one store read, hash, expiry, binding.
func BenchmarkValidateAccessToken(b *testing.B) {
	s := setup(b)
	at := s.exchange(b, s.codes(b, 1, "email")[0])["access_token"].(string)
	ctx := context.Background()
	c := startCPU(b)
	for i := 0; i < b.N; i++ {
		if _, err := s.app.Service.ValidateAccessToken(ctx, at, ""); err != nil {
			b.Fatal(err)
		}
	}
	c.stop(b)
}

func authorizeURL() string {
	q := url.Values{"client_id": {clientID}, "redirect_uri": {redirectURI}, "response_type": {"code"}, "scope": {"openid email"}, "state": {"s"}}
	return httpapi.PathAuthorize + "?" + q.Encode()
}

// BenchmarkAuthorizePage is GET /authorize with no session: validation, the pending request's
// write, and the login page.
func BenchmarkAuthorizePage(b *testing.B) {
	s := setup(b)
	c := startCPU(b)
	for i := 0; i < b.N; i++ {
		s.serve(b, httptest.NewRequest(http.MethodGet, authorizeURL(), nil), 200)
	}
	c.stop(b)
}

var hidden = regexp.MustCompile(`name="(request_id|csrf_token)" value="([^"]*)"`)

// page opens the authorize page and returns its form fields and cookies.
func (s *bench) page(b *testing.B) (url.Values, []*http.Cookie) {
	w := s.serve(b, httptest.NewRequest(http.MethodGet, authorizeURL(), nil), 200)
	v := url.Values{}
	for _, m := range hidden.FindAllStringSubmatch(w.Body.String(), -1) {
		v.Set(m[1], m[2])
	}
	return v, w.Result().Cookies()
}

func formRequest(v url.Values, cookies []*http.Cookie) *http.Request {
	req := httptest.NewRequest(http.MethodPost, httpapi.PathAuthorize, strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range cookies {
		req.AddCookie(c)
	}
	return req
}

// BenchmarkLogin posts the login form (password hashing at a trivial cost: see
// BenchmarkPasswordHash) and renders the consent page. Each iteration signs in on a pending
// request of its own, opened untimed beforehand: the sign-in refuses a second login on a
// request already past it, as it should.
func BenchmarkLogin(b *testing.B) {
	s := setup(b)
	forms := make([]*http.Request, b.N)
	for i := range forms {
		v, cookies := s.page(b)
		v.Set("action", "login")
		v.Set("username", username)
		v.Set("password", password)
		forms[i] = formRequest(v, cookies)
	}
	c := startCPU(b)
	for i := 0; i < b.N; i++ {
		s.serve(b, forms[i], 200)
	}
	c.stop(b)
}

// BenchmarkConsent posts Allow: the pending request is taken, the code written, the browser
// redirected.
func BenchmarkConsent(b *testing.B) {
	s := setup(b)
	forms := make([]url.Values, b.N)
	var cookies []*http.Cookie
	v, ck := s.page(b)
	v.Set("action", "login")
	v.Set("username", username)
	v.Set("password", password)
	w := s.serve(b, formRequest(v, ck), 200)
	cookies = append(ck, w.Result().Cookies()...)
	for i := range forms {
		req := httptest.NewRequest(http.MethodGet, authorizeURL(), nil)
		for _, c := range cookies {
			req.AddCookie(c)
		}
		pw := s.serve(b, req, 200)
		f := url.Values{"action": {"consent"}, "decision": {"allow"}}
		for _, m := range hidden.FindAllStringSubmatch(pw.Body.String(), -1) {
			f.Set(m[1], m[2])
		}
		forms[i] = f
	}
	c := startCPU(b)
	for i := 0; i < b.N; i++ {
		s.serve(b, formRequest(forms[i], cookies), http.StatusSeeOther)
	}
	c.stop(b)
}

// BenchmarkJWKS serves the key set from memory.
func BenchmarkJWKS(b *testing.B) {
	s := setup(b)
	c := startCPU(b)
	for i := 0; i < b.N; i++ {
		s.serve(b, httptest.NewRequest(http.MethodGet, httpapi.PathJWKS, nil), 200)
	}
	c.stop(b)
}

// BenchmarkDiscovery serves the pre-rendered discovery document.
func BenchmarkDiscovery(b *testing.B) {
	s := setup(b)
	c := startCPU(b)
	for i := 0; i < b.N; i++ {
		s.serve(b, httptest.NewRequest(http.MethodGet, httpapi.PathDiscovery, nil), 200)
	}
	c.stop(b)
}

// BenchmarkPasswordHash is one argon2id verification at the production default cost.
func BenchmarkPasswordHash(b *testing.B) {
	h := authn.DefaultPasswordHasher
	enc := h.Hash(password)
	c := startCPU(b)
	for i := 0; i < b.N; i++ {
		if ok, _ := h.Verify(password, enc); !ok {
			b.Fatal("verify")
		}
	}
	c.stop(b)
}

// BenchmarkCodeExchangeParallel runs exchanges from concurrent clients, as a server sees them:
// the embedded store commits concurrent writes together, so a write transaction's cost is
// shared.
func BenchmarkCodeExchangeParallel(b *testing.B) {
	s := setup(b)
	codes := s.codes(b, b.N, "email")
	var next atomic.Int64
	c := startCPU(b)
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1) - 1
			s.serve(b, tokenRequest(url.Values{"grant_type": {"authorization_code"}, "code": {codes[i]}, "redirect_uri": {redirectURI}}), 200)
		}
	})
	c.stop(b)
}

// stubStore answers the grant calls of the token endpoint and the authorizer from fixed records
// in memory, with no locking, copying or encoding, and passes every other call to the real
// store. The *_StubStore benchmarks run the real handlers and domain over it, so they measure
// what the service spends besides its store (request parsing, client authentication, token
// minting and hashing, the response), whichever store adapter is wired in.
type stubStore struct {
	oauth.Store
	code    oauth.Code
	refresh oauth.Token
	access  oauth.Token
}

func (s *stubStore) ConsumeCode(context.Context, string, string, time.Time, ...oauth.Once) (oauth.Code, error) {
	return s.code, nil
}

func (s *stubStore) IssueTokens(context.Context, oauth.Issue, time.Time) error { return nil }

// GetToken answers the refresh token for the hash of "rt_x", the access token otherwise.
func (s *stubStore) GetToken(_ context.Context, hash string, _ time.Time) (oauth.Token, error) {
	if hash == s.refresh.Hash {
		return s.refresh, nil
	}
	return s.access, nil
}

func (s *stubStore) RevokeToken(context.Context, string) error { return nil }

func (s *stubStore) RevokeGrant(context.Context, string, time.Time) error { return nil }

// stubbed returns the service and its handlers over a stubStore around the bench's real store.
func (s *bench) stubbed(b *testing.B, scope string) (*app.App, http.Handler) {
	b.Helper()
	now := time.Now()
	scopes := oauth.ParseScopes(scope)
	g := oauth.Grant{ID: "gr_stub", ClientID: clientID, UID: s.user.UID, Scopes: scopes, CompanyProfileID: "cp", CompanyUserID: "cu",
		AuthTime: now, Claims: s.user.Claims.Only(scopes), CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour)}
	st := &stubStore{Store: s.app.Store,
		code:    oauth.Code{Hash: "h", Grant: g, RedirectURI: redirectURI, ExpiresAt: now.Add(time.Minute)},
		refresh: oauth.Token{Hash: oauth.HashToken("rt_x"), Kind: oauth.KindRefresh, Scopes: scopes, IssuedAt: now, ExpiresAt: now.Add(time.Hour), Grant: g, Live: []string{"a"}},
		access:  oauth.Token{Hash: "a", Kind: oauth.KindAccess, Scopes: scopes, IssuedAt: now, ExpiresAt: now.Add(time.Hour), Grant: g},
	}
	a, err := app.Assemble(s.app.Config, st, s.app.Keys, s.app.Log)
	if err != nil {
		b.Fatal(err)
	}
	a.Authn.Passwords = cheap
	a.Service.Audit = s.app.Audit
	a.Authn.Audit = s.app.Audit
	mux, err := a.Mux()
	if err != nil {
		b.Fatal(err)
	}
	return a, mux
}

// reusedRequest is one POST whose body is rewound for every iteration, so that a benchmark
// times the handler rather than the building of its request.
type reusedRequest struct {
	req  *http.Request
	body *strings.Reader
	text string
}

func newReusedRequest(path, body string) *reusedRequest {
	rd := strings.NewReader(body)
	req := httptest.NewRequest(http.MethodPost, path, rd)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(clientID, clientSecret)
	return &reusedRequest{req: req, body: rd, text: body}
}

func (r *reusedRequest) next() *http.Request {
	r.body.Reset(r.text)
	return r.req
}

func benchStubbed(b *testing.B, path, body, scope string) {
	s := setup(b)
	_, mux := s.stubbed(b, scope)
	rr := newReusedRequest(path, body)
	c := startCPU(b)
	for i := 0; i < b.N; i++ {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, rr.next())
		if w.Code != 200 {
			b.Fatalf("%s: %d: %.300s", path, w.Code, w.Body.String())
		}
	}
	c.stop(b)
}

// BenchmarkCodeExchange_StubStore is a code exchange (no openid) through the real handler and
// domain over stubStore: everything but the store.
func BenchmarkCodeExchange_StubStore(b *testing.B) {
	benchStubbed(b, httpapi.PathToken, "grant_type=authorization_code&code=ac_x&redirect_uri="+url.QueryEscape(redirectURI), "email")
}

// BenchmarkRefresh_StubStore is a refresh (no openid) over stubStore.
func BenchmarkRefresh_StubStore(b *testing.B) {
	benchStubbed(b, httpapi.PathToken, "grant_type=refresh_token&refresh_token=rt_x", "email")
}

// BenchmarkRevoke_StubStore revokes a refresh token over stubStore.
func BenchmarkRevoke_StubStore(b *testing.B) {
	benchStubbed(b, httpapi.PathRevoke, "token=rt_x", "email")
}

// BenchmarkValidateAccessToken_StubStore is the authorizer's check over stubStore.
func BenchmarkValidateAccessToken_StubStore(b *testing.B) {
	s := setup(b)
	a, _ := s.stubbed(b, "openid email")
	ctx := context.Background()
	c := startCPU(b)
	for i := 0; i < b.N; i++ {
		if _, err := a.Service.ValidateAccessToken(ctx, "at_x", ""); err != nil {
			b.Fatal(err)
		}
	}
	c.stop(b)
}
