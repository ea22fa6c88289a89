package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/admin"
	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/signin"
)

// Red-team attacks on the sign-in (issue 24). Each test reproduces an attack through HTTP, on
// both stores, and asserts the outcome the rules in docs/SECURITY.md ("Sign-in integrity")
// promise.

// answer is one racing post's answer.
type answer struct {
	status   int
	location string
	page     string
	err      error
}

// race posts every form in forms at once from browser b (its cookies), released together, and
// returns the answers in the same order.
func race(t *testing.T, e *env, b *browser, forms []url.Values) []answer {
	t.Helper()
	out := make([]answer, len(forms))
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i, v := range forms {
		wg.Go(func() {
			<-gate
			out[i] = post(e, b, v)
		})
	}
	close(gate)
	wg.Wait()
	return out
}

// post posts v to the authorization endpoint from browser b (its cookies) without reading it
// into the browser, so that many may race.
func post(e *env, b *browser, v url.Values) answer {
	resp, err := b.client.PostForm(e.url(httpapi.PathAuthorize), v)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	page := new(strings.Builder)
	_, err = io.Copy(page, resp.Body)
	return answer{status: resp.StatusCode, location: resp.Header.Get("Location"), page: page.String(), err: err}
}

// with is form with fields set.
func with(form url.Values, fields url.Values) url.Values {
	v := url.Values{}
	for k := range form {
		v.Set(k, form.Get(k))
	}
	for k := range fields {
		v.Set(k, fields.Get(k))
	}
	return v
}

// pending reports whether the pending request id is stored (live).
func (e *env) pending(t *testing.T, id string) bool {
	t.Helper()
	_, err := e.app.Store.GetAuthRequest(context.Background(), id, e.clock.Now())
	return err == nil
}

// wantEveryAuditLineNamesTheClient checks that every audit line written so far, but an
// operator's, names the acceptance client.
func (e *env) wantEveryAuditLineNamesTheClient(t *testing.T) {
	t.Helper()
	n := 0
	for _, line := range strings.Split(e.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["log"] != "audit" || m["event"] == "operator_action" {
			continue
		}
		n++
		if m["client_id"] != clientID {
			t.Errorf("audit %v (reason %v) with client_id %q, want %q", m["event"], m["reason"], m["client_id"], clientID)
		}
	}
	if n == 0 {
		t.Error("no audit line written")
	}
}

// sessionCookie is the value of b's session cookie for the server.
func (e *env) sessionCookie(t *testing.T, b *browser) string {
	t.Helper()
	u, _ := url.Parse(e.srv.URL)
	for _, c := range b.client.Jar.Cookies(u) {
		if c.Name == "sid" || c.Name == "__Host-sid" {
			return c.Value
		}
	}
	return ""
}

// TestSignIn_ADecidedRequestIsNeverAnsweredAgain (hole 1): passkeys on, a user without a factor
// on the consent page of an ordinary request, which offers to add a passkey. The user's own
// browser (or a script in it) posts allow together with 49 passkey_offer on the same request.
// allow takes the request and issues a code; a passkey_offer that read the request before that
// writes it back afterwards (a plain put), at the add_passkey step. The decided request is
// then alive again: continue brings back the consent page and a second allow issues a second
// code for the one authorization request. The rule: allow and deny take the request (a consent
// is answered once; of racing actions one wins). Also: after a deny, the same request must not
// be allowed.
func TestSignIn_ADecidedRequestIsNeverAnsweredAgain(t *testing.T) {
	bothStores(t, map[string]string{config.EnvPasskeyRPID: "localhost"}, func(t *testing.T, e *env) {
		for _, decision := range []string{"allow", "deny"} {
			t.Run(decision, func(t *testing.T) {
				const rounds, offers = 20, 49
				for round := range rounds {
					u := e.newUser(t, "rt"+decision+string(rune('a'+round)))
					b := e.signInAs(t, u.name, u.pass, nil)
					if !onConsent(b) || !strings.Contains(b.last, `value="passkey_offer"`) {
						t.Fatalf("precondition: the consent page offering a passkey, got: %.400s", b.last)
					}
					form := b.form
					id := form.Get("request_id")
					codesBefore := e.codesIssued()
					forms := []url.Values{}
					for i := range offers + 1 {
						if i == offers/2 {
							forms = append(forms, with(form, url.Values{"action": {"consent"}, "decision": {decision}}))
							continue
						}
						forms = append(forms, with(form, url.Values{"action": {"passkey_offer"}}))
					}
					answers := race(t, e, b, forms)
					decided := answers[offers/2].status == http.StatusSeeOther
					for i, a := range answers {
						if a.err != nil || a.status >= 500 {
							t.Errorf("round %d post %d: %v %d (a dropped connection or a 5xx)", round, i, a.err, a.status)
						}
					}
					if !decided {
						continue // the offers came first: the decision was refused; nothing to check
					}
					if e.pending(t, id) {
						t.Errorf("round %d: the request decided (%s) is pending again after racing passkey_offer posts", round, decision)
					}
					// The attacker goes on with the page a racing offer showed.
					e.postOn(b, form, url.Values{"action": {"continue"}})
					e.tryAllow(t, b, form, fmt.Sprintf("round %d: the request decided once (%s), allowed again", round, decision))
					want := 0
					if decision == "allow" {
						want = 1
					}
					if n := e.codesIssued() - codesBefore; n != want {
						t.Errorf("round %d: %d codes issued for one authorization request answered %s, want %d", round, n, decision, want)
					}
					if t.Failed() {
						return
					}
				}
			})
		}
	})
}

