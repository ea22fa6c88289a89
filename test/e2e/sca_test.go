package e2e

import (
	"context"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
)

var recoveryCodesRe = regexp.MustCompile(`<li><code>([a-z2-7-]+)</code></li>`)

// idClaims are the authentication claims of an id_token, verified by go-oidc.
type idClaims struct {
	ACR      string   `json:"acr"`
	AMR      []string `json:"amr"`
	AuthTime int64    `json:"auth_time"`
}

// idTokenClaims exchanges code and returns the verified id_token's authentication claims.
func (e *env) idTokenClaims(t *testing.T, code string) idClaims {
	t.Helper()
	st, body := e.exchange(t, code, nil)
	if st != http.StatusOK {
		t.Fatalf("exchange: %d %v", st, body)
	}
	raw, _ := body["id_token"].(string)
	idt, err := e.verifier(t).Verify(context.Background(), raw)
	if err != nil {
		t.Fatalf("go-oidc: %v", err)
	}
	var c idClaims
	if err := idt.Claims(&c); err != nil {
		t.Fatal(err)
	}
	return c
}

// startSignIn opens an authorization request in a new browser and signs in with the password:
// it returns the browser on the page that follows.
func (e *env) startSignIn(t *testing.T, extra url.Values) *browser {
	t.Helper()
	b := newBrowser(t)
	if resp := b.open(e.authorizeURL(extra)); resp.StatusCode != http.StatusOK {
		t.Fatalf("authorize: %d", resp.StatusCode)
	}
	b.login(e, username, password)
	return b
}

func codeOf(t *testing.T, loc *url.URL) string {
	t.Helper()
	c := loc.Query().Get("code")
	if c == "" {
		t.Fatalf("no code in %s", loc.Redacted())
	}
	return c
}

// TestSCA_TransfersScopeStepsUpWithAnAuthenticatorApp: the payment scope needs strong
// authentication. A user without a second factor sets up an authenticator app (QR code and
// key shown once, a code proves it), sees ten recovery codes once, and reaches consent; the
// id_token says acr sca and amr pwd otp mfa, and auth_time is the step's time. A new sign-in
// asks for the app's code; a session already strong is not asked again; openid alone asks
// nothing and says acr pwd. On both stores.
func TestSCA_TransfersScopeStepsUpWithAnAuthenticatorApp(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		transfers := url.Values{"scope": {"openid bank:transfers:write"}}
		b := e.startSignIn(t, transfers)
		if !strings.Contains(b.last, `value="totp_enroll"`) || !strings.Contains(b.last, `src="data:image/png;base64,`) {
			t.Fatalf("expected the authenticator set-up with a QR code, got: %.400s", b.last)
		}
		e.clock.Advance(10 * time.Second)
		stepAt := e.clock.Now()
		b.secondStep(e)
		c := e.idTokenClaims(t, codeOf(t, b.decide(e, "allow")))
		if c.ACR != oauth.ACRStrong || strings.Join(c.AMR, " ") != "pwd otp mfa" || c.AuthTime != stepAt.Unix() {
			t.Fatalf("id_token acr %q amr %v auth_time %d, want sca, pwd otp mfa, %d", c.ACR, c.AMR, c.AuthTime, stepAt.Unix())
		}
		f, _ := e.app.Store.Factors(context.Background(), e.uidOf(t, username))
		if !f.Has(oauth.FactorTOTP) || len(f.Factors[0].RecoveryHashes) != authn.RecoveryCodeCount {
			t.Fatalf("stored factors %+v", f)
		}

		// The same browser session is strong already: straight to consent.
		if resp := b.open(e.authorizeURL(transfers)); resp.StatusCode != http.StatusOK || !strings.Contains(b.last, `value="allow"`) {
			t.Fatalf("a strong session asked again: %.300s", b.last)
		}
		// A new sign-in asks for the app's code.
		b = e.startSignIn(t, transfers)
		if !strings.Contains(b.last, `value="mfa_totp"`) {
			t.Fatalf("expected the second-factor page, got: %.400s", b.last)
		}
		b.secondStep(e)
		if c := e.idTokenClaims(t, codeOf(t, b.decide(e, "allow"))); c.ACR != oauth.ACRStrong {
			t.Fatalf("after the app's code: acr %q", c.ACR)
		}
		// openid alone asks for nothing more than the password.
		b = e.startSignIn(t, url.Values{"scope": {"openid email"}})
		if c := e.idTokenClaims(t, codeOf(t, b.decide(e, "allow"))); c.ACR != oauth.ACRPassword || strings.Join(c.AMR, " ") != "pwd" {
			t.Fatalf("password only: acr %q amr %v", c.ACR, c.AMR)
		}
		// acr_values asks for strong authentication whatever the scope.
		b = e.startSignIn(t, url.Values{"scope": {"openid"}, "acr_values": {oauth.ACRStrong}})
		if !strings.Contains(b.last, `value="mfa_totp"`) {
			t.Fatalf("acr_values=sca: expected the second-factor page, got: %.300s", b.last)
		}
	})
}

