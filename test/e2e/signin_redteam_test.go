package e2e

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
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
			resp, err := b.client.PostForm(e.url(httpapi.PathAuthorize), v)
			if err != nil {
				out[i].err = err
				return
			}
			defer resp.Body.Close()
			page := new(strings.Builder)
			_, out[i].err = io.Copy(page, resp.Body)
			out[i].status, out[i].location, out[i].page = resp.StatusCode, resp.Header.Get("Location"), page.String()
		})
	}
	close(gate)
	wg.Wait()
	return out
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
				const rounds, offers = 10, 49
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
					resp := e.postOn(b, form, url.Values{"action": {"consent"}, "decision": {"allow"}})
					if resp.StatusCode == http.StatusSeeOther {
						loc, _ := url.Parse(resp.Header.Get("Location"))
						if loc.Query().Get("code") != "" {
							t.Errorf("round %d: the request decided once (%s) was allowed again: code issued", round, decision)
						}
					}
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
			sess, _, err := e.app.Service.SessionUser(context.Background(), sid)
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
