// Package pages renders the only screens a bank customer sees: login, consent and errors.
// Templates and CSS are embedded; every string comes from the message catalogue, in the
// language chosen by ui_locales, then Accept-Language, then English.
//
// The templates (templates/*.html, Go template syntax) are the source; New compiles them once
// per language into static bytes and typed holes (compile.go), escaped exactly as html/template
// would escape them (golden_test.go compares every page with html/template's output). No
// template engine runs per request: rendering a page is a few appends, without reflection.
package pages

import (
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/template/parse"

	"golang.org/x/text/language"

	"github.com/acmebank/authserver/shared/oauth"
)

//go:embed templates
var files embed.FS

// Pages renders the pages; build it once with New and share it.
type Pages struct {
	// progs holds the compiled pages of each language, the catalogue's strings compiled in.
	progs map[string]*programs
	// CSS is the stylesheet the pages link to, and CSSTag its ETag.
	CSS    []byte
	CSSTag string
	// AssetsPath is where the stylesheet is served.
	AssetsPath string
}

// New compiles the templates once; an error means a template uses something the compiler
// cannot render safely (see compile.go).
func New(assetsPath string) (*Pages, error) {
	sets := make(map[string]*programs, len(Locales))
	for _, lang := range Locales {
		t, err := compileLocalized(lang)
		if err != nil {
			return nil, fmt.Errorf("pages (%s): %w", lang, err)
		}
		sets[lang] = t
	}
	css, err := files.ReadFile("templates/app.css")
	if err != nil {
		return nil, fmt.Errorf("read stylesheet: %w", err)
	}
	sum := sha256.Sum256(css)
	return &Pages{progs: sets, CSS: css, CSSTag: `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`, AssetsPath: assetsPath}, nil
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
	Common
	Form
	Username string
	Problem  LoginProblem
	// FocusPassword puts the cursor in the password field: the username is already filled in.
	FocusPassword bool
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
	Heading, Message, Action string
}

// errorKinds are the error pages there are; each has a heading, a message and an action in
// the catalogue.
var errorKinds = []string{"expired", "client", "redirect", "forbidden", "unavailable", "bad", "busy"}

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
	return p.render(w, "login", lang, &scope{common: &d.Common, form: &d.Form, login: &d})
}

// Consent renders the consent page for the requested scopes.
func (p *Pages) Consent(w io.Writer, lang string, f Form, userName string, scopes oauth.Scopes) error {
	m := Messages(lang)
	views := make([]ScopeView, 0, len(scopes))
	for _, s := range scopes {
		c := oauth.CanonicalScope(s)
		v := ScopeView{Title: m["scope."+c+".title"], Description: m["scope."+c+".desc"], MovesMoney: c == oauth.ScopeTransfersWrite}
		if v.Title == "" { // validated requests name known scopes only; never show a blank line
			v.Title = s
		}
		views = append(views, v)
	}
	d := ConsentData{Common: p.common(lang, fmt.Sprintf(m["consent.title"], f.Client.Name)), Form: f, UserName: userName, Scopes: views}
	return p.render(w, "consent", lang, &scope{common: &d.Common, form: &d.Form, consent: &d})
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
	return p.render(w, "error", lang, &scope{common: &d.Common, error: &d})
}

// messageRef is how templates name a catalogue string: {{index .M "key"}} (or $.M).
var messageRef = regexp.MustCompile(`index \$?\.M "([^"]+)"`)

// programs are the compiled pages of one language.
type programs struct {
	login, consent, error []op
}

// compileLocalized compiles the templates of one language with each catalogue reference
// replaced by its string as a constant, escaped into the page's static text once.
func compileLocalized(lang string) (*programs, error) {
	m := Messages(lang)
	names, err := fs.Glob(files, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("list page templates: %w", err)
	}
	trees := map[string]*parse.Tree{}
	for _, name := range names {
		src, err := files.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("read page template %s: %w", name, err)
		}
		var missing error
		text := messageRef.ReplaceAllStringFunc(string(src), func(ref string) string {
			key := messageRef.FindStringSubmatch(ref)[1]
			msg, ok := m[key]
			if !ok {
				missing = fmt.Errorf("page template %s: no %s message %q", name, lang, key)
			}
			return strconv.Quote(msg)
		})
		if missing != nil {
			return nil, missing
		}
		set, err := parse.Parse(path.Base(name), text, "", "", templateFuncs)
		if err != nil {
			return nil, fmt.Errorf("parse page template %s (%s): %w", name, lang, err)
		}
		for n, t := range set {
			if _, dup := trees[n]; dup && n != path.Base(name) {
				return nil, fmt.Errorf("page template %s (%s): %q is defined twice", name, lang, n)
			}
			trees[n] = t
		}
	}
	return compileTrees(trees)
}

