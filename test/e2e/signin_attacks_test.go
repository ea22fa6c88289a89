package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
)

// The attacker's end-to-end tests of the sign-in (issue 24, "Sign-in integrity"): each posts the
// forms an attacker can post on a pending request and asserts outcomes only (what is stored,
// whether a code is issued and what its tokens carry, that the server answers cleanly), never
// the page a refusal shows. A refused action may answer with any 4xx page or by showing the
// second-factor page again (refused).

var transfersScope = url.Values{"scope": {"openid " + oauth.ScopeTransfersWrite}}

// account is a user a test adds besides the seeded victim (alice), without any factor.
type account struct{ name, uid, pass string }

func (e *env) newUser(t *testing.T, name string) account {
	t.Helper()
	a := account{name: name, uid: "uid-" + name, pass: name + "-password-0123456789"}
	e.addUser(t, a.uid, a.name, a.pass, cheapHasher)
	return a
}

// refused reports whether an answer refused the action posted: a 4xx page, or a 200 page that
// is neither the consent page nor the recovery codes (the step shown again). A redirect (a code
// or an error for the client), a 5xx or a dropped connection is not a refusal.
func refused(status int, page string) bool {
	switch {
	case status >= 400 && status < 500:
		return true
	case status == http.StatusOK:
		return !strings.Contains(page, `value="allow"`) && !showsRecoveryCodes(page)
	}
	return false
}

func showsRecoveryCodes(page string) bool {
	return strings.Contains(page, `class="codes"`) || recoveryCodesRe.MatchString(page)
}

// signInAs opens an authorization request in a new browser and signs in as user with the
// password; it returns the browser on the page that follows.
func (e *env) signInAs(t *testing.T, user, pass string, extra url.Values) *browser {
	t.Helper()
	b := newBrowser(t)
	if resp := b.open(e.authorizeURL(extra)); resp.StatusCode != http.StatusOK {
		t.Fatalf("authorize: %d", resp.StatusCode)
	}
	b.login(e, user, pass)
	return b
}

// enrolApp sets up user's authenticator app as the user does (password, the set-up page's key,
// a code of it) and returns the key and the ten recovery codes shown once.
func (e *env) enrolApp(t *testing.T, user, pass string) (string, []string) {
	t.Helper()
	b := e.signInAs(t, user, pass, transfersScope)
	m := totpSecretRe.FindStringSubmatch(b.last)
	if m == nil {
		t.Fatalf("%s: expected the authenticator set-up page, got: %.400s", user, b.last)
	}
	secret := strings.ReplaceAll(m[1], " ", "")
	b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"totp_enroll"}, "code": {e.totpCode(t, secret, 0)}})
	var codes []string
	for _, c := range recoveryCodesRe.FindAllStringSubmatch(b.last, -1) {
		codes = append(codes, c[1])
	}
	if len(codes) != authn.RecoveryCodeCount {
		t.Fatalf("%s: %d recovery codes shown at set-up, want %d", user, len(codes), authn.RecoveryCodeCount)
	}
	return secret, codes
}

// factorPrint is what a user's stored factors are, without the counters a use moves on (the
// last step, the last use): which factors, their keys and the recovery codes left.
type factorPrint struct {
	Kind, ID, Secret string
	CredentialID     []byte
	RecoveryHashes   []string
}

func (e *env) factorsOf(t *testing.T, uid string) []factorPrint {
	t.Helper()
	f, err := e.app.Store.Factors(context.Background(), uid)
	if err != nil {
		t.Fatal(err)
	}
	var out []factorPrint
	for _, x := range f.Factors {
		out = append(out, factorPrint{Kind: x.Kind, ID: x.ID, Secret: x.Secret, CredentialID: x.CredentialID, RecoveryHashes: x.RecoveryHashes})
	}
	return out
}

func (e *env) wantFactorsUnchanged(t *testing.T, who, uid string, before []factorPrint) {
	t.Helper()
	if after := e.factorsOf(t, uid); !reflect.DeepEqual(after, before) {
		t.Errorf("%s's factors changed: before %s, after %s", who, describeFactors(before), describeFactors(after))
	}
}

