package pages

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/oauth/rar"
)

// Each case names the rule it proves; removing that rule from formatAmount fails it.
func TestFormatAmount_WritesTheDecimalStringAsTheLanguageWritesMoney(t *testing.T) {
	cases := []struct {
		rule, lang, amount, currency, want string
	}{
		{"en: symbol before, comma groups, point decimals", "en", "1234.56", "EUR", "€1,234.56"},
		{"fr: symbol after, space groups, comma decimals", "fr", "1234.56", "EUR", "1\u00a0234,56\u00a0€"},
		{"decimals padded to the currency's minor unit", "en", "1234.5", "EUR", "€1,234.50"},
		{"a whole amount gets the minor unit", "fr", "12", "EUR", "12,00\u00a0€"},
		{"more decimals than the minor unit are shown, never rounded", "en", "0.005", "EUR", "€0.005"},
		{"a currency without minor unit has no decimals", "en", "1234", "JPY", "¥1,234"},
		{"the currency's own symbol", "en", "10.00", "GBP", "£10.00"},
		{"a lettered symbol before the number is spaced", "en", "12", "CHF", "CHF\u00a012.00"},
		{"an unknown code is shown as the code", "en", "12.5", "XQZ", "XQZ\u00a012.5"},
		{"large amounts beyond a float's exact range stay exact", "en", "999999999999999.999", "EUR", "€999,999,999,999,999.999"},
		{"an unknown language is English", "de", "1234.56", "EUR", "€1,234.56"},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			got, err := formatAmount(c.lang, c.amount, c.currency)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("formatAmount(%q, %q, %q) = %q, want %q", c.lang, c.amount, c.currency, got, c.want)
			}
		})
	}
}

func TestFormatAmount_RefusesWhatIsNotADecimalString(t *testing.T) {
	for _, amount := range []string{"", ".5", "1e3", "-1", "1.2.3", "1,5", "12345678901234567890"} {
		if got, err := formatAmount("en", amount, "EUR"); err == nil {
			t.Errorf("formatAmount(%q) = %q, want an error", amount, got)
		}
	}
}

func TestMaskAccount_ShowsOnlyWhatIdentifiesTheAccountToItsOwner(t *testing.T) {
	en, fr := Messages("en"), Messages("fr")
	cases := []struct {
		rule string
		m    map[string]string
		acc  accountRef
		want string
	}{
		{"IBAN: country code, check digits and last 4", en, accountRef{IBAN: "FR7630006000011234567890189"}, "FR76 •••• •••• 0189"},
		{"BBAN: named, last 4", en, accountRef{BBAN: "30006000011234567890189"}, "Account number •••• 0189"},
		{"BBAN in French", fr, accountRef{BBAN: "30006000011234567890189"}, "Numéro de compte •••• 0189"},
		{"another scheme: its name, last 4", en, accountRef{SchemeName: "UK.OBIE.SortCodeAccountNumber", Identification: "08080021325698"}, "UK.OBIE.SortCodeAccountNumber account •••• 5698"},
		{"an identification of 4 characters or fewer is hidden whole", en, accountRef{SchemeName: "X", Identification: "1234"}, "X account ••••"},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			if got := maskAccount(c.m, c.acc); got != c.want {
				t.Errorf("maskAccount(%+v) = %q, want %q", c.acc, got, c.want)
			}
		})
	}
}

func TestFormatDate_InWordsOfTheLanguage(t *testing.T) {
	cases := []struct{ lang, date, want string }{
		{"en", "2027-01-02", "January 2, 2027"},
		{"fr", "2027-01-02", "2 janvier 2027"},
		{"fr", "2026-08-31", "31 août 2026"},
	}
	for _, c := range cases {
		got, err := formatDate(Messages(c.lang), c.date)
		if err != nil || got != c.want {
			t.Errorf("formatDate(%s, %q) = %q, %v; want %q", c.lang, c.date, got, err, c.want)
		}
	}
	if got, err := formatDate(Messages("en"), "2027-13-01"); err == nil {
		t.Errorf("formatDate of a bad date = %q, want an error", got)
	}
}

// consentDetails are a payment (whose payee's name holds markup) and an account-information
// detail, validated by the shipped schemas as a request's would be.
func consentDetails(t *testing.T, creditorName string) json.RawMessage {
	t.Helper()
	name, _ := json.Marshal(creditorName)
	raw := `[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"1234.5"},` +
		`"creditorName":` + string(name) + `,"creditorAccount":{"iban":"DE89370400440532013000"},` +
		`"remittanceInformationUnstructured":"Invoice 2026-117","requestedExecutionDate":"2027-03-15"},` +
		`{"type":"account_information","permissions":["balances","transactions"],` +
		`"accounts":[{"iban":"FR7630006000011234567890189"},{"bban":"12345678"}],"expirationDate":"2027-02-28"},` +
		`{"type":"account_information","permissions":["details"]}]`
	reg, err := rar.Shipped()
	if err != nil {
		t.Fatal(err)
	}
	details, err := reg.Validate(raw, []string{rar.TypePaymentInitiation, rar.TypeAccountInformation})
	if err != nil {
		t.Fatal(err)
	}
	return details
}