// compileTrees compiles the three pages from their parsed templates.
func compileTrees(trees map[string]*parse.Tree) (*programs, error) {
	c := &compiler{trees: trees}
	var p programs
	var err error
	for _, pg := range []struct {
		name string
		dot  dotKind
		prog *[]op
	}{{"login", dotLogin, &p.login}, {"consent", dotConsent, &p.consent}, {"error", dotError, &p.error}} {
		if *pg.prog, err = c.page(pg.name, pg.dot); err != nil {
			return nil, fmt.Errorf("compile %s page: %w", pg.name, err)
		}
	}
	return &p, nil
}

// templateFuncs are the functions the compiler implements; parse only checks their names.
var templateFuncs = map[string]any{"printf": true, "or": true, "and": true, "not": true}

// scope is the data a program reads: the page's, and the dot inside with and range.
type scope struct {
	common  *Common
	form    *Form
	login   *LoginData
	consent *ConsentData
	error   *ErrorData
}

// local is the dot inside with (a string) and range (an index in consent.Scopes). It is
// passed by value, never stored in the scope, so that the page's data stays on the stack.
type local struct {
	dot  string
	item int
}

func (s *scope) str(f field, l local) string {
	switch f {
	case fLang:
		return s.common.Lang
	case fTitle:
		return s.common.Title
	case fAssetsPath:
		return s.common.AssetsPath
	case fAction:
		return s.form.Action
	case fRequestID:
		return s.form.RequestID
	case fCSRF:
		return s.form.CSRF
	case fRedirectURI:
		return s.form.RedirectURI
	case fReturnTo:
		return s.form.ReturnTo()
	case fClientName:
		return s.form.Client.Name
	case fClientLogoURI:
		return s.form.Client.LogoURI
	case fUsername:
		return s.login.Username
	case fUserName:
		return s.consent.UserName
	case fHeading:
		return s.error.Heading
	case fMessage:
		return s.error.Message
	case fErrorAction:
		return s.error.Action
	case fScopeTitle:
		return s.consent.Scopes[l.item].Title
	case fScopeDescription:
		return s.consent.Scopes[l.item].Description
	case fDot:
		return l.dot
	}
	panic(fmt.Sprintf("pages: field %d is not a string", f)) // the compiler checked kinds
}

func (s *scope) truth(f field, l local) bool {
	switch f {
	case fMissingUsername:
		return s.login.Problem.MissingUsername
	case fMissingPassword:
		return s.login.Problem.MissingPassword
	case fFailed:
		return s.login.Problem.Failed
	case fProblemAny:
		return s.login.Problem.Any()
	case fFocusPassword:
		return s.login.FocusPassword
	case fScopeMovesMoney:
		return s.consent.Scopes[l.item].MovesMoney
	case fScopes:
		return len(s.consent.Scopes) > 0
	}
	return s.str(f, l) != ""
}

func (s *scope) test(c *cond, l local) bool {
	switch c.kind {
	case condField:
		return s.truth(c.field, l)
	case condConst:
		return c.value
	case condNot:
		return !s.test(c.args[0], l)
	case condAnd:
		for _, a := range c.args {
			if !s.test(a, l) {
				return false
			}
		}
		return true
	default: // condOr
		for _, a := range c.args {
			if s.test(a, l) {
				return true
			}
		}
		return false
	}
}

// run appends the output of prog to b.
func (s *scope) run(b []byte, prog []op, l local) []byte {
	for i := range prog {
		o := &prog[i]
		switch o.kind {
		case opStatic:
			b = append(b, o.text...)
		case opHTML:
			b = appendHTML(b, s.str(o.field, l))
		case opURL:
			b = appendURL(b, s.str(o.field, l))
		case opIf:
			if s.test(o.cond, l) {
				b = s.run(b, o.body, l)
			} else {
				b = s.run(b, o.alt, l)
			}
		case opWith:
			if v := s.str(o.field, l); v != "" {
				b = s.run(b, o.body, local{dot: v, item: l.item})
			} else {
				b = s.run(b, o.alt, l)
			}
		case opRange:
			if len(s.consent.Scopes) == 0 {
				b = s.run(b, o.alt, l)
				continue
			}
			for j := range s.consent.Scopes {
				b = s.run(b, o.body, local{dot: l.dot, item: j})
			}
		}
	}
	return b
}

// bufs are the pages' output buffers: a page is built whole, then written at once.
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 8<<10); return &b }}

// maxPooled is the largest buffer kept for reuse; a page made huge by hostile input is not.
const maxPooled = 64 << 10

func (p *Pages) render(w io.Writer, name, lang string, s *scope) error {
	set, ok := p.progs[lang]
	if !ok {
		set = p.progs[Locales[0]]
	}
	prog := set.error
	switch name {
	case "login":
		prog = set.login
	case "consent":
		prog = set.consent
	}
	bp := bufs.Get().(*[]byte)
	b := s.run((*bp)[:0], prog, local{})
	_, err := w.Write(b)
	if cap(b) <= maxPooled {
		*bp = b[:0]
		bufs.Put(bp)
	}
	if err != nil {
		return fmt.Errorf("write %s page: %w", name, err)
	}
	return nil
}