// TestSignIn_SwitchEndsTheSessionEvenWhenACodeRaces (hole 2): a user with an authenticator app
// on the second-factor page of a payment request posts switch (switch account) and, at the
// same time, the right app code on the same request. switch takes the request, ends the session
// and starts a new unbound request; the code, checked meanwhile, then writes the ended session
// back (StepUp's plain put), strong, and the old request back at the consent step, where the
// ended session's cookie gets a payment code. The rule: switching account ends the session and
// starts a new request; the old one is gone. Afterwards the old session cookie must not be
// live, and the old request must not be pending or answer allow.
func TestSignIn_SwitchEndsTheSessionEvenWhenACodeRaces(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		secret, _ := e.enrolApp(t, username, password)
		uid := e.uidOf(t, username)
		const rounds = 15
		for round := range rounds {
			e.clock.Advance(31 * time.Second) // a fresh code each round
			b := e.signInAs(t, username, password, transfersScope)
			if !strings.Contains(b.last, `value="mfa_totp"`) {
				t.Fatalf("precondition: the second-factor page, got: %.300s", b.last)
			}
			form := b.form
			id := form.Get("request_id")
			sid := e.sessionCookie(t, b)
			if sid == "" {
				t.Fatal("precondition: no session cookie after the password")
			}
			code := e.totpCode(t, secret, e.storeTOTP(t, uid).LastStep)
			answers := race(t, e, b, []url.Values{
				with(form, url.Values{"action": {"consent"}, "decision": {"switch"}}),
				with(form, url.Values{"action": {"mfa_totp"}, "code": {code}}),
			})
			for i, a := range answers {
				if a.err != nil || a.status >= 500 {
					t.Errorf("round %d post %d: %v %d", round, i, a.err, a.status)
				}
			}
			switched := answers[0].status == http.StatusOK && strings.Contains(answers[0].page, `type="password"`)
			if !switched {
				continue // the code came first and the switch was refused or came after: fine
			}
			sess, _, err := e.app.Users.SessionUser(context.Background(), sid)
			if err != nil {
				t.Fatal(err)
			}
			if sess != nil {
				t.Errorf("round %d: the session switch ended is live again (amr %v) after a racing app code", round, sess.AMR)
			}
			if e.pending(t, id) {
				t.Errorf("round %d: the request switch replaced is pending again after a racing app code", round)
				if sess != nil {
					// The ended session's cookie (cleared by the switch's answer, kept by
					// whoever copied it) answers the old request: a payment code.
					u, _ := url.Parse(e.srv.URL)
					b.client.Jar.SetCookies(u, []*http.Cookie{{Name: "sid", Value: sid, Path: "/"}})
					e.tryAllow(t, b, form, "the old request and the ended session")
				}
			}
			if t.Failed() {
				return
			}
		}
	})
}

