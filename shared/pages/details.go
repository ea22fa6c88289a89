package pages

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/currency"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"golang.org/x/text/number"

	"github.com/acmebank/authserver/shared/oauth/rar"
)

// The consent page shows each authorization detail (RFC 9396) of the pending request in plain
// words: a heading and a description list of what is asked. The details were validated against
// their type's schema (package rar) when the request was made; this file only says them.

// DetailView is one authorization detail in plain words: a heading and its rows, each a label
// with one or more values (a description list's term and its descriptions).
type DetailView struct {
	Heading string
	// MovesMoney shows the warning that the detail moves money (a payment).
	MovesMoney bool
	Rows       []DetailRow
}

// DetailRow is one labelled line of a detail; a list (accounts, permissions) has a value each.
type DetailRow struct {
	Label  string
	Values []string
}

// accountRef is an account as the schemas name one: an IBAN, a BBAN, or another scheme's
// identification.
type accountRef struct {
	IBAN           string `json:"iban"`
	BBAN           string `json:"bban"`
	SchemeName     string `json:"schemeName"`
	Identification string `json:"identification"`
}

type paymentDetail struct {
	InstructedAmount struct {
		Currency string `json:"currency"`
		Amount   string `json:"amount"`
	} `json:"instructedAmount"`
	CreditorName      string     `json:"creditorName"`
	CreditorAccount   accountRef `json:"creditorAccount"`
	Remittance        string     `json:"remittanceInformationUnstructured"`
	RequestedExecDate string     `json:"requestedExecutionDate"`
}

type accountsDetail struct {
	Accounts       []accountRef `json:"accounts"`
	Permissions    []string     `json:"permissions"`
	ExpirationDate string       `json:"expirationDate"`
}

// detailViews says the authorization_details raw (validated, as kept on the pending request)
// in lang. A type the service does not ship is shown by its name, so nothing asked is hidden.
func detailViews(lang string, raw json.RawMessage) ([]DetailView, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("read authorization details: %w", err)
	}
	m := Messages(lang)
	views := make([]DetailView, 0, len(items))
	for i, item := range items {
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(item, &head); err != nil {
			return nil, fmt.Errorf("read authorization detail %d: %w", i, err)
		}
		var (
			v   DetailView
			err error
		)
		switch head.Type {
		case rar.TypePaymentInitiation:
			v, err = paymentView(lang, m, item)
		case rar.TypeAccountInformation:
			v, err = accountsView(lang, m, item)
		default:
			v = DetailView{Heading: fmt.Sprintf(m["detail.other.heading"], head.Type)}
		}
		if err != nil {
			return nil, fmt.Errorf("authorization detail %d (%s): %w", i, head.Type, err)
		}
		views = append(views, v)
	}
	return views, nil
}

func paymentView(lang string, m map[string]string, raw json.RawMessage) (DetailView, error) {
	var d paymentDetail
	if err := json.Unmarshal(raw, &d); err != nil {
		return DetailView{}, err
	}
	amount, err := formatAmount(lang, d.InstructedAmount.Amount, d.InstructedAmount.Currency)
	if err != nil {
		return DetailView{}, err
	}
	v := DetailView{Heading: m["detail.payment.heading"], MovesMoney: true, Rows: []DetailRow{
		{m["detail.amount"], []string{amount}},
		{m["detail.payee"], []string{d.CreditorName}},
		{m["detail.payee.account"], []string{maskAccount(m, d.CreditorAccount)}},
	}}
	if d.Remittance != "" {
		v.Rows = append(v.Rows, DetailRow{m["detail.reference"], []string{d.Remittance}})
	}
	if d.RequestedExecDate != "" {
		date, err := formatDate(m, d.RequestedExecDate)
		if err != nil {
			return DetailView{}, err
		}
		v.Rows = append(v.Rows, DetailRow{m["detail.date"], []string{date}})
	}
	return v, nil
}

