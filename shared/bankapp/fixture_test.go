package bankapp_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/hotp"

	"github.com/acmebank/authserver/internal/webauthntest"
	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/bankapp"
	"github.com/acmebank/authserver/shared/ciba"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/oauth/rar"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// The fixture: a real embedded store, the token domain with a clock the test moves, CIBA's use
// case over them (ciba.New, the local PageDevice), the user's authentication with passkeys on,
// one CIBA client, alice (an authenticator app and a passkey) and bob (a passkey); the
// machine under test over all of it.
const (
	clientID      = "cibaapp"
	alice, bob    = "alice", "bob"
	alicePassword = "alice-password-1"
	bobPassword   = "bob-password-1"
	aliceSecret   = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"
	rpOrigin      = "http://localhost:8080"
	rpID          = "localhost"
	payment10     = `[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"10.00"},"creditorName":"Merchant A","creditorAccount":{"iban":"DE02100100109307118603"}}]`
)

type fixture struct {
	t     testing.TB
	st    *embedded.Store
	svc   *oauth.Service
	users *authn.Service
	deps  authn.Deps
	ciba  *ciba.Service
	m     *bankapp.Machine
	mu    sync.Mutex
	now   time.Time
	audit bytes.Buffer
	keys  map[string]*webauthntest.Authenticator
}

type options struct {
	maxFailures    int
	paymentFactors []string
}

func newFixture(t testing.TB) *fixture { return newFixtureWith(t, options{}) }