// TestSCA_AllowWithoutTheStepIsRefused: a consent "allow" posted with a password-only session
// for a payment request (a forged form, or a page kept from before) issues no code: the set-up
// step accepts no consent (403), and the step is still there to pass.
func TestSCA_AllowWithoutTheStepIsRefused(t *testing.T) {
	e := newEnv(t)
	b := e.startSignIn(t, url.Values{"scope": {"openid bank:transfers:write"}})
	form, page := b.form, b.last
	resp := b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"consent"}, "decision": {"allow"}})
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Location") != "" {
		t.Fatalf("a forged allow: %d %q, want 403 and no redirect", resp.StatusCode, resp.Header.Get("Location"))
	}
	b.form, b.last = form, page
	if c := codeOf(t, b.decide(e, "allow")); c == "" {
		t.Fatal("the step could not be passed after the refusal")
	}
}

// TestSCA_CodesAreSingleUseAndAttemptsLimited: an app code accepted once is refused again; of
// 50 racing submissions of one fresh code in 50 sign-ins exactly one passes; after the
// attempt limit even the right code is refused until the window ends; a recovery code works
// once.
func TestSCA_CodesAreSingleUseAndAttemptsLimited(t *testing.T) {
	e := newEnvFrom(t, envSetup{vars: map[string]string{config.EnvLoginMaxFails: "60"}})
	transfers := url.Values{"scope": {"openid bank:transfers:write"}}
	b := e.startSignIn(t, transfers)
	secret := totpSecretRe.FindStringSubmatch(b.last)[1]
	b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"totp_enroll"}, "code": {e.totpCode(t, strings.ReplaceAll(secret, " ", ""), 0)}})
	codes := recoveryCodesRe.FindAllStringSubmatch(b.last, -1)
	if len(codes) != authn.RecoveryCodeCount {
		t.Fatalf("%d recovery codes shown, want %d", len(codes), authn.RecoveryCodeCount)
	}
	uid := e.uidOf(t, username)
	f, _ := e.app.Store.Factors(context.Background(), uid)
	enrolStep := f.Factors[0].LastStep

	// The enrolment's code again: refused.
	b2 := e.startSignIn(t, transfers)
	b2.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"mfa_totp"}, "code": {e.totpCode(t, strings.ReplaceAll(secret, " ", ""), enrolStep-1)}})
	if !strings.Contains(b2.last, `id="mfa-error"`) {
		t.Fatalf("a used code was accepted: %.300s", b2.last)
	}

	// 50 sign-ins race with one fresh code.
	const racers = 50
	browsers := make([]*browser, racers)
	for i := range browsers {
		browsers[i] = e.startSignIn(t, transfers)
	}
	code := e.totpCode(t, strings.ReplaceAll(secret, " ", ""), enrolStep)
	var wg sync.WaitGroup
	for _, rb := range browsers {
		wg.Go(func() {
			rb.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"mfa_totp"}, "code": {code}})
		})
	}
	wg.Wait()
	passed := 0
	for _, rb := range browsers {
		if strings.Contains(rb.last, `value="allow"`) {
			passed++
		}
	}
	if passed != 1 {
		t.Fatalf("%d of %d racing uses of one code passed, want 1", passed, racers)
	}

	// A recovery code works once.
	rc := codes[0][1]
	b3 := e.startSignIn(t, transfers)
	b3.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"mfa_recovery"}, "code": {strings.ToUpper(rc)}})
	if !strings.Contains(b3.last, `value="allow"`) {
		t.Fatalf("a recovery code was refused: %.300s", b3.last)
	}
	b4 := e.startSignIn(t, transfers)
	b4.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"mfa_recovery"}, "code": {rc}})
	if strings.Contains(b4.last, `value="allow"`) {
		t.Fatal("a recovery code worked twice")
	}
}

