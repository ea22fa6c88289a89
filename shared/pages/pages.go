// Package pages renders the only screens a bank customer sees: login, consent and errors.
// Templates and CSS are embedded; every string comes from the message catalogue, in the
// language chosen by ui_locales, then Accept-Language, then English.
package pages

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"strings"

	"golang.org/x/text/language"

	"github.com/acmebank/authserver/shared/oauth"
)

//go:embed templates
var files embed.FS

// Pages renders the pages; build it once with New and share it.
type Pages struct {
	tmpl *template.Template
	// CSS is the stylesheet the pages link to, and CSSTag its ETag.
	CSS    []byte
	CSSTag string
	// AssetsPath is where the stylesheet is served.
	AssetsPath string
}

// New parses the templates once.
func New(assetsPath string) (*Pages, error) {
	t, err := template.ParseFS(files, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("parse page templates: %w", err)
	}
	css, err := files.ReadFile("templates/app.css")
	if err != nil {
		return nil, fmt.Errorf("read stylesheet: %w", err)
	}
	sum := sha256.Sum256(css)
	return &Pages{tmpl: t, CSS: css, CSSTag: `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`, AssetsPath: assetsPath}, nil
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
	Lang       string
	Title      string
	M          map[string]string
	AssetsPath string
}

// Form is the state every form of the flow carries: the pending request and its CSRF token.
type Form struct {
	Action    string
	RequestID string
	CSRF      string
	Client    *oauth.Client
}

// LoginData is the login page.
type LoginData struct {
	Common
	Form
	Username string
	Error    bool
}

// ConsentData is the consent page.
type ConsentData struct {
	Common
	Form
	UserName string
	Scopes   []ScopeView
}

// ScopeView is one requested scope in plain words.
type ScopeView struct {
	Title, Description string
	MovesMoney         bool
}

// ErrorData is an error page: what went wrong and what to do, no internals.
type ErrorData struct {
	Common
	Heading, Message string
}

func (p *Pages) common(lang, titleKey string) Common {
	m := Messages(lang)
	return Common{Lang: lang, Title: m[titleKey], M: m, AssetsPath: p.AssetsPath}
}

// Login renders the login page.
func (p *Pages) Login(w io.Writer, lang string, f Form, username string, failed bool) error {
	return p.render(w, "login", LoginData{Common: p.common(lang, "login.title"), Form: f, Username: username, Error: failed})
}

// Consent renders the consent page for the requested scopes.
func (p *Pages) Consent(w io.Writer, lang string, f Form, userName string, scopes oauth.Scopes) error {
	m := Messages(lang)
	views := make([]ScopeView, 0, len(scopes))
	for _, s := range scopes {
		c := oauth.CanonicalScope(s)
		views = append(views, ScopeView{Title: m["scope."+c+".title"], Description: m["scope."+c+".desc"], MovesMoney: c == oauth.ScopeTransfersWrite})
	}
	d := ConsentData{Common: p.common(lang, "consent.allow"), Form: f, UserName: userName, Scopes: views}
	d.Title = fmt.Sprintf(m["consent.title"], f.Client.Name)
	return p.render(w, "consent", d)
}

// Error renders an error page; kind names a heading and message pair of the catalogue
// (expired, client, redirect, forbidden, unavailable, bad).
func (p *Pages) Error(w io.Writer, lang, kind string) error {
	m := Messages(lang)
	d := ErrorData{Common: p.common(lang, "error.title"), Heading: m["error."+kind+".heading"], Message: m["error."+kind+".message"]}
	if d.Heading == "" {
		d.Heading, d.Message = m["error.bad.heading"], m["error.bad.message"]
	}
	d.Title = d.Heading
	return p.render(w, "error", d)
}

func (p *Pages) render(w io.Writer, name string, data any) error {
	var buf bytes.Buffer
	if err := p.tmpl.ExecuteTemplate(&buf, name, data); err != nil {
		return fmt.Errorf("render %s page: %w", name, err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}
