package pages

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

const testPayment = `[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"12.50"},"creditorName":"Merchant A","creditorAccount":{"iban":"DE02100100109307118603"}}]`

// TestPayment_ShowsTheDetailsAndOnlyAConfirmationBoundToThem: the payment page shows the
// payment and confirms it with the passkey (its form, the primary action) or a TOTP code when
// offered; it has no allow button, and a way out (deny) in every state.
func TestPayment_ShowsTheDetailsAndOnlyAConfirmationBoundToThem(t *testing.T) {
	p := newPages(t)
	for _, lang := range Locales {
		m := Messages(lang)
		for name, c := range map[string]struct {
			passkey bool
			st      PaymentState
			want    []string
			not     []string
		}{
			"passkey": {passkey: true, want: []string{`data-passkey="get"`, `value="payment_passkey"`, htmlText(m["payment.passkey"])},
				not: []string{`value="payment_totp"`, htmlText(m["payment.nofactor"])}},
			"totp": {st: PaymentState{TOTP: true}, want: []string{`value="payment_totp"`, `autocomplete="one-time-code"`, htmlText(m["payment.totp.submit"])},
				not: []string{`data-passkey=`}},
			"no factor": {st: PaymentState{NoFactor: true}, want: []string{htmlText(m["payment.nofactor"])},
				not: []string{`data-passkey=`, `value="payment_totp"`}},
			"failed": {passkey: true, st: PaymentState{Failed: true}, want: []string{`role="alert"`, htmlText(m["payment.error"])}},
		} {
			t.Run(lang+"/"+name, func(t *testing.T) {
				f := testForm()
				if c.passkey {
					f.Passkey = &PasskeyView{Mode: "get", Options: `{"publicKey":{}}`, Action: "payment_passkey", Label: "payment.passkey", Primary: true}
				}
				var b bytes.Buffer
				if err := p.Payment(&b, lang, f, "Alice Martin", nil, json.RawMessage(testPayment), c.st); err != nil {
					t.Fatal(err)
				}
				html := b.String()
				checkPage(t, lang, html)
				for _, want := range append(c.want, "Merchant A", "12", `value="deny"`, htmlText(m["payment.cancel"])) {
					if !strings.Contains(html, want) {
						t.Errorf("payment page lacks %q", want)
					}
				}
				for _, not := range append(c.not, `value="allow"`) {
					if strings.Contains(html, not) {
						t.Errorf("payment page has %q", not)
					}
				}
			})
		}
	}
}
