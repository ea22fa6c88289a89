// Package pages renders the only screens a bank customer sees: login, consent and errors.
// Templates and CSS are embedded; every string comes from the message catalogue, in the
// language chosen by ui_locales, then Accept-Language, then English.
//
// The templates (templates/*.html) are parsed once by New and executed by html/template on
// every request, so every value a page shows is escaped by html/template's contextual
// autoescaping. The catalogue of the page's language is passed with the data (Common.M).
package pages

import (
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/text/language"

	"github.com/acmebank/authserver/shared/oauth"
)

//go:embed templates
var files embed.FS

// Pages renders the pages; build it once with New and share it.
type Pages struct {
	tmpl *template.Template
	// CSS is the stylesheet the pages link to, and CSSTag its ETag; Script is passkey.js,
	// the script of the pages with a passkey form, and ScriptTag its ETag.
	CSS       []byte
	CSSTag    string
	Script    []byte
	ScriptTag string
	// AssetsPath is where the stylesheet is served.
	AssetsPath string
}

// New parses the templates once and has html/template escape them; the result is safe for
// concurrent use.
func New(assetsPath string) (*Pages, error) { return load(files, assetsPath) }

// load builds the pages from templates/ of fsys: the embedded files, or a test's.
func load(fsys fs.FS, assetsPath string) (*Pages, error) {
	t, err := template.ParseFS(fsys, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("parse page templates: %w", err)
	}
	css, err := fs.ReadFile(fsys, "templates/app.css")
	if err != nil {
		return nil, fmt.Errorf("read stylesheet: %w", err)
	}
	script, err := fs.ReadFile(fsys, "templates/passkey.js")
	if err != nil {
		return nil, fmt.Errorf("read passkey script: %w", err)
	}
	p := &Pages{tmpl: t, CSS: css, CSSTag: etag(css), Script: script, ScriptTag: etag(script), AssetsPath: assetsPath}
	// html/template escapes a page on its first execution: render each once here, so that a
	// template it cannot escape fails New at start-up rather than a customer's request.
	f := Form{Client: &oauth.Client{}}
	for _, err := range []error{
		p.Login(io.Discard, Locales[0], f, "", LoginProblem{}),
		p.Consent(io.Discard, Locales[0], f, "", nil, json.RawMessage(`[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"1"},"creditorName":"x","creditorAccount":{"iban":"FR7630006000011234567890189"},"remittanceInformationUnstructured":"x","requestedExecutionDate":"2027-01-02"},{"type":"account_information","permissions":["balances"],"expirationDate":"2027-01-02"}]`)),
		p.Error(io.Discard, Locales[0], ""),
		p.MFA(io.Discard, Locales[0], Form{Client: &oauth.Client{}, Passkey: &PasskeyView{Mode: "get", Label: "passkey.use"}}, MFAState{HasTOTP: true, Failed: true, CodeUsed: true}),
		p.TOTP(io.Discard, Locales[0], Form{Client: &oauth.Client{}, Passkey: &PasskeyView{Mode: "create", Label: "passkey.add"}}, nil, "", true),
		p.RecoveryCodes(io.Discard, Locales[0], f, []string{"x"}),
		p.PasskeyAdd(io.Discard, Locales[0], Form{Client: &oauth.Client{}, Passkey: &PasskeyView{Mode: "create", Label: "passkey.add"}}),
		p.Payment(io.Discard, Locales[0], Form{Client: &oauth.Client{}, Passkey: &PasskeyView{Mode: "get", Label: "payment.passkey", Primary: true}, OfferPasskey: true},
			"", nil, json.RawMessage(`[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"1"}}]`), PaymentState{TOTP: true, NoFactor: true, Failed: true, CodeUsed: true}),
		p.Apps(io.Discard, Locales[0], AppsForm{SignOut: "/x"}, "", []App{{Scopes: oauth.Scopes{"openid"}, Details: json.RawMessage(`[{"type":"account_information","permissions":["balances"]}]`)}}, true),
		p.AppsSignedOut(io.Discard, Locales[0]),
		p.LogoutConfirm(io.Discard, Locales[0], LogoutForm{ClientName: "x"}),
		p.LoggedOut(io.Discard, Locales[0]),
		p.BankApp(io.Discard, Locales[0], BankApp{Step: BankAppSignedOut, LoginFailed: true}),
		p.BankApp(io.Discard, Locales[0], BankApp{Step: BankAppDone, Current: &BankRequest{}, Pending: []BankRequest{{BindingMessage: "x", Scopes: oauth.Scopes{"openid"},
			Details: json.RawMessage(`[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"1"}}]`)}}}),
		p.BankApp(io.Discard, Locales[0], BankApp{Step: BankAppApproving, Current: &BankRequest{BindingMessage: "x"}, TOTP: true, Failed: true, CodeUsed: true,
			Form: Form{Passkey: &PasskeyView{Mode: "get", Label: "bankapp.passkey", Primary: true}}}),
	} {
		if err != nil {
			return nil, err
		}
	}
	return p, nil
}

