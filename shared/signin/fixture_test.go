package signin_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/hotp"

	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/signin"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// The fixture: a real embedded store, the domain service with a clock the test moves, passkeys
// on, one client, alice (an authenticator app) and bob (no second factor).
const (
	clientID      = "app"
	redirectURI   = "https://app.example/cb"
	alice, bob    = "alice", "bob"
	alicePassword = "alice-password-1"
	bobPassword   = "bob-password-1"
	aliceSecret   = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"
	transfers     = "openid " + oauth.ScopeTransfersWrite
)

type fixture struct {
	t     testing.TB
	st    *embedded.Store
	svc   *oauth.Service
	users *authn.Service
	deps  authn.Deps
	m     *signin.Machine
	mu    sync.Mutex
	now   time.Time
	audit bytes.Buffer
	// aliceRecovery is one of alice's recovery codes.
	aliceRecovery string
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	st, err := embedded.OpenWith(t.TempDir(), embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{t: t, st: st, now: time.Unix(1_900_000_000, 0)}
	pk, err := authn.NewPasskeys("http://localhost:8080", "", "Acme Bank")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	audit := slog.New(slog.NewJSONHandler(&lockedWriter{mu: &f.mu, w: &f.audit}, nil))
	clock := oauth.ClockFunc(f.clock)
	f.svc = &oauth.Service{
		Clients: st, Interactions: st, Grants: st, Replay: st,
		Clock:  clock,
		Issuer: "https://auth.example/v2/authentication/oauth2",
		Lifetimes: oauth.Lifetimes{AccessToken: time.Hour, RefreshToken: time.Hour, Grant: time.Hour,
			Code: time.Minute, IDToken: time.Hour, Session: time.Hour, Request: 15 * time.Minute},
		Log:   log,
		Audit: audit,
	}
	f.deps = authn.Deps{
		Users: st, Interactions: st, Factors: st, Clock: clock,
		Passwords:       authn.PasswordHasher{Time: 1, MemoryKiB: 64, Threads: 1},
		SessionLifetime: time.Hour,
		LoginPolicy:     authn.LoginPolicy{MaxFailures: 1000, Window: time.Minute},
		Log:             log,
		Audit:           audit,
		Passkeys:        pk,
		SCA:             oauth.SCAPolicy{Scopes: oauth.DefaultSCAScopes},
	}
	f.build(f.deps)
	ctx := context.Background()
	must(t, st.CreateClient(ctx, oauth.Client{ID: clientID, Name: "App", RedirectURIs: []string{redirectURI},
		Scopes: []string{"openid", "profile", oauth.ScopeTransfersWrite}, CreatedAt: f.now}))
	for name, pw := range map[string]string{alice: alicePassword, bob: bobPassword} {
		must(t, st.CreateUser(ctx, oauth.User{UID: "u_" + name, Username: name, PasswordHash: f.deps.Passwords.Hash(pw), CreatedAt: f.now}))
	}
	// alice sets up her app through the domain, as the set-up page would.
	codes, err := f.users.EnrollTOTP(ctx, "u_"+alice, aliceSecret, f.totp(aliceSecret, 0), "")
	if err != nil {
		t.Fatal(err)
	}
	f.aliceRecovery = codes[0]
	f.advance(31 * time.Second)
	return f
}

// build makes the authentication service of d and the machine over it.
func (f *fixture) build(d authn.Deps) {
	f.t.Helper()
	users, err := authn.New(d)
	if err != nil {
		f.t.Fatal(err)
	}
	m, err := signin.New(f.svc, users)
	if err != nil {
		f.t.Fatal(err)
	}
	f.users, f.m = users, m
}

// passkeysOff rebuilds the machine with passkeys off, over the same store.
func (f *fixture) passkeysOff() {
	d := f.deps
	d.Passkeys = nil
	f.build(d)
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fixture) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

// totp is the code of secret at the current time step plus offset steps.
func (f *fixture) totp(secret string, offset int64) string {
	step := f.clock().Unix()/30 + offset
	code, err := hotp.GenerateCodeCustom(secret, uint64(step), hotp.ValidateOpts{Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		f.t.Fatal(err)
	}
	return code
}

// digest is the SHA-256 of a backup of the whole store: it changes exactly when a write
// transaction commits.
func (f *fixture) digest() [32]byte {
	var b bytes.Buffer
	if _, err := f.st.Backup(&b); err != nil {
		f.t.Fatal(err)
	}
	return sha256.Sum256(b.Bytes())
}

func (f *fixture) factors(user string) oauth.UserFactors {
	fs, err := f.st.Factors(context.Background(), "u_"+user)
	if err != nil {
		f.t.Fatal(err)
	}
	return fs
}

// browser is one browser's cookies: its binding cookie (the CSRF tokens are bound to it) and
// its session cookie.
type browser struct {
	bid, sid string
}

// page is a page a browser shows: the pending request's id, the CSRF token of its forms, and
// what the machine said of it.
type page struct {
	id, csrf string
	out      signin.Outcome
}

func csrfHash(csrf, bid string) string { return oauth.HashToken(csrf + "." + bid) }

// start sends b to the authorization endpoint with scope.
func (f *fixture) start(b *browser, scope string) page {
	f.t.Helper()
	return f.startWith(b, scope, "")
}

// startWith sends b to the authorization endpoint with scope and authorization_details (as
// validated; "" none).
func (f *fixture) startWith(b *browser, scope, details string) page {
	f.t.Helper()
	return f.startSet(b, scope, func(req *oauth.AuthRequest) {
		if details != "" {
			req.AuthorizationDetails = json.RawMessage(details)
		}
	})
}

// startSet sends b to the authorization endpoint with scope, and set's changes of the request.
func (f *fixture) startSet(b *browser, scope string, set func(*oauth.AuthRequest)) page {
	f.t.Helper()
	ctx := context.Background()
	client, err := f.st.GetClient(ctx, clientID)
	must(f.t, err)
	now := f.clock()
	req := &oauth.AuthRequest{ID: oauth.NewID(oauth.PrefixRequest), ClientID: clientID, RedirectURI: redirectURI,
		Scopes: oauth.ParseScopes(scope), State: "st", MaxAge: -1, CreatedAt: now, ExpiresAt: now.Add(15 * time.Minute)}
	set(req)
	csrf := oauth.NewSecret(oauth.PrefixCSRF)
	req.CSRFHash = csrfHash(csrf, b.bid)
	out, err := f.m.Start(ctx, req, &client, b.sid)
	must(f.t, err)
	return page{id: req.ID, csrf: csrf, out: out}
}

// act posts action on p from browser b with in's fields, and keeps the session cookie the
// answer sets or clears.
func (f *fixture) act(b *browser, p page, action signin.Action, in signin.Input) (page, error) {
	in.RequestID, in.Action, in.Session, in.ClientIP = p.id, action, b.sid, "192.0.2.1"
	in.CSRFHash = csrfHash(p.csrf, b.bid)
	out, err := f.m.Act(context.Background(), in)
	if err != nil {
		return p, err
	}
	switch {
	case out.NewSession != "":
		b.sid = out.NewSession
	case out.EndSession:
		b.sid = ""
	}
	next := page{id: p.id, csrf: p.csrf, out: out}
	if out.Request != nil {
		next.id = out.Request.ID
	}
	return next, nil
}

// login signs in on p with a user's password.
func (f *fixture) login(b *browser, p page, user, password string) (page, error) {
	return f.act(b, p, signin.ActLogin, signin.Input{Username: user, Password: password})
}