// describeFactors names factors without their keys: kind and id of each, its recovery codes left.
func describeFactors(fs []factorPrint) string {
	var out []string
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s %s (%d recovery codes)", f.Kind, f.ID, len(f.RecoveryHashes)))
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// storeTOTP is the stored authenticator-app factor of uid (zero when none).
func (e *env) storeTOTP(t *testing.T, uid string) oauth.Factor {
	t.Helper()
	f, err := e.app.Store.Factors(context.Background(), uid)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range f.Factors {
		if x.Kind == oauth.FactorTOTP {
			return x
		}
	}
	return oauth.Factor{}
}

// codesIssued counts the authorization codes stored so far.
func (e *env) codesIssued() int {
	n := 0
	for _, w := range e.writes.list() {
		if w == "CreateCode" {
			n++
		}
	}
	return n
}

// postOn posts fields on the pending request whose form (request id, CSRF token) is form, as a
// hostile page or script would, whatever page the browser shows now.
func (e *env) postOn(b *browser, form url.Values, fields url.Values) *http.Response {
	b.t.Helper()
	b.form = form
	return b.submit(e.url(httpapi.PathAuthorize), fields)
}

// tryAllow posts an "allow" on the pending request; a code it yields is exchanged and reported
// as a failure with what its id_token carries.
func (e *env) tryAllow(t *testing.T, b *browser, form url.Values, what string) {
	t.Helper()
	resp := e.postOn(b, form, url.Values{"action": {"consent"}, "decision": {"allow"}})
	if resp.StatusCode != http.StatusSeeOther {
		return
	}
	loc, _ := url.Parse(resp.Header.Get("Location"))
	code := loc.Query().Get("code")
	if code == "" {
		return
	}
	st, body := e.exchange(t, code, nil)
	c := idClaims{}
	if raw, ok := body["id_token"].(string); ok && st == http.StatusOK {
		if idt, err := e.verifier(t).Verify(context.Background(), raw); err == nil {
			_ = idt.Claims(&c)
		}
	}
	t.Errorf("%s: a code was issued; its token has scope %v, acr %q, amr %v", what, body["scope"], c.ACR, c.AMR)
}

// passkeyPage is a page carrying a passkey form with options o, for the software authenticator
// to answer when the server showed none: the attacker makes up the ceremony.
func passkeyPage(t *testing.T, o map[string]any) string {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"publicKey": o})
	if err != nil {
		t.Fatal(err)
	}
	return `data-options="` + html.EscapeString(string(raw)) + `"`
}

// registrationOffered reports whether page carries a passkey registration ceremony (options
// with a user to create a credential for).
func registrationOffered(page string) bool {
	m := passkeyOptionsRe.FindStringSubmatch(page)
	if m == nil {
		return false
	}
	var o struct {
		PublicKey struct {
			User map[string]any `json:"user"`
		} `json:"publicKey"`
	}
	return json.Unmarshal([]byte(html.UnescapeString(m[1])), &o) == nil && o.PublicKey.User != nil
}

