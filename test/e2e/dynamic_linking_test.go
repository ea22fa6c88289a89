package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
)

// Dynamic linking (issue 29 item 3) end to end, on both stores: a payment pushed by the client
// is confirmed on its page with a passkey (the software authenticator, checked by go-webauthn
// as a browser's would be) whose challenge the server derived from the payment's details and a
// nonce; the grant keeps the signed assertion, and the code exchange checks it again.

// passkeysOn is what an env needs for the user to confirm payments with a passkey: the pages'
// relying party (the tests' server is 127.0.0.1, which cannot be one).
var passkeysOn = map[string]string{config.EnvPasskeyRPID: "localhost"}

// paymentPage reports whether a page is a payment's (the payment step).
func paymentPage(html string) bool {
	return strings.Contains(html, `value="payment_passkey"`) || strings.Contains(html, `value="payment_totp"`) ||
		strings.Contains(html, `id="payment-nofactor"`)
}

// pay confirms the payment page that is open with the user's passkey (e.payer), adding it
// first when the user has none, and returns the redirect's URL.
func (b *browser) pay(e *env) *url.URL {
	b.t.Helper()
	if e.payer == nil {
		e.payer = newAuthenticator(b.t, "localhost", e.srv.URL)
	}
	if !strings.Contains(b.last, `value="payment_passkey"`) {
		if !strings.Contains(b.last, `value="passkey_offer"`) {
			b.t.Fatalf("a payment page with neither a passkey nor the offer to add one (passkeys on? env vars passkeysOn): %.4000s", b.last)
		}
		b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"passkey_offer"}})
		b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"passkey_register"}, "credential": {e.payer.create(b.t, b.last)}})
		if !strings.Contains(b.last, `value="payment_passkey"`) {
			b.t.Fatalf("after adding a passkey, no payment confirmation: %.400s", b.last)
		}
	}
	resp := b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"payment_passkey"}, "credential": {e.payer.get(b.t, b.last)}})
	if resp.StatusCode != http.StatusSeeOther {
		b.t.Fatalf("payment confirmation answered %d, want 303: %.300s", resp.StatusCode, b.last)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		b.t.Fatal(err)
	}
	return loc
}

// pushPayment pushes a payment of details with PKCE and returns its authorization URL and
// verifier.
func (e *env) pushPayment(t *testing.T, details string) (string, string) {
	t.Helper()
	pkce := oauth2.GenerateVerifier()
	p := pushedParams(oauth2.S256ChallengeFromVerifier(pkce))
	p.Set("scope", "openid")
	p.Set("authorization_details", details)
	st, body := e.push(t, p)
	uri, _ := body["request_uri"].(string)
	if st != http.StatusCreated || uri == "" {
		t.Fatalf("push: %d %v", st, body)
	}
	return e.parURL(uri), pkce
}

// TestDynamicLinking_PaymentConfirmedWithAPasskeyOverItsDetails: the payment page carries a
// passkey challenge that is SHA-256("payment-link" || SHA-256(details) || nonce) of the pushed
// details; the confirmed grant's token response carries the details, the stored grant keeps the
// assertion, and its evidence checks against the details. The page has no allow button, and
// posting allow there is refused (nothing issued).
func TestDynamicLinking_PaymentConfirmedWithAPasskeyOverItsDetails(t *testing.T) {
	bothStores(t, passkeysOn, func(t *testing.T, e *env) {
		details := "[" + rarPayment + "]"
		authURL, pkce := e.pushPayment(t, details)
		b := newBrowser(t)
		b.open(authURL)
		b.login(e, username, password)
		if !paymentPage(b.last) || strings.Contains(b.last, `value="allow"`) {
			t.Fatalf("expected the payment page, without allow: %.400s", b.last)
		}
		// allow, posted by hand on the payment page: refused, no code.
		resp := b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"consent"}, "decision": {"allow"}})
		if resp.StatusCode == http.StatusSeeOther {
			t.Fatalf("allow on a payment page redirected to %s", resp.Header.Get("Location"))
		}
		b = newBrowser(t)
		b.open(authURL)
		b.login(e, username, password)
		code := codeOf(t, b.pay(e))
		st, tok := e.exchange(t, code, url.Values{"code_verifier": {pkce}})
		if st != http.StatusOK || !sameJSON(t, tok["authorization_details"], details) {
			t.Fatalf("exchange: %d %v", st, tok)
		}
		at, err := e.app.Store.GetToken(context.Background(), oauth.HashToken(tok["access_token"].(string)), e.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		rec, err := e.app.Store.GetGrant(context.Background(), at.Grant.ID, e.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		ev := rec.Grant.PaymentEvidence
		if ev == nil || ev.Factor != oauth.PaymentFactorPasskey || string(ev.CredentialID) != string(e.payer.CredID) {
			t.Fatalf("the grant's evidence: %+v", ev)
		}
		if err := ev.Check(rec.Grant.AuthorizationDetails); err != nil {
			t.Fatalf("the stored evidence does not check: %v", err)
		}
		if n := len(ev.CredentialID) + len(ev.AuthenticatorData) + len(ev.ClientDataJSON) + len(ev.Signature) + len(ev.PublicKey) + len(ev.Nonce) + len(ev.DetailsHash); n >= 1024 {
			t.Errorf("an ES256 passkey's evidence of %d bytes, want under 1 KB (SECURITY.md)", n)
		} else {
			t.Logf("an ES256 passkey's evidence: %d bytes", n)
		}
		if at.Grant.PaymentEvidence != nil {
			t.Error("the access token's copy of the grant carries the evidence")
		}
		var cd struct{ Challenge string }
		_ = json.Unmarshal(ev.ClientDataJSON, &cd)
		if want := b64u.EncodeToString(oauth.PaymentChallenge(rec.Grant.AuthorizationDetails, ev.Nonce)); cd.Challenge != want {
			t.Fatalf("the signed challenge %q, want the payment's %q", cd.Challenge, want)
		}
	})
}