// TestSignIn_ADisabledUserMidSignInGetsNoCode: a user signed in with the password on the
// consent page is disabled by the operator; allow, deny, switch and passkey_offer on the page
// are refused (403) and write nothing; no code is issued.
func TestSignIn_ADisabledUserMidSignInGetsNoCode(t *testing.T) {
	bothStores(t, map[string]string{config.EnvPasskeyRPID: "localhost"}, func(t *testing.T, e *env) {
		u := e.newUser(t, "rtdisabled")
		b := e.signInAs(t, u.name, u.pass, nil)
		if !onConsent(b) {
			t.Fatalf("precondition: the consent page, got: %.300s", b.last)
		}
		form := b.form
		if err := e.app.Store.UpdateUser(context.Background(), u.uid, func(x oauth.User) (oauth.User, error) {
			x.Disabled = true
			return x, nil
		}); err != nil {
			t.Fatal(err)
		}
		writes, codes := e.writes.count(), e.codesIssued()
		for _, f := range []url.Values{
			{"action": {"consent"}, "decision": {"allow"}},
			{"action": {"consent"}, "decision": {"deny"}},
			{"action": {"passkey_offer"}},
			{"action": {"consent"}, "decision": {"switch"}},
		} {
			if resp := e.postOn(b, form, f); resp.StatusCode != http.StatusForbidden {
				t.Errorf("%v by a disabled user: %d, want 403", f, resp.StatusCode)
			}
		}
		if n := e.writes.count() - writes; n != 0 {
			t.Errorf("refused actions of a disabled user wrote %d times: %v", n, e.writes.list()[writes:])
		}
		if n := e.codesIssued() - codes; n != 0 {
			t.Errorf("%d codes issued to a disabled user", n)
		}
		if !e.pending(t, form.Get("request_id")) {
			t.Errorf("the refused actions took the request")
		}
	})
}

// TestSignIn_ARemovedFactorNoLongerMakesASessionStrong (hole 3): alice signs in strongly with
// her authenticator app for a payment (the browser's session is now strong), then reports the
// phone lost and the operator removes the app (`authctl users factors remove`, which says
// "remove one that is lost"); the same is checked after `reset`. The session the lost app made
// strong still consents to a new payment request straight away (the consent page, then a code
// with amr otp), for the rest of the session's lifetime: whoever holds the phone and the
// browser keeps moving money after the factor was removed. The rule: a factor is removed or
// reset only by the operator, and the payment scope needs a second factor; a removed factor
// must no longer count, so the next payment request asks for a factor the user holds (here:
// set one up).
func TestSignIn_ARemovedFactorNoLongerMakesASessionStrong(t *testing.T) {
	for _, how := range []string{"remove", "reset"} {
		t.Run(how, func(t *testing.T) {
			bothStores(t, nil, func(t *testing.T, e *env) {
				e.enrolApp(t, username, password)
				uid := e.uidOf(t, username)
				b := e.startSignIn(t, transfersScope)
				codeOf(t, b.decide(e, "allow")) // the app's code, then allow: the session is strong
				adm := admin.New(e.app.Store, cheapHasher, e.clock, e.app.Service.Audit)
				switch how {
				case "remove":
					if _, err := adm.RemoveFactor(context.Background(), uid, e.storeTOTP(t, uid).ID); err != nil {
						t.Fatal(err)
					}
				case "reset":
					if _, _, err := adm.ResetFactors(context.Background(), uid); err != nil {
						t.Fatal(err)
					}
				}
				if f := e.factorsOf(t, uid); len(f) != 0 {
					t.Fatalf("precondition: the app is removed, factors left: %s", describeFactors(f))
				}
				codes := e.codesIssued()
				b.open(e.authorizeURL(transfersScope))
				if onConsent(b) {
					t.Errorf("a payment request after the operator removed the only factor: the consent page straight away")
				}
				e.tryAllow(t, b, b.form, "the session made strong by a removed factor")
				if n := e.codesIssued() - codes; n != 0 {
					t.Errorf("%d codes issued for a payment to the session of a removed factor", n)
				}
			})
		})
	}
}