// TestSCA_PasswordAloneNeverAddsAFactorOrPassesStrongAuth (finding 1): with the stolen password
// of a customer who has an authenticator app, an attacker asks for a payment scope and, on the
// second-factor page, posts passkey_offer then passkey_register with its own authenticator. No
// code is issued, the victim's factors are unchanged, and the attacker's passkey does not sign
// in afterwards. The victim, once strong, can still add a passkey.
func TestSCA_PasswordAloneNeverAddsAFactorOrPassesStrongAuth(t *testing.T) {
	bothStores(t, map[string]string{config.EnvPasskeyRPID: "localhost"}, func(t *testing.T, e *env) {
		secret, _ := e.enrolApp(t, username, password)
		uid := e.uidOf(t, username)
		before := e.factorsOf(t, uid)
		codesBefore := e.codesIssued()

		attacker := newAuthenticator(t, "localhost", e.srv.URL)
		b := e.signInAs(t, username, password, transfersScope)
		if !strings.Contains(b.last, `value="mfa_totp"`) {
			t.Fatalf("precondition: expected the second-factor page, got: %.400s", b.last)
		}
		form := b.form
		if resp := e.postOn(b, form, url.Values{"action": {"passkey_offer"}}); !refused(resp.StatusCode, b.last) {
			t.Errorf("passkey_offer with the password alone: %d, not refused", resp.StatusCode)
		}
		page := b.last
		if !registrationOffered(page) {
			// No registration ceremony shown: the attacker makes one up for the victim.
			page = passkeyPage(t, map[string]any{"challenge": b64u.EncodeToString([]byte("made-up-challenge-0123456789abcd")),
				"user": map[string]any{"id": b64u.EncodeToString([]byte(uid)), "name": username}})
		}
		resp := e.postOn(b, form, url.Values{"action": {"passkey_register"}, "credential": {attacker.create(t, page)}})
		if !refused(resp.StatusCode, b.last) {
			t.Errorf("passkey_register of the attacker's passkey with the password alone: %d, not refused", resp.StatusCode)
		}
		e.tryAllow(t, b, form, "password and the attacker's passkey")
		if n := e.codesIssued() - codesBefore; n != 0 {
			t.Errorf("%d codes issued to the password alone", n)
		}
		e.wantFactorsUnchanged(t, "the victim", uid, before)

		// The attacker's passkey alone, on a new request.
		lb := newBrowser(t)
		lb.open(e.authorizeURL(transfersScope))
		if !passkeyOptionsRe.MatchString(lb.last) {
			t.Errorf("precondition: the login page offers no passkey sign-in: %.300s", lb.last)
		} else {
			lform := lb.form
			resp := e.postOn(lb, lform, url.Values{"action": {"passkey_login"}, "credential": {attacker.get(t, lb.last)}})
			if !refused(resp.StatusCode, lb.last) {
				t.Errorf("the attacker's passkey signed in alone: %d", resp.StatusCode)
			}
			e.tryAllow(t, lb, lform, "the attacker's passkey alone")
		}

		// The victim, strong with the app, adds a passkey of its own: the rule is not "no passkeys".
		vb := e.signInAs(t, username, password, url.Values{"scope": {"openid email"}, "acr_values": {oauth.ACRStrong}})
		tf := e.storeTOTP(t, uid)
		if tf.Secret != secret {
			t.Fatalf("the victim's app key is not the one enrolled")
		}
		vb.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"mfa_totp"}, "code": {e.totpCode(t, secret, tf.LastStep)}})
		if !onConsent(vb) {
			t.Fatalf("the victim's own app code: %.300s", vb.last)
		}
		own := newAuthenticator(t, "localhost", e.srv.URL)
		vb.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"passkey_offer"}})
		vb.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"passkey_register"}, "credential": {own.create(t, vb.last)}})
		f, _ := e.app.Store.Factors(context.Background(), uid)
		if !f.Has(oauth.FactorPasskey) || !f.Has(oauth.FactorTOTP) {
			t.Errorf("a strong victim could not add its passkey: %+v", e.factorsOf(t, uid))
		}
	})
}

// wantAppStillWorks signs uid in afresh with the password and its own authenticator app (secret),
// then with one of its recovery codes: both must reach the consent page.
func (e *env) wantAppStillWorks(t *testing.T, user, pass, uid, secret, recovery string) {
	t.Helper()
	b := e.signInAs(t, user, pass, transfersScope)
	if !strings.Contains(b.last, `value="mfa_totp"`) {
		t.Errorf("%s's sign-in: expected the second-factor page, got: %.300s", user, b.last)
		return
	}
	b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"mfa_totp"}, "code": {e.totpCode(t, secret, e.storeTOTP(t, uid).LastStep)}})
	if !onConsent(b) {
		t.Errorf("%s's own authenticator app is refused: the consent page is not reached", user)
	}
	b = e.signInAs(t, user, pass, transfersScope)
	b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"mfa_recovery"}, "code": {recovery}})
	if !onConsent(b) {
		t.Errorf("%s's own recovery code is refused: the consent page is not reached", user)
	}
}

