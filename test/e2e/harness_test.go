package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"github.com/acmebank/authserver/shared/app"
	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/seed"
)

// Fixtures of every end-to-end test: one confidential client and one user with every claim.
const (
	clientID     = "acceptance-client"
	clientSecret = "acceptance-secret-0123456789abcdef"
	redirectURI  = "http://127.0.0.1:4499/callback"
	otherID      = "other-client"
	otherSecret  = "other-secret-0123456789abcdef-xyz"
	otherURI     = "https://other.example/cb"
	username     = "alice"
	password     = "correct-horse-battery-staple"
)

// cheapHasher keeps argon2id but at a cost that makes tests fast; the cost is a parameter of
// the hash, not of the code path.
var cheapHasher = authn.PasswordHasher{Time: 1, MemoryKiB: 64, Threads: 1}

var fixtures = &seed.File{
	Clients: []seed.Client{
		{ClientID: clientID, ClientSecret: clientSecret, Name: "Acceptance App", RedirectURIs: []string{redirectURI, "http://127.0.0.1:4499/other"},
			Scopes:                    []string{"openid", "email", "phone", "profile", "bank:transfers:write", "grant_management_query", "grant_management_revoke"},
			AuthorizationDetailsTypes: []string{"payment_initiation", "account_information"}},
		{ClientID: otherID, ClientSecret: otherSecret, Name: "Other App", RedirectURIs: []string{otherURI},
			Scopes: []string{"openid", "email", "grant_management_query", "grant_management_revoke"}},
	},
	Users: []seed.User{{
		UID: "uid-alice", Username: username, Password: password, Email: "alice@example.com", EmailVerified: true,
		Phone: "+33612345678", Name: "Alice Martin", GivenName: "Alice", FamilyName: "Martin", Birthdate: "1990-04-01",
		Gender: "female", Picture: "https://img.example/alice.png", Locale: "fr-FR", UpdatedAt: 1700000000,
		ZoneInfo: "Europe/Paris", CompanyProfileID: "cp-1", CompanyUserID: "cu-1",
	}},
}

// env is one running service: the real handlers over the embedded store and a local key, on an
// httptest server, with a recorder of store writes and the logs kept for inspection.
type env struct {
	t      *testing.T
	srv    *httptest.Server
	app    *app.App
	writes *writeRecorder
	logs   *syncBuffer
	clock  *testClock
	// handler is what srv answers with: the app's mux (behind the access log, if asked),
	// built again by withAuthn.
	handler   handlerSwap
	accessLog bool
	// mux is the app's mux being served.
	mux *http.ServeMux
	// payer is the user's passkey that confirms payments (dynamic_linking_test.go), made and
	// added on the first payment page.
	payer *authenticator
}

// handlerSwap serves with the handler last set, so a test can rebuild the app's handlers
// while the server runs.
type handlerSwap struct{ p atomic.Pointer[http.Handler] }

func (s *handlerSwap) set(h http.Handler) { s.p.Store(&h) }

func (s *handlerSwap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.p.Load()).ServeHTTP(w, r)
}

// serve builds the app's mux again (its authentication from e.app.Authn) and serves it.
func (e *env) serve() {
	e.t.Helper()
	mux, err := e.app.Mux()
	if err != nil {
		e.t.Fatal(err)
	}
	e.mux = mux
	var h http.Handler = mux
	if e.accessLog {
		h = app.AccessLog(e.app.Log, mux)
	}
	e.handler.set(h)
}

// withAuthn changes what the user's authentication is built from (a hasher that counts, a
// gate of one slot) and serves the handlers built over it; e.app.Users is the new one.
func (e *env) withAuthn(change func(*authn.Deps)) {
	e.t.Helper()
	change(&e.app.Authn)
	e.serve()
}

func newEnv(t *testing.T) *env { return newEnvFrom(t, envSetup{}) }