// TestSignIn_OneRecoveryCodeRacedOnFiftyRequestsPassesOnce: alice's password is known on 50
// pending payment requests, each on its second-factor page in a browser of its own; one of her
// recovery codes is posted on all 50 at once. One request reaches the consent page, the 49
// others are refused, and nine recovery codes are left.
func TestSignIn_OneRecoveryCodeRacedOnFiftyRequestsPassesOnce(t *testing.T) {
	bothStores(t, map[string]string{"AUTH_LOGIN_MAX_FAILURES": "1000"}, func(t *testing.T, e *env) {
		_, recovery := e.enrolApp(t, username, password)
		uid := e.uidOf(t, username)
		const n = 50
		browsers := make([]*browser, n)
		for i := range browsers {
			browsers[i] = e.signInAs(t, username, password, transfersScope)
			if !strings.Contains(browsers[i].last, `value="mfa_recovery"`) {
				t.Fatalf("precondition: the second-factor page with recovery codes, got: %.300s", browsers[i].last)
			}
		}
		gate := make(chan struct{})
		answers := make([]answer, n)
		var wg sync.WaitGroup
		for i, b := range browsers {
			v := with(b.form, url.Values{"action": {"mfa_recovery"}, "code": {recovery[0]}})
			wg.Go(func() {
				<-gate
				answers[i] = post(e, b, v)
			})
		}
		close(gate)
		wg.Wait()
		passed := 0
		for i, a := range answers {
			switch {
			case a.err != nil || a.status >= 500:
				t.Errorf("post %d: %v %d", i, a.err, a.status)
			case strings.Contains(a.page, `value="allow"`):
				passed++
			}
		}
		if passed != 1 {
			t.Errorf("one recovery code raced on %d requests passed %d times, want 1", n, passed)
		}
		f := e.storeTOTP(t, uid)
		if left := len(f.RecoveryHashes); left != authn.RecoveryCodeCount-1 {
			t.Errorf("%d recovery codes left, want %d", left, authn.RecoveryCodeCount-1)
		}
	})
}

// TestSignIn_TheLoginPagesRequestIsGoneOnceSignedIn: after the password, every action posted on
// the login page's request id (the id before the rotation at login), with the browser's own
// cookies and CSRF token, answers the expired page (400) and writes nothing.
func TestSignIn_TheLoginPagesRequestIsGoneOnceSignedIn(t *testing.T) {
	bothStores(t, map[string]string{config.EnvPasskeyRPID: "localhost"}, func(t *testing.T, e *env) {
		b := newBrowser(t)
		b.open(e.authorizeURL(transfersScope))
		old := b.form
		b.login(e, username, password)
		if b.form.Get("request_id") == old.Get("request_id") || b.form.Get("request_id") == "" {
			t.Fatalf("precondition: a new request id after the password, got %q", b.form.Get("request_id"))
		}
		writes := e.writes.count()
		for _, a := range signin.Actions {
			f := url.Values{"action": {string(a)}, "username": {username}, "password": {password}, "code": {"123456"}}
			if resp := e.postOn(b, old, f); resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s on the login page's request after the sign-in: %d, want 400", a, resp.StatusCode)
			}
		}
		if n := e.writes.count() - writes; n != 0 {
			t.Errorf("actions on the login page's old request wrote %d times: %v", n, e.writes.list()[writes:])
		}
	})
}

// TestSignIn_OnePasskeyAnswerRacedFiftyTimesSignsInOnce: passkeys on; alice has a passkey. One
// assertion of it, for the login page's ceremony, is posted 50 times at once on that page (the
// ceremony taken 50 times), and then one assertion for the second-factor page's ceremony of a
// password sign-in, 50 times at once: each time one post goes on (a session bound, the consent
// page), the 49 others are refused, none answers 5xx; every audit line names the client.
func TestSignIn_OnePasskeyAnswerRacedFiftyTimesSignsInOnce(t *testing.T) {
	bothStores(t, map[string]string{config.EnvPasskeyRPID: "localhost"}, func(t *testing.T, e *env) {
		a := newAuthenticator(t, "localhost", e.srv.URL)
		b := e.startSignIn(t, url.Values{"scope": {"openid email"}})
		b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"passkey_offer"}})
		b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"passkey_register"}, "credential": {a.create(t, b.last)}})
		if f, _ := e.app.Store.Factors(context.Background(), e.uidOf(t, username)); !f.Has(oauth.FactorPasskey) {
			t.Fatalf("precondition: alice's passkey is stored: %.300s", b.last)
		}
		const n = 50
		check := func(what string, answers []answer) {
			t.Helper()
			passed := 0
			for i, x := range answers {
				switch {
				case x.err != nil || x.status >= 500:
					t.Errorf("%s post %d: %v %d", what, i, x.err, x.status)
				case strings.Contains(x.page, `value="allow"`):
					passed++
				}
			}
			if passed != 1 {
				t.Errorf("%s: one passkey answer posted %d times at once passed %d times, want 1", what, n, passed)
			}
		}

		lb := newBrowser(t)
		lb.open(e.authorizeURL(transfersScope))
		cred := a.get(t, lb.last)
		forms := make([]url.Values, n)
		for i := range forms {
			forms[i] = with(lb.form, url.Values{"action": {"passkey_login"}, "credential": {cred}})
		}
		check("passkey_login", race(t, e, lb, forms))

		sb := e.signInAs(t, username, password, transfersScope)
		if !strings.Contains(sb.last, `value="mfa_passkey"`) {
			t.Fatalf("precondition: the second-factor page offers the passkey, got: %.300s", sb.last)
		}
		cred = a.get(t, sb.last)
		for i := range forms {
			forms[i] = with(sb.form, url.Values{"action": {"mfa_passkey"}, "credential": {cred}})
		}
		check("mfa_passkey", race(t, e, sb, forms))
		e.wantEveryAuditLineNamesTheClient(t)
	})
}