func TestConsent_ShowsEachAuthorizationDetailInPlainWords(t *testing.T) {
	p := newPages(t)
	want := map[string][]string{
		"en": {
			"Payment to authorize", "€1,234.50", "Evil &lt;b&gt;Corp&lt;/b&gt; &amp; Co", "DE89 •••• •••• 3000",
			"Invoice 2026-117", "March 15, 2027",
			"Access to your account information", "Balances", "Transactions", "FR76 •••• •••• 0189",
			"Account number •••• 5678", "February 28, 2027", "All your accounts", "Account details",
		},
		"fr": {
			"Paiement à autoriser", "1\u00a0234,50\u00a0€", "Evil &lt;b&gt;Corp&lt;/b&gt; &amp; Co", "DE89 •••• •••• 3000",
			"Invoice 2026-117", "15 mars 2027",
			"Accès aux informations de vos comptes", "Soldes", "Opérations", "FR76 •••• •••• 0189",
			"Numéro de compte •••• 5678", "28 février 2027", "Tous vos comptes", "Informations sur les comptes",
		},
	}
	for _, lang := range Locales {
		t.Run(lang, func(t *testing.T) {
			m := Messages(lang)
			var b bytes.Buffer
			err := p.Consent(&b, lang, testForm(), "Alice Martin", oauth.Scopes{"openid"}, consentDetails(t, "Evil <b>Corp</b> & Co"))
			if err != nil {
				t.Fatal(err)
			}
			html := b.String()
			checkPage(t, lang, html)
			for _, w := range append(want[lang],
				htmlText(m["detail.amount"]), htmlText(m["detail.payee"]), htmlText(m["detail.payee.account"]),
				htmlText(m["detail.reference"]), htmlText(m["detail.date"]), htmlText(m["detail.perms"]),
				htmlText(m["detail.accounts"]), htmlText(m["detail.expiry"])) {
				if !strings.Contains(html, w) {
					t.Errorf("consent page lacks %q", w)
				}
			}
			if strings.Contains(html, "<b>Corp") {
				t.Error("markup in the payee's name reached the page as markup")
			}
			for _, full := range []string{"DE89370400440532013000", "FR7630006000011234567890189", "12345678"} {
				if strings.Contains(html, full) {
					t.Errorf("the account %s is shown unmasked", full)
				}
			}
			if n := strings.Count(html, "<h2>"); n != 3 {
				t.Errorf("%d detail headings, want one per detail (3)", n)
			}
			if n := strings.Count(html, "<dt>"); n != 5+3+2 {
				t.Errorf("%d labelled rows, want 10 (payment 5, accounts 3, accounts without expiry 2)", n)
			}
			if n := strings.Count(html, htmlText(m["consent.money"])); n != 1 {
				t.Errorf("money warning shown %d times, want once (the payment)", n)
			}
		})
	}
}

func TestConsent_WithoutDetailsShowsNoDetailSection(t *testing.T) {
	p := newPages(t)
	var b bytes.Buffer
	if err := p.Consent(&b, "en", testForm(), "Alice", oauth.Scopes{"openid"}, nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), `class="detail`) {
		t.Error("a detail section is shown for a request without authorization_details")
	}
}

func TestConsent_UnreadableDetailsAreAnErrorNotAPanic(t *testing.T) {
	p := newPages(t)
	for _, raw := range []string{`{`, `[1]`, `[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"x"}}]`,
		`[{"type":"account_information","expirationDate":"soon"}]`} {
		var b bytes.Buffer
		if err := p.Consent(&b, "en", testForm(), "Alice", oauth.Scopes{"openid"}, json.RawMessage(raw)); err == nil {
			t.Errorf("Consent with details %s rendered, want an error", raw)
		}
	}
}

func TestDetailViews_ShowOnlyWhatWasSentAndNameAnUnknownType(t *testing.T) {
	m := Messages("en")
	cases := []struct {
		rule, raw   string
		heading     string
		labels      []string
		firstValues []string
	}{
		{"a payment without reference or date has neither row",
			`[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"5"},"creditorName":"A","creditorAccount":{"bban":"123456"}}]`,
			m["detail.payment.heading"], []string{m["detail.amount"], m["detail.payee"], m["detail.payee.account"]},
			[]string{"€5.00", "A", "Account number •••• 3456"}},
		{"account information without accounts is every account, without a date no end row",
			`[{"type":"account_information","permissions":["standing_orders"]}]`,
			m["detail.accounts.heading"], []string{m["detail.perms"], m["detail.accounts"]},
			[]string{m["detail.perm.standing_orders"], m["detail.accounts.all"]}},
		{"a type of the deployment's own is named",
			`[{"type":"card_limits"}]`, "Other access: card_limits", nil, nil},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			views, err := detailViews("en", json.RawMessage(c.raw))
			if err != nil {
				t.Fatal(err)
			}
			if len(views) != 1 || views[0].Heading != c.heading {
				t.Fatalf("views = %+v, want one headed %q", views, c.heading)
			}
			var labels, values []string
			for _, r := range views[0].Rows {
				first := "<no value>"
				if len(r.Values) > 0 {
					first = r.Values[0]
				}
				labels, values = append(labels, r.Label), append(values, first)
			}
			if !slices.Equal(labels, c.labels) || !slices.Equal(values, c.firstValues) {
				t.Errorf("rows %q = %q, want %q = %q", labels, values, c.labels, c.firstValues)
			}
		})
	}
}