// TestSCA_WrongCodesLockTheStepForTheWindow: past the login's failure limit, second-factor
// attempts are refused, the right code too, until the window ends; the lock is the user's.
func TestSCA_WrongCodesLockTheStepForTheWindow(t *testing.T) {
	e := newEnvFrom(t, envSetup{vars: map[string]string{config.EnvLoginMaxFails: "3", config.EnvLoginFailWindow: "10m"}})
	transfers := url.Values{"scope": {"openid bank:transfers:write"}}
	b := e.startSignIn(t, transfers)
	b.secondStep(e)
	b = e.startSignIn(t, transfers)
	for range 3 {
		b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"mfa_totp"}, "code": {"000000"}})
	}
	uid := e.uidOf(t, username)
	f, _ := e.app.Store.Factors(context.Background(), uid)
	good := e.totpCode(t, f.Factors[0].Secret, f.Factors[0].LastStep)
	b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"mfa_totp"}, "code": {good}})
	if strings.Contains(b.last, `value="allow"`) {
		t.Fatal("the right code was accepted past the attempt limit")
	}
	e.clock.Advance(11 * time.Minute)
	good = e.totpCode(t, f.Factors[0].Secret, f.Factors[0].LastStep)
	b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"mfa_totp"}, "code": {good}})
	if !strings.Contains(b.last, `value="allow"`) {
		t.Fatalf("the right code after the window: %.300s", b.last)
	}
}

// TestSCA_PolicyAlwaysAndEvery: AUTH_SCA_POLICY=always asks every sign-in for the step;
// a duration asks any sign-in whose last strong authentication is older than it.
func TestSCA_PolicyAlwaysAndEvery(t *testing.T) {
	e := newEnvFrom(t, envSetup{vars: map[string]string{config.EnvSCAPolicy: "always"}})
	if b := e.startSignIn(t, url.Values{"scope": {"openid"}}); !strings.Contains(b.last, `value="totp_enroll"`) {
		t.Fatalf("always: openid alone was not asked for the step: %.300s", b.last)
	}
	e = newEnvFrom(t, envSetup{vars: map[string]string{config.EnvSCAPolicy: "180d"}})
	b := e.startSignIn(t, url.Values{"scope": {"openid"}})
	if !strings.Contains(b.last, `value="totp_enroll"`) {
		t.Fatalf("180d, never strong: no step: %.300s", b.last)
	}
	b.secondStep(e)
	b.decide(e, "allow")
	if b := e.startSignIn(t, url.Values{"scope": {"openid"}}); !strings.Contains(b.last, `value="allow"`) {
		t.Fatalf("180d, strong a moment ago: asked again: %.300s", b.last)
	}
	e.clock.Advance(181 * 24 * time.Hour)
	if b := e.startSignIn(t, url.Values{"scope": {"openid"}}); !strings.Contains(b.last, `value="mfa_totp"`) {
		t.Fatalf("180d, strong 181 days ago: no step: %.300s", b.last)
	}
}

