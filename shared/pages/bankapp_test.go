package pages

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/oauth"
)

var (
	bindingRe    = regexp.MustCompile(`(?s)<p class="binding-code">(.*?)</p>`)
	bankScriptRe = regexp.MustCompile(`<script src="[^"]*passkey\.js" defer></script>`)
)

// TestBankApp_HostileBindingMessageIsShownAsTextInEveryStepAndLanguage: the bank app page with
// hostile values wherever a client or a request reaches it (the binding message, the client's
// name, the reference, the user's name, the CSRF token and attempt): html/template's escaping
// leaves no markup, attribute or script of theirs, and the binding message reads exactly as
// given, once per request shown.
func TestBankApp_HostileBindingMessageIsShownAsTextInEveryStepAndLanguage(t *testing.T) {
	p := newPages(t)
	tags, attrs := markup(t)
	details := json.RawMessage(`[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"10.00"},"creditorName":"<b>Mule</b>","creditorAccount":{"iban":"DE02100100109307118603"}}]`)
	n := 0
	for _, lang := range escapingLangs {
		for i := range hostile {
			h := func(k int) string { return hostile[(i+k)%len(hostile)] }
			req := BankRequest{Ref: h(1), ClientName: h(2), BindingMessage: h(0), Scopes: oauth.Scopes{"openid", h(3)}, Details: details}
			for _, a := range []BankApp{
				{Step: BankAppSignedOut, LoginFailed: true, Form: Form{Action: h(4), CSRF: h(5)}},
				{Step: BankAppList, UserName: h(6), Pending: []BankRequest{req, req}, Form: Form{Action: h(4), CSRF: h(5)}},
				{Step: BankAppDone, UserName: h(6), Current: &req, Pending: []BankRequest{req}, Approved: true, Form: Form{Action: h(4), CSRF: h(5)}},
				{Step: BankAppApproving, UserName: h(6), Current: &req, TOTP: true, Failed: true,
					Form: Form{Action: h(4), CSRF: h(5), RequestID: h(7), Passkey: &PasskeyView{Mode: "get", Options: h(8), Action: "approve_passkey", Label: "bankapp.passkey", Primary: true}}},
			} {
				var b bytes.Buffer
				if err := p.BankApp(&b, lang, a); err != nil {
					t.Fatal(err)
				}
				page := b.String()
				if a.Form.Passkey != nil {
					if !bankScriptRe.MatchString(page) {
						t.Fatal("the approving page does not load passkey.js")
					}
					page = bankScriptRe.ReplaceAllString(page, "")
				}
				escaped(t, page, tags, attrs, req.BindingMessage, req.ClientName, req.Ref, a.UserName, a.Form.CSRF, a.Form.RequestID, "<b>Mule</b>")
				want := 0
				switch a.Step {
				case BankAppList, BankAppDone:
					want = len(a.Pending)
				case BankAppApproving:
					want = 1
				}
				if req.BindingMessage == "" {
					want = 0
				}
				got := texts(page, bindingRe)
				if len(got) != want {
					t.Fatalf("%s: the binding message is shown %d times, want %d", a.Step, len(got), want)
				}
				for _, g := range got {
					if g != shown(req.BindingMessage) {
						t.Fatalf("%s: binding message reads %q, want %q", a.Step, g, req.BindingMessage)
					}
				}
				n++
			}
		}
	}
	t.Logf("%d bank app pages checked", n)
}

// TestBankApp_ShowsTheBindingMessageTheClientAndThePayment: the list shows each request's
// client, its binding message with the advice to compare it, and a payment's amount and payee.
func TestBankApp_ShowsTheBindingMessageTheClientAndThePayment(t *testing.T) {
	p := newPages(t)
	details := json.RawMessage(`[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"123.45"},"creditorName":"Merchant A","creditorAccount":{"iban":"DE02100100109307118603"}}]`)
	for _, lang := range Locales {
		m := Messages(lang)
		var b bytes.Buffer
		err := p.BankApp(&b, lang, BankApp{Step: BankAppList, UserName: "Alice", Form: Form{Action: "/bank-app", CSRF: "t"},
			Pending: []BankRequest{{Ref: "bc_1", ClientName: "Budget App", BindingMessage: "K7-42", Scopes: oauth.Scopes{"openid"}, Details: details}}})
		if err != nil {
			t.Fatal(err)
		}
		page := b.String()
		for _, want := range []string{"Budget App", "K7-42", m["bankapp.binding.hint"], "Merchant A", "123", m["bankapp.approve"], m["bankapp.deny"]} {
			if !strings.Contains(page, escapeText(want)) {
				t.Errorf("%s: the list does not show %q", lang, want)
			}
		}
	}
}

// escapeText is how html/template writes s in text.
func escapeText(s string) string {
	return strings.NewReplacer("'", "&#39;", `"`, "&#34;", "&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