// TestSCA_AnotherAccountsPendingKeyNeverBecomesTheVictims (finding 2): passkeys off. On one
// pending request the attacker signs in with its own account, which has no factor (the set-up
// page puts a key S on the request), then posts the login form again with the victim's password
// (refused: the request is bound to the attacker), switches account and signs in as the victim,
// then posts totp_enroll with a code of S on both requests. The victim's factors are unchanged (same key, same recovery
// hashes), no recovery codes are shown, no code is issued, and the victim's own app and recovery
// code still work afterwards.
func TestSCA_AnotherAccountsPendingKeyNeverBecomesTheVictims(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		own := e.newUser(t, "mallory") // the attacker's own account
		secret, recovery := e.enrolApp(t, username, password)
		uid := e.uidOf(t, username)
		before := e.factorsOf(t, uid)
		codesBefore := e.codesIssued()

		b := e.signInAs(t, own.name, own.pass, transfersScope)
		m := totpSecretRe.FindStringSubmatch(b.last)
		if m == nil {
			t.Fatalf("precondition: the attacker's own account without a factor is shown the set-up page, got: %.400s", b.last)
		}
		s := strings.ReplaceAll(m[1], " ", "")
		mine := b.form
		victims := e.switchTo(t, b, mine, username, password)
		for what, form := range map[string]url.Values{"the victim's request": victims, "the attacker's request": mine} {
			resp := e.postOn(b, form, url.Values{"action": {"totp_enroll"}, "code": {e.totpCode(t, s, 0)}})
			if !refused(resp.StatusCode, b.last) {
				t.Errorf("totp_enroll of the attacker's key on %s, signed in as the victim: %d, not refused", what, resp.StatusCode)
			}
			if showsRecoveryCodes(b.last) {
				t.Errorf("recovery codes shown to the attacker for its key")
			}
			e.postOn(b, form, url.Values{"action": {"continue"}})
			e.tryAllow(t, b, form, "the victim's password and the attacker's key on "+what)
		}
		if n := e.codesIssued() - codesBefore; n != 0 {
			t.Errorf("%d codes issued", n)
		}
		e.wantFactorsUnchanged(t, "the victim", uid, before)
		e.wantAppStillWorks(t, username, password, uid, secret, recovery[0])
	})
}

// TestSCA_PasskeyOfferWithPasskeysOffAnswersCleanly (finding 3): passkeys off (the default). 200
// passkey_offer posts, 50 at a time, from a password-only session on the consent page and from a
// session on the second-factor page, each get a clean refusal (no dropped connection, no 5xx),
// and nothing stored changes.
func TestSCA_PasskeyOfferWithPasskeysOffAnswersCleanly(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		e.enrolApp(t, username, password)
		uid := e.uidOf(t, username)
		onConsentPage := e.signInAs(t, username, password, url.Values{"scope": {"openid email"}})
		if !onConsent(onConsentPage) {
			t.Fatalf("precondition: the consent page, got: %.300s", onConsentPage.last)
		}
		onStep := e.signInAs(t, username, password, transfersScope)
		if !strings.Contains(onStep.last, `value="mfa_totp"`) {
			t.Fatalf("precondition: the second-factor page, got: %.300s", onStep.last)
		}
		before := e.factorsOf(t, uid)
		writes := e.writes.count()

		const total, racing = 200, 50
		answers := make([]answer, total)
		sem := make(chan struct{}, racing)
		var wg sync.WaitGroup
		for i := range total {
			b := onConsentPage
			if i%2 == 1 {
				b = onStep
			}
			v := url.Values{}
			for k := range b.form {
				v.Set(k, b.form.Get(k))
			}
			v.Set("action", "passkey_offer")
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				answers[i] = post(e, b, v)
			})
		}
		wg.Wait()
		dropped, failed, accepted := 0, 0, 0
		for _, a := range answers {
			switch {
			case a.err != nil:
				dropped++
			case a.status >= 500:
				failed++
			case !refused(a.status, a.page):
				accepted++
			}
		}
		if dropped+failed+accepted != 0 {
			t.Errorf("of %d passkey_offer posts with passkeys off: %d dropped connections (a panic), %d 5xx, %d not refused", total, dropped, failed, accepted)
		}
		if n := e.writes.count() - writes; n != 0 {
			t.Errorf("refused passkey_offer posts wrote %d times: %v", n, e.writes.list()[writes:])
		}
		e.wantFactorsUnchanged(t, "the user", uid, before)
	})
}