// TestSignIn_MalformedPasskeyAnswersAreRefusedCleanly: passkeys on. Malformed WebAuthn answers
// (not JSON, JSON of the wrong shape, huge numbers, wrong types, an empty object) posted as
// passkey_login on the login page, as passkey_register on the set-up page and from the consent
// page's offer, each answer a page (the step again, no 5xx, no dropped connection), and
// neither a session nor a factor is made; every audit line names the client.
func TestSignIn_MalformedPasskeyAnswersAreRefusedCleanly(t *testing.T) {
	bothStores(t, map[string]string{config.EnvPasskeyRPID: "localhost"}, func(t *testing.T, e *env) {
		bad := []string{"x", "{}", "null", "[]", `{"id":1}`, `{"id":"AA","rawId":"AA","type":"public-key","response":{}}`,
			`{"id":"AA","rawId":"AA","type":"public-key","response":{"clientDataJSON":"e30","authenticatorData":"AA","signature":"AA","userHandle":"dWlkLWFsaWNl"}}`,
			`{"id":"AA","rawId":"AA","type":"public-key","response":{"clientDataJSON":"e30","attestationObject":"oA"}}`,
			`{"id":"` + strings.Repeat("A", 40000) + `"}`, `{"response":{"clientDataJSON":99999999999999999999999}}`}
		u := e.newUser(t, "rtmalformed")
		uid := u.uid
		lb := newBrowser(t)
		lb.open(e.authorizeURL(nil))
		login := lb.form
		eb := e.signInAs(t, u.name, u.pass, transfersScope) // no factor: the set-up page
		if !strings.Contains(eb.last, `value="passkey_register"`) {
			t.Fatalf("precondition: the set-up page offers a passkey, got: %.300s", eb.last)
		}
		enrol := eb.form
		cb := e.signInAs(t, u.name, u.pass, nil)
		cb.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"passkey_offer"}})
		if !strings.Contains(cb.last, `value="passkey_register"`) {
			t.Fatalf("precondition: the add-passkey page, got: %.300s", cb.last)
		}
		add := cb.form
		for _, c := range bad {
			for what, p := range map[string]struct {
				b      *browser
				form   url.Values
				action string
			}{"login": {lb, login, "passkey_login"}, "set-up": {eb, enrol, "passkey_register"}, "add": {cb, add, "passkey_register"}} {
				resp := e.postOn(p.b, p.form, url.Values{"action": {p.action}, "credential": {c}})
				if resp.StatusCode >= 500 || onConsent(p.b) || showsRecoveryCodes(p.b.last) {
					t.Errorf("%s, %s with %.40q: %d, %.200s", what, p.action, c, resp.StatusCode, p.b.last)
				}
				if resp.StatusCode == http.StatusOK && p.b.form.Get("request_id") != "" {
					p.form.Set("request_id", p.b.form.Get("request_id"))
				}
			}
		}
		if f := e.factorsOf(t, uid); len(f) != 0 {
			t.Errorf("malformed passkey answers stored factors: %s", describeFactors(f))
		}
		e.wantEveryAuditLineNamesTheClient(t)
	})
}