func etag(b []byte) string {
	sum := sha256.Sum256(b)
	return `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`
}

var matcher = language.NewMatcher([]language.Tag{language.English, language.French})

// Negotiate picks the page language: the first supported of the OIDC ui_locales (space
// separated, in order of preference), else the best of Accept-Language, else English.
func Negotiate(uiLocales, acceptLanguage string) string {
	for _, l := range strings.Fields(uiLocales) {
		if t, err := language.Parse(l); err == nil {
			base, _ := t.Base()
			if _, ok := catalogue[base.String()]; ok {
				return base.String()
			}
		}
	}
	if acceptLanguage != "" {
		tags, _, err := language.ParseAcceptLanguage(acceptLanguage)
		if err == nil && len(tags) > 0 {
			_, idx, conf := matcher.Match(tags...)
			if conf != language.No {
				return Locales[idx]
			}
		}
	}
	return Locales[0]
}

// Messages returns the catalogue of lang, with English for anything missing.
func Messages(lang string) map[string]string {
	m, ok := catalogue[lang]
	if !ok {
		return catalogue["en"]
	}
	return m
}

// Common is what every page shows.
type Common struct {
	Lang string
	// Title is the page's own title; the template adds the bank's name.
	Title      string
	M          map[string]string
	AssetsPath string
}

// Form is the state every form of the flow carries: the pending request and its CSRF token,
// and where the browser goes once the user has answered.
type Form struct {
	Action    string
	RequestID string
	CSRF      string
	Client    *oauth.Client
	// RedirectURI is the client's URI the answer goes to; the consent page names its host, so
	// the user sees where they are sent whatever they choose.
	RedirectURI string
	// Passkey, when set, puts a passkey button on the page (see PasskeyView).
	Passkey *PasskeyView
	// OfferPasskey shows, on the consent page, the offer to add a passkey.
	OfferPasskey bool
}

// PasskeyView is a WebAuthn ceremony a page offers: Mode "get" (sign in with a passkey, or
// confirm with one) or "create" (add one), the options for navigator.credentials as JSON, the
// form action its answer is posted with, and the catalogue key of its button. The page then
// loads passkey.js, its only script.
type PasskeyView struct {
	Mode, Options, Action, Label string
	// Primary makes the passkey the page's main action (adding one when offered); otherwise
	// it is the alternative, after an "or".
	Primary bool
}

// ReturnTo is what the consent page shows of the redirect URI: its host for a web address,
// its scheme for a native app's private-use URI, empty when unknown.
func (f Form) ReturnTo() string {
	u, err := url.Parse(f.RedirectURI)
	if err != nil || u.Scheme == "" {
		return ""
	}
	if u.Host != "" {
		return u.Host
	}
	return u.Scheme
}

// LoginProblem is why the login page comes back: missing fields, each message tied to its
// input, or refused credentials, for which one generic message blames neither field, so the
// page never tells whether a username exists. The zero value is a first, clean showing.
type LoginProblem struct {
	MissingUsername, MissingPassword bool
	// Failed is any refused login: unknown user, wrong password, disabled or locked account.
	Failed bool
}

// Any reports whether the form comes back with an error to show.
func (p LoginProblem) Any() bool { return p.MissingUsername || p.MissingPassword || p.Failed }

// LoginData is the login page.
type LoginData struct {
	Common   Common
	Form     Form
	Username string
	Problem  LoginProblem
	// FocusPassword puts the cursor in the password field: the username is already filled in.
	FocusPassword bool
}