// TestPasskey_AddThenSignInWithIt: after a password sign-in the consent page offers a passkey;
// the user adds one (user verification, discoverable), and a later sign-in from the login page
// with it alone is strong (amr hwk user mfa). An assertion sent twice, a cloned authenticator
// (the counter going back) and another site's passkey are refused, and nothing says whether
// the user has a passkey.
func TestPasskey_AddThenSignInWithIt(t *testing.T) {
	bothStores(t, map[string]string{config.EnvPasskeyRPID: "localhost"}, func(t *testing.T, e *env) {
		a := newAuthenticator(t, "localhost", e.srv.URL)
		b := e.startSignIn(t, url.Values{"scope": {"openid email"}})
		if !strings.Contains(b.last, `value="passkey_offer"`) {
			t.Fatalf("the consent page does not offer a passkey: %.400s", b.last)
		}
		b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"passkey_offer"}})
		b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"passkey_register"}, "credential": {a.create(t, b.last)}})
		if !strings.Contains(b.last, `value="allow"`) || strings.Contains(b.last, `value="passkey_offer"`) {
			t.Fatalf("after adding the passkey: %.400s", b.last)
		}
		f, _ := e.app.Store.Factors(context.Background(), e.uidOf(t, username))
		if !f.Has(oauth.FactorPasskey) {
			t.Fatal("the passkey was not stored")
		}

		signIn := func() *browser {
			b := newBrowser(t)
			b.open(e.authorizeURL(url.Values{"scope": {"openid bank:transfers:write"}}))
			if !strings.Contains(b.last, `value="passkey_login"`) {
				t.Fatalf("no passkey sign-in on the login page: %.400s", b.last)
			}
			return b
		}
		b = signIn()
		page := b.last
		cred := a.get(t, page)
		b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"passkey_login"}, "credential": {cred}})
		c := e.idTokenClaims(t, codeOf(t, b.decide(e, "allow")))
		if c.ACR != oauth.ACRStrong || strings.Join(c.AMR, " ") != "hwk user mfa" {
			t.Fatalf("passkey sign-in: acr %q amr %v", c.ACR, c.AMR)
		}

		// The same assertion again, on a new page: its challenge is not this page's.
		b = signIn()
		b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"passkey_login"}, "credential": {cred}})
		if strings.Contains(b.last, `value="allow"`) || !strings.Contains(b.last, `id="login-error"`) {
			t.Fatalf("a replayed assertion: %.300s", b.last)
		}
		// A clone: the counter goes back.
		b = signIn()
		a.Count -= 2
		b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"passkey_login"}, "credential": {a.get(t, b.last)}})
		if strings.Contains(b.last, `value="allow"`) {
			t.Fatal("an assertion with a lower counter was accepted")
		}
		a.Count += 10
		// Another site's passkey.
		other := newAuthenticator(t, "evil.example", e.srv.URL)
		other.UserHandle = a.UserHandle
		b = signIn()
		b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"passkey_login"}, "credential": {other.get(t, b.last)}})
		if strings.Contains(b.last, `value="allow"`) {
			t.Fatal("another site's passkey was accepted")
		}
		// The page answered once: its ceremony cannot be used twice.
		b = signIn()
		good := a.get(t, b.last)
		form := b.form
		b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"passkey_login"}, "credential": {good}})
		if !strings.Contains(b.last, `value="allow"`) {
			t.Fatalf("a good passkey sign-in: %.300s", b.last)
		}
		b.form = form // the login page's fields again: its ceremony was taken
		b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"passkey_login"}, "credential": {good}})
		if strings.Contains(b.last, `value="allow"`) {
			t.Fatal("one page's passkey ceremony was answered twice")
		}
	})
}