func newFixtureWith(t testing.TB, o options) *fixture {
	t.Helper()
	st, err := embedded.OpenWith(t.TempDir(), embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{t: t, st: st, now: time.Unix(1_900_000_000, 0), keys: map[string]*webauthntest.Authenticator{}}
	pk, err := authn.NewPasskeys(rpOrigin, "", "Acme Bank")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	audit := slog.New(slog.NewJSONHandler(&lockedWriter{mu: &f.mu, w: &f.audit}, nil))
	clock := oauth.ClockFunc(f.clock)
	details, err := rar.Shipped()
	if err != nil {
		t.Fatal(err)
	}
	f.svc = &oauth.Service{AuthorizationDetails: details,
		Clients: st, Interactions: st, Grants: st, Replay: st, Clock: clock,
		Issuer: "https://auth.example/v2/authentication/oauth2",
		Lifetimes: oauth.Lifetimes{AccessToken: time.Hour, RefreshToken: time.Hour, Grant: time.Hour,
			Code: time.Minute, IDToken: time.Hour, Session: time.Hour, Request: 15 * time.Minute},
		Log: log, Audit: audit,
	}
	if o.maxFailures == 0 {
		o.maxFailures = 1000
	}
	f.deps = authn.Deps{
		Users: st, Interactions: st, Factors: st, Clock: clock,
		Passwords:       authn.PasswordHasher{Time: 1, MemoryKiB: 64, Threads: 1},
		SessionLifetime: time.Hour,
		LoginPolicy:     authn.LoginPolicy{MaxFailures: o.maxFailures, Window: time.Hour},
		Log:             log, Audit: audit, Passkeys: pk,
		SCA:            oauth.SCAPolicy{Scopes: oauth.DefaultSCAScopes},
		PaymentFactors: o.paymentFactors,
	}
	users, err := authn.New(f.deps)
	if err != nil {
		t.Fatal(err)
	}
	f.users = users
	f.ciba, err = ciba.New(ciba.Deps{Tokens: f.svc, Requests: st, Users: st, Limits: st, Keys: st,
		Device: ciba.PageDevice{Log: log}, Clock: clock, Log: log, MaxPerClientHint: 1000, MaxPerHint: 1000})
	if err != nil {
		t.Fatal(err)
	}
	f.m, err = bankapp.New(bankapp.Deps{Requests: f.ciba, Users: users, Interactions: st, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	must(t, st.CreateClient(ctx, oauth.Client{ID: clientID, Name: "Budget App", Scopes: []string{"openid", "profile", oauth.ScopeTransfersWrite},
		GrantTypes: []string{oauth.GrantTypeCIBA}, AuthorizationDetailsTypes: []string{"payment_initiation"}, CreatedAt: f.now}))
	for _, name := range []string{alice, bob} {
		pw := map[string]string{alice: alicePassword, bob: bobPassword}[name]
		u := oauth.User{UID: "u_" + name, Username: name, PasswordHash: f.deps.Passwords.Hash(pw), CreatedAt: f.now}
		must(t, st.CreateUser(ctx, u))
		if name == alice { // her app first: it is only ever set up as a first factor
			if _, err := users.EnrollTOTP(ctx, u.UID, aliceSecret, f.totp(aliceSecret, 0), ""); err != nil {
				t.Fatal(err)
			}
		}
		f.registerPasskey(&u)
	}
	f.advance(31 * time.Second)
	return f
}

// registerPasskey adds a software authenticator's passkey to u, as the set-up page would.
func (f *fixture) registerPasskey(u *oauth.User) {
	f.t.Helper()
	a := webauthntest.New(f.t, rpID, rpOrigin)
	c, err := f.users.BeginPasskeyRegistration(context.Background(), u)
	must(f.t, err)
	resp := a.CreateWith(f.t, webauthntest.PublicKey(f.t, string(c.Options)))
	if _, err := f.users.FinishPasskeyRegistration(context.Background(), u, authn.AnotherFactor, c.State, []byte(resp), ""); err != nil {
		f.t.Fatalf("register a passkey: %v", err)
	}
	f.keys[u.Username] = a
}

// assert is user's authenticator's answer to the ceremony options of an approving outcome.
func (f *fixture) assert(user string, out bankapp.Outcome) string {
	f.t.Helper()
	if out.Passkey == nil {
		f.t.Fatalf("no passkey ceremony on the approving page")
	}
	a := f.keys[user]
	a.Count++
	return a.Assert(f.t, webauthntest.PublicKey(f.t, string(out.Passkey)))
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

// auditCount is how many audit lines carry event.
func (f *fixture) auditCount(event string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Count(f.audit.String(), `"event":"`+event+`"`)
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

// request starts a CIBA request of the client for user (login_hint) with a binding message and
// optional authorization_details, and returns its reference (what the device knows).
func (f *fixture) request(user, message, details string) string {
	f.t.Helper()
	c, err := f.st.GetClient(context.Background(), clientID)
	must(f.t, err)
	p := url.Values{"scope": {"openid"}, "login_hint": {user}, "binding_message": {message}}
	if details != "" {
		p.Set("authorization_details", details)
	}
	resp, err := f.ciba.Start(context.Background(), &c, p)
	if err != nil {
		f.t.Fatalf("start a CIBA request: %v", err)
	}
	return oauth.BackchannelRequestID(resp.AuthReqID)
}

// stored is the request ref as stored.
func (f *fixture) stored(ref string) oauth.BackchannelRequest {
	f.t.Helper()
	r, err := f.st.GetBackchannelRequest(context.Background(), ref, f.clock())
	must(f.t, err)
	return r
}

// phone is one browser of the bank app: its binding cookie and its session cookie.
type phone struct {
	bid, session string
}

func newPhone(name string) *phone { return &phone{bid: "bid-" + name + "-" + strings.Repeat("x", 20)} }

// act posts in from p, with p's cookies, and keeps the session it is given.
func (f *fixture) act(p *phone, in bankapp.Input) (bankapp.Outcome, error) {
	in.Session, in.Browser = p.session, p.bid
	out, err := f.m.Act(context.Background(), in)
	if err == nil && out.NewSession != "" {
		p.session = out.NewSession
	}
	if err == nil && out.EndSession {
		p.session = ""
	}
	return out, err
}

// signIn signs user in on p.
func (f *fixture) signIn(p *phone, user, password string) bankapp.Outcome {
	f.t.Helper()
	out, err := f.act(p, bankapp.Input{Action: bankapp.ActSignIn, CSRF: bankapp.LoginCSRF(p.bid), Username: user, Password: password})
	must(f.t, err)
	if out.Step != bankapp.StepList {
		f.t.Fatalf("sign-in of %s: step %q, want list", user, out.Step)
	}
	return out
}

// startApproval opens the approval of ref on p, signed in.
func (f *fixture) startApproval(p *phone, ref string) bankapp.Outcome {
	f.t.Helper()
	out, err := f.act(p, bankapp.Input{Action: bankapp.ActApprove, CSRF: bankapp.CSRF(p.session), Ref: ref})
	must(f.t, err)
	if out.Step != bankapp.StepApproving || out.Attempt == "" {
		f.t.Fatalf("approve %s: %+v, want the approving step", ref, out)
	}
	return out
}
