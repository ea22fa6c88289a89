package e2e

import (
	"context"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/oauth"
)

// Login protection (RFC 6819 4.4.3.6 online guessing, 5.1.4.2.3 lockout; OIDC Core 16.x):
// thresholds from the configuration, per-username and per-address counters in windows that
// expire, one generic answer, the same work for unknown users, a new session per login.

// lockoutEnv reads the thresholds from the environment variables a deployment sets.
func lockoutEnv(t *testing.T, maxFailures string) *env {
	return newSecEnv(t, secOptions{env: map[string]string{config.EnvLoginMaxFails: maxFailures, config.EnvLoginFailWindow: "10m"}})
}

// TestLogin_ThresholdsConfigurable: AUTH_LOGIN_MAX_FAILURES and AUTH_LOGIN_FAILURE_WINDOW set
// the policy; the documented defaults are 5 failures in 15 minutes; nonsense is refused.
func TestLogin_ThresholdsConfigurable(t *testing.T) {
	def := config.Defaults()
	if def.LoginMaxFailures != 5 || def.LoginFailWindow != 15*time.Minute {
		t.Fatalf("defaults %d in %v, documented 5 in 15m", def.LoginMaxFailures, def.LoginFailWindow)
	}
	e := lockoutEnv(t, "3")
	if p := e.app.Authn.LoginPolicy; p.MaxFailures != 3 || p.Window != 10*time.Minute {
		t.Fatalf("policy %+v, want 3 in 10m", p)
	}
	for _, bad := range []map[string]string{{config.EnvLoginMaxFails: "0"}, {config.EnvLoginMaxFails: "many"}, {config.EnvLoginFailWindow: "-1m"}} {
		if _, err := config.FromLookup(func(k string) (string, bool) { v, ok := bad[k]; return v, ok }); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestLogin_LockoutPerUsername: after the threshold of failures for a username, even the right
// password is refused with the same generic message, until the window ends.
func TestLogin_LockoutPerUsername(t *testing.T) {
	e := lockoutEnv(t, "3")
	var wrong string
	for i := 0; i < 3; i++ {
		b := newBrowser(t)
		e.loginAttempt(t, b, username, "wrong-"+string(rune('a'+i)))
		wrong = alertOf(b)
	}
	b := newBrowser(t)
	e.loginAttempt(t, b, "  ALICE ", password) // the counter is per normalised username
	if onConsent(b) {
		t.Fatal("the right password was accepted past the threshold")
	}
	if got := alertOf(b); got == "" || got != wrong {
		t.Fatalf("locked answer %q differs from a wrong password's %q", got, wrong)
	}
	if !strings.Contains(e.logs.String(), `"event":"login_locked"`) {
		t.Error("no audit event for the refused attempt")
	}
	// Another user is not locked by alice's failures.
	e.addUser(t, "uid-bob", "bob", "bob-password-123", cheapHasher)
	bob := newBrowser(t)
	e.loginAttempt(t, bob, "bob", "bob-password-123")
	if !onConsent(bob) {
		t.Fatal("bob was locked out by alice's failures")
	}
	e.clock.Advance(11 * time.Minute)
	b = newBrowser(t)
	e.loginAttempt(t, b, username, password)
	if !onConsent(b) {
		t.Fatal("the lockout did not end with its window")
	}
}

// TestLogin_SuccessResetsCounter: a successful login forgets earlier failures, so a user who
// mistypes now and then is never locked out.
func TestLogin_SuccessResetsCounter(t *testing.T) {
	e := lockoutEnv(t, "3")
	for round := 0; round < 3; round++ {
		for i := 0; i < 2; i++ {
			e.loginAttempt(t, newBrowser(t), username, "typo")
		}
		b := newBrowser(t)
		e.loginAttempt(t, b, username, password)
		if !onConsent(b) {
			t.Fatalf("round %d: locked out after a success reset the counter", round)
		}
	}
}

// TestLogin_LockoutPerAddress: one address guessing across many usernames (password spraying)
// is refused after 4x the per-username threshold, whatever username it tries next.
func TestLogin_LockoutPerAddress(t *testing.T) {
	e := lockoutEnv(t, "2")
	for i := 0; i < 8; i++ {
		e.loginAttempt(t, newBrowser(t), "user"+string(rune('a'+i)), "guess")
	}
	b := newBrowser(t)
	e.loginAttempt(t, b, username, password)
	if onConsent(b) {
		t.Fatal("an address past its threshold could still sign in")
	}
	e.clock.Advance(11 * time.Minute)
	b = newBrowser(t)
	e.loginAttempt(t, b, username, password)
	if !onConsent(b) {
		t.Fatal("the address lockout did not end with its window")
	}
}

// TestLogin_UnknownUserSameWork: an unknown username, a wrong password, a disabled user and a
// locked-out username all run the same argon2id computation as a real check, so the time taken
// does not tell which usernames exist (RFC 6819 4.4.3.6, OWASP). Measured without a clock: by
// the memory argon2id allocates, which is its cost parameter (4 MiB here) for every check.
func TestLogin_UnknownUserSameWork(t *testing.T) {
	e := lockoutEnv(t, "3")
	costly := authn.PasswordHasher{Time: 1, MemoryKiB: 4 << 10, Threads: 1}
	e.withAuthn(func(d *authn.Deps) { d.Passwords = costly })
	e.addUser(t, "uid-carol", "carol", "carol-password-1", costly)
	e.addUser(t, "uid-dave", "dave", "dave-password-12", costly)
	if err := e.app.Store.UpdateUser(context.Background(), "uid-dave", func(u oauth.User) (oauth.User, error) {
		u.Disabled = true
		return u, nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	allocated := func(user, pass, ip string) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		if _, err := e.app.Users.CheckPassword(ctx, user, pass, ip); err == nil {
			t.Fatalf("%s signed in", user)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	allocated("warm-up", "wrong", "192.0.2.0") // the first check of a configuration makes its dummy hash
	known := allocated("carol", "wrong", "192.0.2.1")
	const cost = 4 << 20
	if known < cost {
		t.Fatalf("a wrong password allocated %d bytes: argon2id did not run at its cost", known)
	}
	for _, c := range []struct{ name, user, ip string }{
		{"unknown user", "nobody-here", "192.0.2.2"},
		{"disabled user", "dave", "192.0.2.3"},
	} {
		if got := allocated(c.user, "wrong", c.ip); got < cost || got > known+known/4 {
			t.Errorf("%s: %d bytes of work, a known user's wrong password %d", c.name, got, known)
		}
	}
	for i := 0; i < 3; i++ {
		allocated("carol", "wrong", "192.0.2.9")
	}
	if got := allocated("carol", "wrong", "192.0.2.9"); got < cost || got > known+known/4 {
		t.Errorf("locked out: %d bytes of work, a known user's wrong password %d", got, known)
	}
}

// TestLogin_NewSessionEachLogin: a login always opens a new session with a new id and ends the
// one the browser had, so a session id planted or seen before the login is worth nothing after
// it (session fixation, RFC 6819 4.4.1.x, OWASP).
func TestLogin_NewSessionEachLogin(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	b := newBrowser(t)
	u, _ := url.Parse(e.srv.URL + "/")
	b.client.Jar.SetCookies(u, []*http.Cookie{{Name: "sid", Value: "ss_planted-by-an-attacker", Path: "/"}})
	e.loginAttempt(t, b, username, password)
	first := e.secCookie(b, "sid")
	if first == "" || first == "ss_planted-by-an-attacker" {
		t.Fatalf("session cookie after login %q", first)
	}
	b.decide(e, "allow")
	b.open(e.authorizeURL(url.Values{"prompt": {"login"}}))
	b.login(e, username, password)
	second := e.secCookie(b, "sid")
	if second == "" || second == first {
		t.Fatal("a second login kept the session id")
	}
	if e.sessionValid(t, first) {
		t.Fatal("the session replaced by a new login still works")
	}
	if !e.sessionValid(t, second) {
		t.Fatal("the new session does not work")
	}
}