// TestSCA_StaleSetUpPageNeverReplacesAFactor (finding 8): a set-up page opened with the password
// alone before the customer enrolled an app elsewhere is refused afterwards: the app and the
// recovery codes enrolled first stay, no recovery codes are shown, no code is issued.
func TestSCA_StaleSetUpPageNeverReplacesAFactor(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		uid := e.uidOf(t, username)
		stale := e.signInAs(t, username, password, transfersScope)
		m := totpSecretRe.FindStringSubmatch(stale.last)
		if m == nil {
			t.Fatalf("precondition: the set-up page, got: %.400s", stale.last)
		}
		staleKey := strings.ReplaceAll(m[1], " ", "")
		form := stale.form

		secret, recovery := e.enrolApp(t, username, password) // elsewhere
		enrolled := e.factorsOf(t, uid)
		codesBefore := e.codesIssued()

		resp := e.postOn(stale, form, url.Values{"action": {"totp_enroll"}, "code": {e.totpCode(t, staleKey, 0)}})
		if !refused(resp.StatusCode, stale.last) {
			t.Errorf("the stale set-up page's enrolment: %d, not refused", resp.StatusCode)
		}
		if showsRecoveryCodes(stale.last) {
			t.Errorf("new recovery codes shown on the stale set-up page")
		}
		e.tryAllow(t, stale, form, "the stale set-up page")
		if n := e.codesIssued() - codesBefore; n != 0 {
			t.Errorf("%d codes issued", n)
		}
		e.wantFactorsUnchanged(t, "the customer", uid, enrolled)
		e.wantAppStillWorks(t, username, password, uid, secret, recovery[0])
	})
}

// TestSCA_StrongSignInsFromOneAddressDoNotLockItOut (finding 9): with the default limits (5
// failures, 15 minutes), 30 complete strong sign-ins (password and a fresh app code, then
// consent) from one address within one window all succeed: a successful second step is not a
// failure of the address.
func TestSCA_StrongSignInsFromOneAddressDoNotLockItOut(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		secret, _ := e.enrolApp(t, username, password)
		uid := e.uidOf(t, username)
		// Start at the beginning of an address window, so all 30 fall in one (the clock moves by
		// 30 s for every other code, about 8 minutes in all).
		w := e.app.Authn.LoginPolicy.Window
		if w != 15*time.Minute || e.app.Authn.LoginPolicy.MaxFailures != 5 {
			t.Fatalf("precondition: default limits, got %d in %v", e.app.Authn.LoginPolicy.MaxFailures, w)
		}
		e.clock.Advance(w - time.Duration(e.clock.Now().UnixNano()%int64(w)) + time.Second)
		start := e.clock.Now()
		const n = 30
		for i := range n {
			b := e.signInAs(t, username, password, transfersScope)
			if !strings.Contains(b.last, `value="mfa_totp"`) {
				t.Fatalf("strong sign-in %d of %d from one address: the password was refused", i+1, n)
			}
			b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"mfa_totp"}, "code": {e.totpCode(t, secret, e.storeTOTP(t, uid).LastStep)}})
			if !onConsent(b) {
				t.Fatalf("strong sign-in %d of %d from one address: the app code was refused", i+1, n)
			}
			codeOf(t, b.decide(e, "allow"))
		}
		if d := e.clock.Now().Sub(start); d >= w {
			t.Fatalf("the sign-ins took %v of the clock, more than one window", d)
		}
	})
}

// TestAudit_EverySignInLineNamesTheClient (finding 9): every audit line of a sign-in (login_*,
// factor_*: set-up, a wrong code, a right one, a recovery code) carries the client it is for.
func TestAudit_EverySignInLineNamesTheClient(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		secret, recovery := e.enrolApp(t, username, password)
		uid := e.uidOf(t, username)
		b := e.signInAs(t, username, password, transfersScope)
		b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"mfa_totp"}, "code": {"000000"}})
		b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"mfa_totp"}, "code": {e.totpCode(t, secret, e.storeTOTP(t, uid).LastStep)}})
		b = e.signInAs(t, username, password, transfersScope)
		b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"mfa_recovery"}, "code": {recovery[0]}})
		e.loginAttempt(t, newBrowser(t), username, "not-the-password")

		seen := map[string]bool{}
		for _, line := range strings.Split(e.logs.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) != nil || m["log"] != "audit" {
				continue
			}
			ev, _ := m["event"].(string)
			if !strings.HasPrefix(ev, "login_") && !strings.HasPrefix(ev, "factor_") {
				continue
			}
			seen[ev] = true
			if m["client_id"] != clientID {
				t.Errorf("audit %s (reason %v) with client_id %q, want %q", ev, m["reason"], m["client_id"], clientID)
			}
		}
		for _, ev := range []string{"login_succeeded", "login_failed", "factor_enrolled", "factor_failed", "factor_succeeded"} {
			if !seen[ev] {
				t.Errorf("no audit line %s: %v", ev, seen)
			}
		}
	})
}