func accountsView(lang string, m map[string]string, raw json.RawMessage) (DetailView, error) {
	var d accountsDetail
	if err := json.Unmarshal(raw, &d); err != nil {
		return DetailView{}, err
	}
	perms := make([]string, 0, len(d.Permissions))
	for _, p := range d.Permissions {
		w := m["detail.perm."+p]
		if w == "" { // the schema names the permissions; never show a blank line
			w = p
		}
		perms = append(perms, w)
	}
	accounts := []string{m["detail.accounts.all"]} // no accounts named: every account
	if len(d.Accounts) > 0 {
		accounts = accounts[:0]
		for _, a := range d.Accounts {
			accounts = append(accounts, maskAccount(m, a))
		}
	}
	v := DetailView{Heading: m["detail.accounts.heading"], Rows: []DetailRow{
		{m["detail.perms"], perms},
		{m["detail.accounts"], accounts},
	}}
	if d.ExpirationDate != "" {
		date, err := formatDate(m, d.ExpirationDate)
		if err != nil {
			return DetailView{}, err
		}
		v.Rows = append(v.Rows, DetailRow{m["detail.expiry"], []string{date}})
	}
	return v, nil
}

// tags are the languages of the pages as x/text knows them.
var tags = map[string]language.Tag{"en": language.English, "fr": language.French}

// FormatAmount writes amount, a decimal string as the payment_initiation schema has it
// ("1234.5"), in code's currency as lang writes money: "€1,234.50" in en, "1 234,50 €" in fr.
// It never goes through a float: the integer part is grouped by golang.org/x/text/number, the
// decimals are the string's own, padded to the currency's minor unit (never rounded, so an
// amount with more decimals than the currency's shows them all). The symbol is x/text's (CLDR),
// and where the symbol goes is the catalogue's detail.amount.format. An unknown currency code
// is shown as its code.
func formatAmount(lang, amount, code string) (string, error) {
	whole, frac, _ := strings.Cut(amount, ".")
	if whole == "" || !allDigits(whole) || !allDigits(frac) {
		return "", errors.New("amount is not a decimal string")
	}
	n, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return "", fmt.Errorf("amount: %w", err)
	}
	tag, ok := tags[lang]
	if !ok {
		lang, tag = Locales[0], tags[Locales[0]]
	}
	p := message.NewPrinter(tag)
	sym, scale := code, len(frac)
	if u, err := currency.ParseISO(code); err == nil {
		sym = p.Sprint(currency.Symbol(u))
		s, _ := currency.Standard.Rounding(u)
		scale = max(scale, s)
	}
	text := p.Sprint(number.Decimal(n))
	if scale > 0 {
		text += decimalSeparator(p) + frac + strings.Repeat("0", scale-len(frac))
	}
	format := Messages(lang)["detail.amount.format"]
	if r, _ := utf8.DecodeLastRuneInString(sym); unicode.IsLetter(r) && strings.HasPrefix(format, "%[2]s%[1]s") {
		sym += "\u00a0" // a code or lettered symbol before the number: "CHF 12.00", not "CHF12.00"
	}
	return fmt.Sprintf(format, text, sym), nil
}

// decimalSeparator is the decimal separator of p's language, as x/text writes a number with a
// fraction (a constant: the amount itself is never a float).
func decimalSeparator(p *message.Printer) string {
	s := p.Sprint(number.Decimal(1.5))
	return strings.TrimSuffix(strings.TrimPrefix(s, "1"), "5")
}

func allDigits(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }) < 0
}

// mask is what stands for the hidden characters of an account.
const mask = "••••"

// MaskAccount shows an account without revealing it: an IBAN as its country code and check
// digits and its last 4 characters ("FR76 •••• •••• 1234"); a BBAN or another scheme's
// identification as its last 4 characters with the scheme named; an identification of 4
// characters or fewer is hidden whole.
func maskAccount(m map[string]string, a accountRef) string {
	switch {
	case a.IBAN != "":
		if len(a.IBAN) <= 8 {
			return mask
		}
		return a.IBAN[:4] + " " + mask + " " + mask + " " + a.IBAN[len(a.IBAN)-4:]
	case a.BBAN != "":
		return fmt.Sprintf(m["detail.account.bban"], lastFour(a.BBAN))
	default:
		return fmt.Sprintf(m["detail.account.scheme"], a.SchemeName, lastFour(a.Identification))
	}
}

// lastFour is s masked but for its last 4 characters, or masked whole when that would show
// all of it.
func lastFour(s string) string {
	r := []rune(s)
	if len(r) <= 4 {
		return mask
	}
	return mask + " " + string(r[len(r)-4:])
}

// FormatDate writes a date of the schemas (YYYY-MM-DD) in words of the catalogue: "2 January
// 2027", "2 janvier 2027".
func formatDate(m map[string]string, s string) (string, error) {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return "", fmt.Errorf("date: %w", err)
	}
	return fmt.Sprintf(m["detail.date.format"], t.Day(), m[fmt.Sprintf("month.%d", int(t.Month()))], t.Year()), nil
}