// envSetup varies an environment.
type envSetup struct {
	// vars are AUTH_* variables, read through config.FromLookup as a deployment reads them; the
	// base URL and data directory are filled in. Clients are not cached unless
	// AUTH_CLIENT_CACHE_TTL is given.
	vars map[string]string
	// tls serves over https (so the base URL is https: Secure, __Host- cookies).
	tls bool
	// accessLog puts the local server's access log in front of the handlers.
	accessLog bool
	// build makes the app from the configuration; nil is app.New.
	build func(config.Config, *slog.Logger) (*app.App, error)
}

func newEnvFrom(t *testing.T, s envSetup) *env {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	scheme := "http://"
	if s.tls {
		scheme = "https://"
	}
	vars := map[string]string{config.EnvBaseURL: scheme + srv.Listener.Addr().String(), config.EnvDataDir: t.TempDir()}
	for k, v := range s.vars {
		vars[k] = v
	}
	cfg, err := config.FromLookup(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := vars[config.EnvClientCacheTTL]; !ok {
		cfg.ClientCacheTTL = 0
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var a *app.App
	if s.build != nil {
		if a, err = s.build(cfg, log); err != nil {
			t.Fatal(err)
		}
	} else {
		if a, err = app.New(context.Background(), cfg, log); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
	}
	if _, ok := vars[config.EnvAuditLog]; !ok {
		a.Service.Audit = log.With(slog.String("log", "audit")) // kept with the logs, for inspection
		a.Authn.Audit = a.Service.Audit
	}
	clock := &testClock{now: time.Now()}
	a.Clock = clock
	a.Service.Clock = clock
	a.Authn.Clock = clock
	a.Authn.Passwords = cheapHasher
	rec := &writeRecorder{Store: a.Store}
	a.Service.Grants, a.Service.Interactions, a.Service.Replay = rec, rec, rec
	a.Service.Backchannel = rec // CIBA's requests (the grant's polls and the endpoint's puts)
	a.Authn.Users, a.Authn.Interactions = rec, rec
	if _, err := a.Rotator().Rotate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := seed.Load(context.Background(), a.Store, fixtures, cheapHasher, time.Now()); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, srv: srv, app: a, writes: rec, logs: logs, clock: clock, accessLog: s.accessLog}
	e.serve()
	srv.Config.Handler = &e.handler
	if s.tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return e
}

func (e *env) url(path string) string { return e.srv.URL + path }

// authorizeURL is an authorization request of the acceptance client.
func (e *env) authorizeURL(extra url.Values) string {
	q := url.Values{"client_id": {clientID}, "redirect_uri": {redirectURI}, "response_type": {"code"},
		"scope": {"openid email"}, "state": {"st-123"}}
	for k, v := range extra {
		q[k] = v
	}
	return e.url(httpapi.PathAuthorize) + "?" + q.Encode()
}

// browser is a scripted user agent: it keeps cookies, reads the hidden fields of our forms,
// posts them like a browser, and stops at the redirect to the client.
type browser struct {
	t      *testing.T
	client *http.Client
	last   string // last page body
	form   url.Values
	// landed is where the last response sent the browser with 303 See Other ("" if not): after
	// a sign-in, the client's redirect URI when the customer's consent was remembered.
	landed string
}

func newBrowser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

var hiddenRe = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`)

// open GETs u; it returns the response (body read into b.last, hidden fields into b.form).
func (b *browser) open(u string) *http.Response {
	b.t.Helper()
	resp, err := b.client.Get(u)
	if err != nil {
		b.t.Fatal(err)
	}
	b.read(resp)
	return resp
}

func (b *browser) read(resp *http.Response) {
	b.landed = ""
	if resp.StatusCode == http.StatusSeeOther {
		b.landed = resp.Header.Get("Location")
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	b.last = string(body)
	b.form = url.Values{}
	for _, m := range hiddenRe.FindAllStringSubmatch(b.last, -1) {
		if _, seen := b.form[m[1]]; !seen { // the first form's fields: a page may hold several forms
			b.form.Set(m[1], m[2])
		}
	}
}

// submit posts the current page's form with extra fields.
func (b *browser) submit(action string, fields url.Values) *http.Response {
	b.t.Helper()
	v := url.Values{}
	for k := range b.form {
		v.Set(k, b.form.Get(k))
	}
	for k := range fields {
		v.Set(k, fields.Get(k))
	}
	resp, err := b.client.PostForm(action, v)
	if err != nil {
		b.t.Fatal(err)
	}
	b.read(resp)
	return resp
}

// login signs in on the login page that is open.
func (b *browser) login(e *env, user, pass string) *http.Response {
	b.t.Helper()
	if !strings.Contains(b.last, `type="password"`) {
		b.t.Fatalf("expected the login page, got: %.400s", b.last)
	}
	return b.submit(e.url(httpapi.PathAuthorize), url.Values{"username": {user}, "password": {pass}})
}

// decide answers the consent page that is open and returns the redirect's URL; a second
// step the request needs first (strong authentication) is passed with the authenticator app.
// When the customer's consent was remembered (an earlier grant of the test covers the
// request), the sign-in has sent the browser back to the client already: allow returns that
// redirect (deny fails: there is no page to deny on). The remembered-consent tests check the
// page's absence themselves.
func (b *browser) decide(e *env, decision string) *url.URL {
	b.t.Helper()
	b.secondStep(e)
	if decision == "allow" && b.landed != "" && !strings.HasPrefix(b.landed, "/") && !strings.HasPrefix(b.landed, e.srv.URL) {
		loc, err := url.Parse(b.landed)
		if err != nil {
			b.t.Fatal(err)
		}
		return loc
	}
	if paymentPage(b.last) && decision == "allow" {
		return b.pay(e) // a payment is allowed by its confirmation (dynamic linking)
	}
	if !strings.Contains(b.last, `value="allow"`) && !paymentPage(b.last) {
		b.t.Fatalf("expected the consent page, got: %.400s", b.last)
	}
	resp := b.submit(e.url(httpapi.PathAuthorize), url.Values{"decision": {decision}})
	if resp.StatusCode != http.StatusSeeOther {
		b.t.Fatalf("consent answered %d, want 303: %.300s", resp.StatusCode, b.last)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		b.t.Fatal(err)
	}
	return loc
}

var totpSecretRe = regexp.MustCompile(`<code class="secret" id="totp-secret">([A-Z2-7 ]+)</code>`)

// secondStep passes the strong-authentication page that is open, if any, as a user with an
// authenticator app does: on the set-up page it reads the key shown, enters the app's code and
// goes on past the recovery codes; on the second-factor page it enters the code of the app set
// up before (the key read from the store, as the app holds it).
func (b *browser) secondStep(e *env) {
	b.t.Helper()
	switch {
	case strings.Contains(b.last, `value="totp_enroll"`):
		m := totpSecretRe.FindStringSubmatch(b.last)
		if m == nil {
			b.t.Fatalf("no key on the set-up page: %.400s", b.last)
		}
		b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"totp_enroll"}, "code": {e.totpCode(b.t, strings.ReplaceAll(m[1], " ", ""), 0)}})
		if !strings.Contains(b.last, `class="codes"`) {
			b.t.Fatalf("expected the recovery codes, got: %.400s", b.last)
		}
		b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"continue"}})
	case strings.Contains(b.last, `value="mfa_totp"`):
		uid := e.uidOf(b.t, username)
		f, err := e.app.Store.Factors(context.Background(), uid)
		if err != nil {
			b.t.Fatal(err)
		}
		for _, x := range f.Factors {
			if x.Kind == oauth.FactorTOTP {
				b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"mfa_totp"}, "code": {e.totpCode(b.t, x.Secret, x.LastStep)}})
				return
			}
		}
		b.t.Fatal("the second-factor page for a user without an authenticator app")
	}
}

// totpCode is the authenticator app's code for secret now, or, when now's step was used
// already (after), for the next step; the clock moves on when both were used.
func (e *env) totpCode(t *testing.T, secret string, after int64) string {
	t.Helper()
	step := e.clock.Now().Unix() / 30
	if step <= after {
		step = after + 1
		if step > e.clock.Now().Unix()/30+1 {
			e.clock.Advance(30 * time.Second)
		}
	}
	code, err := totp.GenerateCodeCustom(secret, time.Unix(step*30, 0), totp.ValidateOpts{Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// uidOf is the uid of a seeded username.
func (e *env) uidOf(t *testing.T, name string) string {
	t.Helper()
	u, err := e.app.Store.GetUserByUsername(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return u.UID
}

// authorize runs the whole user part of the flow and returns the redirect to the client.
func (e *env) authorize(t *testing.T, authURL string) *url.URL {
	t.Helper()
	b := newBrowser(t)
	resp := b.open(authURL)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("authorize answered %d: %.300s", resp.StatusCode, b.last)
	}
	b.login(e, username, password)
	return b.decide(e, "allow")
}

// code runs the user part and returns the code, checking state and iss.
func (e *env) code(t *testing.T, extra url.Values) string {
	t.Helper()
	loc := e.authorize(t, e.authorizeURL(extra))
	q := loc.Query()
	if q.Get("code") == "" || q.Get("error") != "" {
		t.Fatalf("no code in redirect %s", loc.Redacted())
	}
	return q.Get("code")
}

// postToken sends a token or revocation request; body is form-encoded, or JSON when asJSON.
func (e *env) post(t *testing.T, path string, params url.Values, basic bool, asJSON bool) (int, map[string]any, http.Header) {
	t.Helper()
	p := url.Values{}
	for k, v := range params {
		p[k] = v
	}
	var req *http.Request
	if basic {
		p.Del("client_id")
		p.Del("client_secret")
	} else if p.Get("client_id") == "" {
		p.Set("client_id", clientID)
		p.Set("client_secret", clientSecret)
	}
	if asJSON {
		m := map[string]string{}
		for k := range p {
			m[k] = p.Get(k)
		}
		body, _ := json.Marshal(m)
		req, _ = http.NewRequest(http.MethodPost, e.url(path), strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
	} else {
		req, _ = http.NewRequest(http.MethodPost, e.url(path), strings.NewReader(p.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if basic {
		req.SetBasicAuth(url.QueryEscape(clientID), url.QueryEscape(clientSecret))
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) (int, map[string]any, http.Header) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if len(body) > 0 {
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("%s %s answered %d with non-JSON %q", req.Method, req.URL.Path, resp.StatusCode, body)
		}
	}
	return resp.StatusCode, m, resp.Header
}

// exchange trades a code for tokens (form body, client_secret_post).
func (e *env) exchange(t *testing.T, code string, extra url.Values) (int, map[string]any) {
	t.Helper()
	p := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI}}
	for k, v := range extra {
		p[k] = v
	}
	st, body, _ := e.post(t, httpapi.PathToken, p, false, false)
	return st, body
}

// tokenValid reports whether the service still accepts an access token.
func (e *env) tokenValid(token string) bool {
	_, err := e.app.Service.ValidateAccessToken(context.Background(), token, "")
	return err == nil
}

// writeRecorder counts the store writes the service makes, so tests can prove that a bad
// request changed nothing stored.
type writeRecorder struct {
	oauth.Store
	mu     sync.Mutex
	writes []string
	// homes are the homes the contexts of the one-time records (UseOnce, and each value a
	// ConsumeCode or IssueTokens commits) named, in order (docs/multiregion.md: they are
	// recorded at the home of the code or token they guard).
	homes []string
}

// noteHomes notes ctx's home once per one-time value a write carries.
func (r *writeRecorder) noteHomes(ctx context.Context, once []oauth.Once) {
	r.mu.Lock()
	for range once {
		r.homes = append(r.homes, oauth.HomeFrom(ctx))
	}
	r.mu.Unlock()
}

// UseOnce notes the home its context names (not a counted write: the tests that count writes
// count the single-use writes of grants and pages).
func (r *writeRecorder) UseOnce(ctx context.Context, key string, expires, now time.Time) error {
	r.mu.Lock()
	r.homes = append(r.homes, oauth.HomeFrom(ctx))
	r.mu.Unlock()
	return r.Store.UseOnce(ctx, key, expires, now)
}

// onetimeHomes are the homes of the one-time records so far.
func (r *writeRecorder) onetimeHomes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.homes...)
}

func (r *writeRecorder) note(op string) {
	r.mu.Lock()
	r.writes = append(r.writes, op)
	r.mu.Unlock()
}

func (r *writeRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.writes)
}

func (r *writeRecorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.writes...)
}

func (r *writeRecorder) CreateCode(ctx context.Context, c oauth.Code) error {
	r.note("CreateCode")
	return r.Store.CreateCode(ctx, c)
}

func (r *writeRecorder) ConsumeCode(ctx context.Context, h, cid string, now time.Time, once ...oauth.Once) (oauth.Code, error) {
	r.noteHomes(ctx, once)
	c, err := r.Store.ConsumeCode(ctx, h, cid, now, once...)
	if err == nil {
		r.note("ConsumeCode")
	}
	return c, err
}

func (r *writeRecorder) IssueTokens(ctx context.Context, in oauth.Issue, now time.Time) error {
	r.noteHomes(ctx, in.Once)
	r.note("IssueTokens")
	return r.Store.IssueTokens(ctx, in, now)
}

func (r *writeRecorder) RevokeToken(ctx context.Context, h string) error {
	r.note("RevokeToken")
	return r.Store.RevokeToken(ctx, h)
}

func (r *writeRecorder) RevokeGrant(ctx context.Context, id string, now time.Time) error {
	r.note("RevokeGrant")
	return r.Store.RevokeGrant(ctx, id, now)
}

func (r *writeRecorder) PutAuthRequest(ctx context.Context, a oauth.AuthRequest) error {
	r.note("PutAuthRequest")
	return r.Store.PutAuthRequest(ctx, a)
}

func (r *writeRecorder) TakeAuthRequest(ctx context.Context, id string, now time.Time) (oauth.AuthRequest, error) {
	a, err := r.Store.TakeAuthRequest(ctx, id, now)
	if err == nil {
		r.note("TakeAuthRequest")
	}
	return a, err
}

func (r *writeRecorder) PutSession(ctx context.Context, s oauth.Session) error {
	r.note("PutSession")
	return r.Store.PutSession(ctx, s)
}

func (r *writeRecorder) DeleteSession(ctx context.Context, hash string) error {
	r.note("DeleteSession")
	return r.Store.DeleteSession(ctx, hash)
}

func (r *writeRecorder) TakeSession(ctx context.Context, hash string) error {
	r.note("TakeSession")
	return r.Store.TakeSession(ctx, hash)
}

func (r *writeRecorder) PutBackchannelRequest(ctx context.Context, b oauth.BackchannelRequest) error {
	r.note("PutBackchannelRequest")
	return r.Store.PutBackchannelRequest(ctx, b)
}

// PollBackchannelRequest notes a poll that wrote: one that moved a pending request's
// NextPollAt (a slow_down, a refused poll and a poll of a decided request write nothing).
func (r *writeRecorder) PollBackchannelRequest(ctx context.Context, id, cid string, now time.Time) (oauth.BackchannelRequest, error) {
	b, err := r.Store.PollBackchannelRequest(ctx, id, cid, now)
	if err == nil && b.State == oauth.CIBAPending {
		r.note("PollBackchannelRequest")
	}
	return b, err
}

func (r *writeRecorder) DecideBackchannelRequest(ctx context.Context, id, uid string, d oauth.BackchannelDecision, now time.Time) (oauth.BackchannelRequest, error) {
	b, err := r.Store.DecideBackchannelRequest(ctx, id, uid, d, now)
	if err == nil {
		r.note("DecideBackchannelRequest")
	}
	return b, err
}

func (r *writeRecorder) ConsumeBackchannelRequest(ctx context.Context, id, cid string, now time.Time, once ...oauth.Once) (oauth.BackchannelRequest, error) {
	r.noteHomes(ctx, once)
	b, err := r.Store.ConsumeBackchannelRequest(ctx, id, cid, now, once...)
	if err == nil {
		r.note("ConsumeBackchannelRequest")
	}
	return b, err
}

func (r *writeRecorder) CountFailure(ctx context.Context, k string, w time.Duration, now time.Time) (int, error) {
	r.note("CountFailure")
	return r.Store.CountFailure(ctx, k, w, now)
}

type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func randomVerifier() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