// switchTo posts B's password on A's request (refused: the request is bound to A), then
// switches account there, as the pages allow, and signs B in on the new request that starts: it
// returns B's form.
func (e *env) switchTo(t *testing.T, b *browser, formA url.Values, user, pass string) url.Values {
	t.Helper()
	if resp := e.postOn(b, formA, url.Values{"action": {"login"}, "username": {user}, "password": {pass}}); resp.StatusCode < 400 || resp.StatusCode >= 500 {
		t.Errorf("B's password posted on A's request: %d, want a 4xx", resp.StatusCode)
	}
	e.postOn(b, formA, url.Values{"action": {"consent"}, "decision": {"switch"}})
	if !strings.Contains(b.last, `type="password"`) || b.form.Get("request_id") == formA.Get("request_id") {
		t.Fatalf("switch: want the login page of a new request, got: %.300s", b.last)
	}
	b.login(e, user, pass)
	return b.form
}

// TestSignIn_NothingOfOneUserCarriesOverToAnotherOnTheSameRequest: passkeys on. User A signs in
// with the password on a pending request R, then B's credentials are posted on R (refused: R is
// bound to A) and B signs in after switching account in the same browser: nothing of A's state
// (the key of A's set-up page, A's WebAuthn ceremony, A's passed step) serves B, on B's request
// or on A's. A stranger posting any action on R (another browser without cookies, another
// browser with its own session, or A's browser with another CSRF token) is refused and changes
// nothing stored.
func TestSignIn_NothingOfOneUserCarriesOverToAnotherOnTheSameRequest(t *testing.T) {
	bothStores(t, map[string]string{config.EnvPasskeyRPID: "localhost"}, func(t *testing.T, e *env) {
		secret, _ := e.enrolApp(t, username, password)
		uid := e.uidOf(t, username)

		t.Run("the key of A's set-up page", func(t *testing.T) {
			// A and B both have no factor: B must not be shown, nor enrol, A's key.
			a, bu := e.newUser(t, "key-a"), e.newUser(t, "key-b")
			b := e.signInAs(t, a.name, a.pass, transfersScope)
			m := totpSecretRe.FindStringSubmatch(b.last)
			if m == nil {
				t.Fatalf("precondition: A's set-up page, got: %.300s", b.last)
			}
			keyA := strings.ReplaceAll(m[1], " ", "")
			formA := b.form
			formB := e.switchTo(t, b, formA, bu.name, bu.pass)
			if m := totpSecretRe.FindStringSubmatch(b.last); m == nil || strings.ReplaceAll(m[1], " ", "") == keyA {
				t.Errorf("B's set-up page shows A's key, or no key: %.300s", b.last)
			}
			for what, form := range map[string]url.Values{"B's request": formB, "A's request": formA} {
				resp := e.postOn(b, form, url.Values{"action": {"totp_enroll"}, "code": {e.totpCode(t, keyA, 0)}})
				if !refused(resp.StatusCode, b.last) {
					t.Errorf("a code of A's key on %s after B signed in: %d, not refused", what, resp.StatusCode)
				}
			}
			if got := e.storeTOTP(t, bu.uid).Secret; got == keyA {
				t.Errorf("B's stored authenticator is the key A was shown")
			}
		})

		t.Run("A's passkey ceremony", func(t *testing.T) {
			// A (no factor) is shown the set-up page with a passkey registration for A; B (the
			// victim: an app, no passkey) signs in in the same browser; the ceremony made for A
			// registers nothing for B.
			before := e.factorsOf(t, uid)
			a := e.newUser(t, "ceremony-a")
			b := e.signInAs(t, a.name, a.pass, transfersScope)
			formA := b.form
			if !registrationOffered(b.last) {
				t.Fatalf("precondition: A's passkey registration, got: %.300s", b.last)
			}
			keyOfA := newAuthenticator(t, "localhost", e.srv.URL)
			cred := keyOfA.create(t, b.last)
			formB := e.switchTo(t, b, formA, username, password)
			for what, form := range map[string]url.Values{"B's request": formB, "A's request": formA} {
				resp := e.postOn(b, form, url.Values{"action": {"passkey_register"}, "credential": {cred}})
				if !refused(resp.StatusCode, b.last) {
					t.Errorf("A's passkey ceremony answered on %s after B signed in: %d, not refused", what, resp.StatusCode)
				}
				e.tryAllow(t, b, form, "B's password and A's passkey ceremony on "+what)
			}
			e.wantFactorsUnchanged(t, "B", uid, before)
		})

		t.Run("A's passed step", func(t *testing.T) {
			// A passes the step (an app set up); B's (the victim's) password in the same browser
			// is not strong, on B's request or on A's.
			a := e.newUser(t, "step-a")
			b := e.signInAs(t, a.name, a.pass, transfersScope)
			b.secondStep(e)
			if !onConsent(b) {
				t.Fatalf("precondition: A strong on the consent page, got: %.300s", b.last)
			}
			formA := b.form
			codes := e.codesIssued()
			formB := e.switchTo(t, b, formA, username, password)
			e.tryAllow(t, b, formB, "B's password after A's step, on B's request")
			e.tryAllow(t, b, formA, "B's password after A's step, on A's request")
			if n := e.codesIssued() - codes; n != 0 {
				t.Errorf("%d codes issued to B's password after A's step", n)
			}
		})

		t.Run("a stranger", func(t *testing.T) {
			a, str := e.newUser(t, "stranger-a"), e.newUser(t, "stranger")
			b := e.signInAs(t, a.name, a.pass, transfersScope)
			form := b.form
			before, beforeA := e.factorsOf(t, uid), e.factorsOf(t, a.uid)
			own := e.signInAs(t, str.name, str.pass, url.Values{"scope": {"openid email"}}) // its own session and browser id
			other := url.Values{}
			for k := range form {
				other.Set(k, form.Get(k))
			}
			other.Set("csrf_token", oauth.NewSecret(oauth.PrefixCSRF))
			strangers := []struct {
				name string
				b    *browser
				form url.Values
			}{{"another browser without cookies", newBrowser(t), form}, {"another browser signed in", own, form}, {"another CSRF token", b, other}}
			code := e.totpCode(t, secret, e.storeTOTP(t, uid).LastStep)
			actions := []url.Values{
				{"action": {"login"}, "username": {username}, "password": {password}},
				{"action": {"totp_enroll"}, "code": {code}},
				{"action": {"mfa_totp"}, "code": {code}},
				{"action": {"mfa_recovery"}, "code": {"aaaa-bbbb-cccc-dddd"}},
				{"action": {"mfa_passkey"}, "credential": {"{}"}},
				{"action": {"passkey_register"}, "credential": {"{}"}},
				{"action": {"passkey_login"}, "credential": {"{}"}},
				{"action": {"passkey_offer"}},
				{"action": {"continue"}},
				{"action": {"consent"}, "decision": {"allow"}},
			}
			for _, s := range strangers {
				for _, a := range actions {
					writes := e.writes.count()
					resp := e.postOn(s.b, s.form, a)
					if resp.StatusCode < 400 || resp.StatusCode >= 500 {
						t.Errorf("%s posting %s on the request: %d, want a 4xx", s.name, a.Get("action"), resp.StatusCode)
					}
					if n := e.writes.count() - writes; n != 0 {
						t.Errorf("%s posting %s on the request wrote %v", s.name, a.Get("action"), e.writes.list()[writes:])
					}
				}
			}
			e.wantFactorsUnchanged(t, "the victim", uid, before)
			e.wantFactorsUnchanged(t, "A", a.uid, beforeA)
			// A's own form still works: the strangers changed nothing of the request.
			if e.postOn(b, form, url.Values{"action": {"totp_enroll"}, "code": {"000000"}}); !strings.Contains(b.last, `value="totp_enroll"`) {
				t.Errorf("A's request after the strangers: %.300s", b.last)
			}
		})
	})
}