// ConsentData is the consent page.
type ConsentData struct {
	Common   Common
	Form     Form
	UserName string
	Scopes   []ScopeView
	// Details are the request's authorization details (RFC 9396) in plain words.
	Details []DetailView
}

// ScopeView is one requested scope in plain words.
type ScopeView struct {
	Title, Description string
	MovesMoney         bool
}

// MFAData is the second-factor page.
type MFAData struct {
	Common Common
	Form   Form
	State  MFAState
}

// TOTPData is the authenticator app set-up page.
type TOTPData struct {
	Common Common
	Form   Form
	QRCode template.URL
	Secret string
	Failed bool
}

// RecoveryData is the page that shows the recovery codes, once.
type RecoveryData struct {
	Common Common
	Form   Form
	Codes  []string
}

// PasskeyAddData is the page that offers to add a passkey.
type PasskeyAddData struct {
	Common Common
	Form   Form
}

// ErrorData is an error page: what went wrong and what to do, no internals.
type ErrorData struct {
	Common  Common
	Heading string
	Message string
	Action  string
}

// errorKinds are the error pages there are; each has a heading, a message and an action in
// the catalogue.
var errorKinds = []string{"expired", "client", "redirect", "forbidden", "unavailable", "bad", "busy", "nogrant", "noreceipt"}

func (p *Pages) common(lang, title string) Common {
	return Common{Lang: lang, Title: title, M: Messages(lang), AssetsPath: p.AssetsPath}
}

// Login renders the login page; username refills the field after a problem.
func (p *Pages) Login(w io.Writer, lang string, f Form, username string, problem LoginProblem) error {
	m := Messages(lang)
	title := m["login.title"]
	if problem.Any() {
		title = fmt.Sprintf(m["page.title.err"], title)
	}
	d := LoginData{Common: p.common(lang, title), Form: f, Username: username, Problem: problem}
	d.FocusPassword = !problem.MissingUsername && (problem.MissingPassword || problem.Failed)
	if f.Client == nil {
		return errors.New("render login page: no client")
	}
	return p.render(w, "login", &d)
}

// Consent renders the consent page for the requested scopes and authorization details (the
// validated JSON array the pending request keeps; empty when none were asked for).
func (p *Pages) Consent(w io.Writer, lang string, f Form, userName string, scopes oauth.Scopes, details json.RawMessage) error {
	if f.Client == nil {
		return errors.New("render consent page: no client")
	}
	m := Messages(lang)
	views := scopeViews(m, scopes)
	dv, err := detailViews(lang, details)
	if err != nil {
		return fmt.Errorf("render consent page: %w", err)
	}
	d := ConsentData{Common: p.common(lang, fmt.Sprintf(m["consent.title"], f.Client.Name)), Form: f, UserName: userName, Scopes: views, Details: dv}
	return p.render(w, "consent", &d)
}

// scopeViews says scopes in words of the catalogue m.
func scopeViews(m map[string]string, scopes oauth.Scopes) []ScopeView {
	views := make([]ScopeView, 0, len(scopes))
	for _, s := range scopes {
		c := oauth.CanonicalScope(s)
		v := ScopeView{Title: m["scope."+c+".title"], Description: m["scope."+c+".desc"], MovesMoney: c == oauth.ScopeTransfersWrite}
		if v.Title == "" { // validated requests name known scopes only; never show a blank line
			v.Title = s
		}
		views = append(views, v)
	}
	return views
}

// PaymentState is what the payment page shows besides the payment: the ways the user may
// confirm it (a passkey: Form.Passkey; TOTP), or that they hold none the policy accepts, and
// whether the page comes back after a refused attempt.
type PaymentState struct {
	TOTP, NoFactor, Failed, CodeUsed bool
}

// PaymentData is the payment page: the consent page's content for a payment, whose
// confirmation is bound to the details shown (dynamic linking).
type PaymentData struct {
	Common   Common
	Form     Form
	UserName string
	Scopes   []ScopeView
	Details  []DetailView
	State    PaymentState
}