// TestSignIn_FiftyRacingSetUpsOfOneAppEnrolOnce: a user without a factor on the set-up page of a
// payment request posts the app's right code 50 times at once. One post sets the app up and
// shows the recovery codes, the 49 others show no codes; one app is stored, with the page's key
// and the ten codes shown; and the recovery-codes page's continue leads to the consent page.
// (hole 4) A losing post, which read the request before the winner wrote it, writes it back
// at the second-factor step after the winner's write (a plain put), so the customer's continue
// on the recovery-codes page is refused ("This page can no longer be used").
func TestSignIn_FiftyRacingSetUpsOfOneAppEnrolOnce(t *testing.T) {
	bothStores(t, map[string]string{"AUTH_LOGIN_MAX_FAILURES": "1000"}, func(t *testing.T, e *env) {
		const rounds = 5 // a race: the losing write lands last in most rounds, not all
		for round := range rounds {
			u := e.newUser(t, fmt.Sprintf("rtenrol%d", round))
			b := e.signInAs(t, u.name, u.pass, transfersScope)
			m := totpSecretRe.FindStringSubmatch(b.last)
			if m == nil {
				t.Fatalf("precondition: the set-up page, got: %.300s", b.last)
			}
			secret := strings.ReplaceAll(m[1], " ", "")
			code := e.totpCode(t, secret, 0)
			const n = 50
			forms := make([]url.Values, n)
			for i := range forms {
				forms[i] = with(b.form, url.Values{"action": {"totp_enroll"}, "code": {code}})
			}
			answers := race(t, e, b, forms)
			shown := 0
			var codesPage string
			for i, a := range answers {
				switch {
				case a.err != nil || a.status >= 500:
					t.Errorf("post %d: %v %d", i, a.err, a.status)
				case showsRecoveryCodes(a.page):
					shown++
					codesPage = a.page
				}
			}
			if shown != 1 {
				t.Fatalf("recovery codes shown %d times for %d racing set-ups of one app, want 1", shown, n)
			}
			f := e.storeTOTP(t, u.uid)
			if f.Secret != secret || len(e.factorsOf(t, u.uid)) != 1 || len(f.RecoveryHashes) != authn.RecoveryCodeCount {
				t.Errorf("stored factors %s, want the page's app alone with %d codes", describeFactors(e.factorsOf(t, u.uid)), authn.RecoveryCodeCount)
			}
			b.read(&http.Response{Body: io.NopCloser(strings.NewReader(codesPage))})
			stored, err := e.app.Store.GetAuthRequest(context.Background(), b.form.Get("request_id"), e.clock.Now())
			if err != nil || stored.Step != "codes" {
				t.Errorf("round %d: after the racing set-ups the request stands at step %q (%v), want codes: a losing post wrote over the winner's", round, stored.Step, err)
			}
			b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"continue"}})
			if !onConsent(b) {
				t.Errorf("continue after the recovery codes: not the consent page: %.300s", b.last)
			}
			if t.Failed() {
				return
			}
		}
	})
}