// TestDynamicLinking_ChangedAmountAfterTheStrongStepIsRefused: the customer confirms 123.50
// EUR with their passkey. (1) That assertion posted on the page of another pending payment
// (999.00 EUR to another payee) gets no code and writes nothing. (2) A code whose grant's
// amount is changed after the confirmation (the stored code rewritten, as a tampering of the
// store would) is refused at the exchange, invalid_grant, and nothing is issued.
func TestDynamicLinking_ChangedAmountAfterTheStrongStepIsRefused(t *testing.T) {
	bothStores(t, passkeysOn, func(t *testing.T, e *env) {
		details := "[" + rarPayment + "]"
		bigger := "[" + strings.Replace(strings.Replace(rarPayment, `"123.50"`, `"999.00"`, 1), "Merchant A", "Mule B", 1) + "]"
		// The user's passkey, added on a first payment.
		first, _ := e.pushPayment(t, details)
		codeOf(t, e.authorize(t, first))

		// (1) One browser, two payment pages; the assertion over the small one is posted on
		// the big one.
		small, pkce := e.pushPayment(t, details)
		big, _ := e.pushPayment(t, bigger)
		b := newBrowser(t)
		b.open(small)
		b.login(e, username, password)
		smallForm, cred := b.form, e.payer.get(t, b.last)
		b.open(big)
		if !strings.Contains(b.last, `value="payment_passkey"`) {
			t.Fatalf("the second payment's page: %.400s", b.last)
		}
		before := e.writes.count()
		resp := b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"payment_passkey"}, "credential": {cred}})
		if resp.StatusCode == http.StatusSeeOther {
			t.Fatalf("the 123.50 assertion confirmed the 999.00 payment: %s", resp.Header.Get("Location"))
		}
		if n := e.writes.count(); n != before {
			t.Fatalf("the refused assertion wrote: %v", e.writes.list()[before:])
		}
		// It still confirms the payment it was made for.
		b.form = smallForm
		resp = b.submit(e.url(httpapi.PathAuthorize), url.Values{"action": {"payment_passkey"}, "credential": {cred}})
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("the assertion on its own page: %d %.300s", resp.StatusCode, b.last)
		}
		loc, _ := url.Parse(resp.Header.Get("Location"))
		code := codeOf(t, loc)

		// (2) The code's grant gets another amount after the confirmation.
		ctx := context.Background()
		c, err := e.app.Store.ConsumeCode(ctx, oauth.HashToken(code), clientID, e.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		c.Grant.AuthorizationDetails = json.RawMessage(compact(t, bigger))
		tampered := oauth.NewSecret(oauth.PrefixCode)
		c.Hash = oauth.HashToken(tampered)
		if err := e.app.Store.CreateCode(ctx, c); err != nil {
			t.Fatal(err)
		}
		items := e.itemCount(t)
		st, body := e.exchange(t, tampered, url.Values{"code_verifier": {pkce}})
		if st != http.StatusBadRequest || body["error"] != "invalid_grant" || body["access_token"] != nil {
			t.Fatalf("exchange of the changed payment: %d %v, want 400 invalid_grant", st, body)
		}
		if _, err := e.app.Store.GetGrant(ctx, c.Grant.ID, e.clock.Now()); err == nil {
			t.Fatal("the changed payment's grant was issued")
		}
		if n := e.itemCount(t); n > items {
			t.Fatalf("the refused exchange added %d items", n-items)
		}
	})
}

// compact is the JSON text s without insignificant space, as the pending request keeps it.
func compact(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