// TestPasskey_StepUpAfterPassword: a user with a passkey who signs in with the password is
// asked to confirm with the passkey for the payment scope; the id_token says pwd hwk user mfa.
func TestPasskey_StepUpAfterPassword(t *testing.T) {
	e := newEnvFrom(t, envSetup{vars: map[string]string{config.EnvPasskeyRPID: "localhost"}})
	a := newAuthenticator(t, "localhost", e.srv.URL)
	b := e.startSignIn(t, url.Values{"scope": {"openid"}})
	b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"passkey_offer"}})
	b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"passkey_register"}, "credential": {a.create(t, b.last)}})

	b = e.startSignIn(t, url.Values{"scope": {"openid bank:transfers:write"}})
	if !strings.Contains(b.last, `value="mfa_passkey"`) {
		t.Fatalf("expected the passkey step: %.400s", b.last)
	}
	b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"mfa_passkey"}, "credential": {a.get(t, b.last)}})
	c := e.idTokenClaims(t, codeOf(t, b.decide(e, "allow")))
	if c.ACR != oauth.ACRStrong || strings.Join(c.AMR, " ") != "pwd hwk user mfa" {
		t.Fatalf("password and passkey: acr %q amr %v", c.ACR, c.AMR)
	}
}

// TestRoundTrips_StrongSignInsOnDynamoDB counts what a TOTP sign-in and a passkey sign-in
// cost on the DynamoDB path, from the authorization request to the code (the client cached
// as in a warm function): the figures docs/scale.md gives.
func TestRoundTrips_StrongSignInsOnDynamoDB(t *testing.T) {
	e, _, ddbCalls := newAWSEnvWith(t, map[string]string{config.EnvPasskeyRPID: "localhost"})
	a := newAuthenticator(t, "localhost", e.srv.URL)
	transfers := url.Values{"scope": {"openid bank:transfers:write"}}
	// Set up both factors, and warm the client cache.
	b := e.startSignIn(t, transfers)
	b.secondStep(e)
	b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"passkey_offer"}})
	b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"passkey_register"}, "credential": {a.create(t, b.last)}})
	codeOf(t, b.decide(e, "allow"))

	count := func(name string, run func()) map[string]int {
		ddbCalls.Reset()
		run()
		got := ddbCalls.Calls()
		t.Logf("%s: DynamoDB %v", name, got)
		return got
	}
	uid := e.uidOf(t, username)
	f, _ := e.app.Store.Factors(context.Background(), uid)
	var secret string
	var last int64
	for _, x := range f.Factors {
		if x.Kind == oauth.FactorTOTP {
			secret, last = x.Secret, x.LastStep
		}
	}
	code := e.totpCode(t, secret, last)
	totpCalls := count("TOTP sign-in (login page, password, app code, consent)", func() {
		b := e.startSignIn(t, transfers)
		if !strings.Contains(b.last, `value="mfa_totp"`) {
			t.Fatalf("no TOTP step: %.300s", b.last)
		}
		b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"mfa_totp"}, "code": {code}})
		codeOf(t, b.decide(e, "allow"))
	})
	passkeyCalls := count("passkey sign-in (login page, passkey, consent)", func() {
		b := newBrowser(t)
		b.open(e.authorizeURL(transfers))
		b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"passkey_login"}, "credential": {a.get(t, b.last)}})
		codeOf(t, b.decide(e, "allow"))
	})
	// Each call is a GetItem, PutItem, UpdateItem or DeleteItem on a known key: nothing scans
	// or queries. The budgets are today's counts: a change that adds a call fails here and
	// updates docs/scale.md.
	want := map[string]map[string]int{
		"TOTP":    {"GetItem": 14, "PutItem": 9, "UpdateItem": 6, "DeleteItem": 5},
		"passkey": {"GetItem": 9, "PutItem": 5, "DeleteItem": 3},
	}
	for name, calls := range map[string]map[string]int{"TOTP": totpCalls, "passkey": passkeyCalls} {
		if !maps.Equal(calls, want[name]) {
			t.Errorf("%s sign-in: DynamoDB %v, want %v", name, calls, want[name])
		}
	}
}