// TestSignIn_ExistingSessionsAnswerOnlyWhatTheyMay: alice has an app. (1) A browser whose session
// has the password alone is asked for the second factor on a payment request, whether sent
// directly or pushed (PAR), and an allow posted there is refused. (2) With a strong session:
// prompt=login and max_age=0 show the login page, and the password alone then asks for the
// second factor again (the new session is not strong); prompt=none never yields a code
// (consent_required). (3) select_account shows the login page; bob signing in there ends
// alice's session and is shown his own set-up page.
func TestSignIn_ExistingSessionsAnswerOnlyWhatTheyMay(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		e.enrolApp(t, username, password)
		bob := e.newUser(t, "rtbob")
		codes := e.codesIssued()

		weak := e.signInAs(t, username, password, nil) // password alone, the consent page
		if !onConsent(weak) {
			t.Fatalf("precondition: the consent page, got: %.300s", weak.last)
		}
		weak.open(e.authorizeURL(transfersScope))
		if !strings.Contains(weak.last, `value="mfa_totp"`) {
			t.Errorf("a password-only session on a payment request: not the second-factor page: %.300s", weak.last)
		}
		e.tryAllow(t, weak, weak.form, "a password-only session on a payment request")
		st, body := e.push(t, with(pushedParams("E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"), url.Values{"scope": {"openid " + oauth.ScopeTransfersWrite}}))
		uri, _ := body["request_uri"].(string)
		if st != http.StatusCreated || uri == "" {
			t.Fatalf("push: %d %v", st, body)
		}
		weak.open(e.parURL(uri))
		if !strings.Contains(weak.last, `value="mfa_totp"`) {
			t.Errorf("a password-only session on a pushed payment request: not the second-factor page: %.300s", weak.last)
		}
		e.tryAllow(t, weak, weak.form, "a password-only session on a pushed payment request")

		strong := e.startSignIn(t, transfersScope)
		codeOf(t, strong.decide(e, "allow"))
		codes = e.codesIssued()
		for _, extra := range []url.Values{{"prompt": {"login"}}, {"max_age": {"0"}}} {
			e.clock.Advance(2 * time.Second)
			q := with(transfersScope, extra)
			strong.open(e.authorizeURL(q))
			if !strings.Contains(strong.last, `type="password"`) {
				t.Errorf("%v with a strong session: not the login page: %.300s", extra, strong.last)
				continue
			}
			form, page := strong.form, strong.last
			e.tryAllow(t, strong, form, fmt.Sprintf("%v on the login page", extra))
			strong.form, strong.last = form, page
			strong.login(e, username, password)
			if !strings.Contains(strong.last, `value="mfa_totp"`) {
				t.Errorf("%v, then the password alone: not the second-factor page: %.300s", extra, strong.last)
			}
			form, page = strong.form, strong.last
			e.tryAllow(t, strong, form, fmt.Sprintf("%v, then the password alone", extra))
			strong.form, strong.last = form, page
			strong.secondStep(e) // strong again for what follows
		}
		resp := strong.open(e.authorizeURL(with(transfersScope, url.Values{"prompt": {"none"}})))
		loc, _ := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusSeeOther || loc.Query().Get("code") != "" || loc.Query().Get("error") != "consent_required" {
			t.Errorf("prompt=none with a strong session: %d %s, want consent_required and no code", resp.StatusCode, loc.Redacted())
		}
		if n := e.codesIssued() - codes; n != 0 {
			t.Errorf("%d codes issued", n)
		}

		sid := e.sessionCookie(t, strong)
		strong.open(e.authorizeURL(with(transfersScope, url.Values{"prompt": {"select_account"}})))
		if !strings.Contains(strong.last, `type="password"`) {
			t.Fatalf("select_account: not the login page: %.300s", strong.last)
		}
		strong.login(e, bob.name, bob.pass)
		if !strings.Contains(strong.last, `value="totp_enroll"`) {
			t.Errorf("bob after select_account on alice's strong session, payment request: not bob's set-up page: %.300s", strong.last)
		}
		if sess, _, _ := e.app.Users.SessionUser(context.Background(), sid); sess != nil {
			t.Errorf("alice's session is live after bob signed in in the same browser")
		}
	})
}

// TestSignIn_RacingSignInsOnOneLoginPageOpenOneSession (hole 5): alice's right password is
// posted 50 times at once on one login page. One post binds the request (a new id, a session
// cookie); the 49 others are refused ("This page can no longer be used"). The rule: a refused
// action writes nothing. Each refused post has checked the password and stored a session
// (whose cookie no one is given) before its take of the request failed: the store holds one
// session per racing post, not one.
func TestSignIn_RacingSignInsOnOneLoginPageOpenOneSession(t *testing.T) {
	bothStores(t, map[string]string{"AUTH_LOGIN_MAX_FAILURES": "1000"}, func(t *testing.T, e *env) {
		b := newBrowser(t)
		b.open(e.authorizeURL(nil))
		const n = 50
		forms := make([]url.Values, n)
		for i := range forms {
			forms[i] = with(b.form, url.Values{"action": {"login"}, "username": {username}, "password": {password}})
		}
		before := len(e.writes.list())
		answers := race(t, e, b, forms)
		bound, refusedN := 0, 0
		for i, a := range answers {
			switch {
			case a.err != nil || a.status >= 500:
				t.Errorf("post %d: %v %d", i, a.err, a.status)
			case onConsent(&browser{last: a.page}):
				bound++
			case a.status == http.StatusForbidden:
				refusedN++
			}
		}
		if bound != 1 {
			t.Errorf("%d of %d racing sign-ins on one login page bound it, want 1", bound, n)
		}
		sessions := 0
		for _, w := range e.writes.list()[before:] {
			if w == "PutSession" {
				sessions++
			}
		}
		if sessions != bound {
			t.Errorf("%d sessions stored for %d racing sign-ins on one page, of which %d bound it and %d were refused: refused sign-ins wrote a session", sessions, n, bound, refusedN)
		}
	})
}