// Payment renders the payment page of a request for scopes and authorization details that
// hold a payment: the details, then the confirmation (a passkey ceremony, f.Passkey, whose
// challenge is derived from them; a TOTP code when st.TOTP), or, when the user holds no factor
// the policy accepts, what to do (add a passkey, when f.OfferPasskey) and the way out (deny).
func (p *Pages) Payment(w io.Writer, lang string, f Form, userName string, scopes oauth.Scopes, details json.RawMessage, st PaymentState) error {
	if f.Client == nil {
		return errors.New("render payment page: no client")
	}
	m := Messages(lang)
	views := make([]ScopeView, 0, len(scopes))
	for _, s := range scopes {
		c := oauth.CanonicalScope(s)
		v := ScopeView{Title: m["scope."+c+".title"], Description: m["scope."+c+".desc"], MovesMoney: c == oauth.ScopeTransfersWrite}
		if v.Title == "" {
			v.Title = s
		}
		views = append(views, v)
	}
	dv, err := detailViews(lang, details)
	if err != nil {
		return fmt.Errorf("render payment page: %w", err)
	}
	title := fmt.Sprintf(m["payment.title"], f.Client.Name)
	if st.Failed {
		title = fmt.Sprintf(m["page.title.err"], title)
	}
	d := PaymentData{Common: p.common(lang, title), Form: f, UserName: userName, Scopes: views, Details: dv, State: st}
	return p.render(w, "payment", &d)
}

// MFAState is what the second-factor page shows besides its form: whether the user has an
// authenticator app, and why the page comes back after an attempt.
type MFAState struct {
	HasTOTP bool
	// Failed shows the one message of every refused attempt; CodeUsed, with it, says the code
	// was right but already used, and to wait for the app's next one.
	Failed, CodeUsed bool
}

// MFA renders the second-factor page: a code of the authenticator app (when the user has one),
// a recovery code, and the user's passkeys (f.Passkey).
func (p *Pages) MFA(w io.Writer, lang string, f Form, st MFAState) error {
	m := Messages(lang)
	title := m["mfa.title"]
	if st.Failed {
		title = fmt.Sprintf(m["page.title.err"], title)
	}
	return p.render(w, "mfa", &MFAData{Common: p.common(lang, title), Form: f, State: st})
}

// TOTP renders the set-up of an authenticator app: the QR code (a PNG), the secret to type
// instead, the code that proves it, and a passkey as the alternative (f.Passkey).
func (p *Pages) TOTP(w io.Writer, lang string, f Form, qrPNG []byte, secret string, failed bool) error {
	m := Messages(lang)
	title := m["totp.title"]
	if failed {
		title = fmt.Sprintf(m["page.title.err"], title)
	}
	qr := template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(qrPNG))
	return p.render(w, "totp", &TOTPData{Common: p.common(lang, title), Form: f, QRCode: qr, Secret: groups(secret), Failed: failed})
}

// RecoveryCodes renders the recovery codes, shown this once.
func (p *Pages) RecoveryCodes(w io.Writer, lang string, f Form, codes []string) error {
	return p.render(w, "recovery", &RecoveryData{Common: p.common(lang, Messages(lang)["recovery.title"]), Form: f, Codes: codes})
}

// PasskeyAdd renders the offer to add a passkey (f.Passkey) or go on without.
func (p *Pages) PasskeyAdd(w io.Writer, lang string, f Form) error {
	return p.render(w, "passkey_add", &PasskeyAddData{Common: p.common(lang, Messages(lang)["passkeyadd.title"]), Form: f})
}

// groups splits a TOTP secret in groups of four for reading and typing.
func groups(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && i%4 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Error renders an error page; kind names a heading, message and action of the catalogue
// (expired, client, redirect, forbidden, unavailable, bad, busy); an unknown kind shows bad's.
func (p *Pages) Error(w io.Writer, lang, kind string) error {
	m := Messages(lang)
	if !slices.Contains(errorKinds, kind) {
		kind = "bad"
	}
	k := "error." + kind + "."
	d := ErrorData{Heading: m[k+"heading"], Message: m[k+"message"], Action: m[k+"action"]}
	d.Common = p.common(lang, fmt.Sprintf(m["page.title.err"], d.Heading))
	return p.render(w, "error", &d)
}

// render executes one page. A failure part way leaves part of a page in w: the HTTP handlers
// render into a buffer and send nothing of a page that failed.
func (p *Pages) render(w io.Writer, name string, data any) error {
	if err := p.tmpl.ExecuteTemplate(w, name, data); err != nil {
		return fmt.Errorf("render %s page: %w", name, err)
	}
	return nil
}
