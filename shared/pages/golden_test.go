package pages

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"testing"

	"github.com/acmebank/authserver/shared/oauth"
)

// oracle is the html/template renderer the pages used to execute on every request, kept here
// only as the reference the compiled renderer must match byte for byte: html/template's
// contextual escaping is the specification of what each hole of a page must escape.
type oracle struct {
	sets       map[string]*template.Template
	assetsPath string
}

func newOracle(t testing.TB, assetsPath string) *oracle {
	t.Helper()
	o := &oracle{sets: map[string]*template.Template{}, assetsPath: assetsPath}
	for _, lang := range Locales {
		set, err := oracleParse(lang)
		if err != nil {
			t.Fatal(err)
		}
		o.sets[lang] = set
	}
	return o
}

// oracleParse is the former parseLocalized: the catalogue's strings are compiled in as
// constants, html/template escapes them and every value for its context.
func oracleParse(lang string) (*template.Template, error) {
	m := Messages(lang)
	names, err := fs.Glob(files, "templates/*.html")
	if err != nil {
		return nil, err
	}
	t := template.New("pages")
	for _, name := range names {
		src, err := files.ReadFile(name)
		if err != nil {
			return nil, err
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
		if _, err := t.New(path.Base(name)).Parse(text); err != nil {
			return nil, fmt.Errorf("parse page template %s (%s): %w", name, lang, err)
		}
	}
	return t, nil
}

func (o *oracle) common(lang, title string) Common {
	return Common{Lang: lang, Title: title, M: Messages(lang), AssetsPath: o.assetsPath}
}

func (o *oracle) render(name, lang string, data any) (string, error) {
	t, ok := o.sets[lang]
	if !ok {
		t = o.sets[Locales[0]]
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, name, data); err != nil {
		return "", err
	}
	return buf.String(), nil
}

func (o *oracle) login(lang string, f Form, username string, problem LoginProblem) (string, error) {
	m := Messages(lang)
	title := m["login.title"]
	if problem.Any() {
		title = fmt.Sprintf(m["page.title.err"], title)
	}
	d := LoginData{Common: o.common(lang, title), Form: f, Username: username, Problem: problem}
	d.FocusPassword = !problem.MissingUsername && (problem.MissingPassword || problem.Failed)
	return o.render("login", lang, d)
}

func (o *oracle) consent(lang string, f Form, userName string, scopes oauth.Scopes) (string, error) {
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
	d := ConsentData{Common: o.common(lang, fmt.Sprintf(m["consent.title"], f.Client.Name)), Form: f, UserName: userName, Scopes: views}
	return o.render("consent", lang, d)
}

func (o *oracle) error(lang, kind string) (string, error) {
	m := Messages(lang)
	if !slices.Contains(errorKinds, kind) {
		kind = "bad"
	}
	k := "error." + kind + "."
	d := ErrorData{Heading: m[k+"heading"], Message: m[k+"message"], Action: m[k+"action"]}
	d.Common = o.common(lang, fmt.Sprintf(m["page.title.err"], d.Heading))
	return o.render("error", lang, d)
}

// hostile are values a client registration, a request or a user can put on a page: markup,
// both quotes, entities, the characters html/template treats specially (NUL, +), URLs with
// schemes it refuses, percent escapes, invalid UTF-8, and non-ASCII text.
var hostile = []string{
	"",
	"Budget App",
	`<script>alert("x")</script>`,
	`" onmouseover="alert(1)`,
	`' onfocus='alert(1)`,
	"Tom & Jerry's + Co &amp; &#34; &lt;",
	"nul\x00byte",
	"javascript:alert(1)",
	"JavaScript:alert(document.cookie)",
	" javascript:alert(1)",
	"data:text/html;base64,PHNjcmlwdD4=",
	"vbscript:msgbox",
	"https://app.example/logo.png?a=1&b=<2>#frag",
	"HTTP://APP.EXAMPLE/a b/c\"d'e(f)",
	"mailto:ops@app.example",
	"//cdn.example/logo.png",
	"/authorize?x=%41%zz%2",
	"relative/path:with:colons",
	"https://émoji.example/🏦?q=été",
	"Crédit Agricole — 銀行 🏦",
	"\xff\xfe invalid \xc3",
	"%!s(MISSING) %s %[1]s %%",
	"{{.CSRF}}",
	"\uFDD0\uFFFE\u2028\u2029",
	"a\tb\nc\rd",
}

func hostileForm(i int) Form {
	h := func(k int) string { return hostile[(i+k)%len(hostile)] }
	return Form{Action: h(0), RequestID: h(1), CSRF: h(2), RedirectURI: h(3),
		Client: &oauth.Client{ID: "c", Name: h(4), LogoURI: h(5)}}
}

// goldenLangs are the languages of the pages plus one they do not have, which falls back to
// English strings while the page keeps the code it was given.
var goldenLangs = append(slices.Clone(Locales), "de")

var goldenProblems = []LoginProblem{
	{}, {Failed: true}, {MissingUsername: true}, {MissingPassword: true},
	{MissingUsername: true, MissingPassword: true}, {MissingUsername: true, Failed: true},
	{MissingPassword: true, Failed: true}, {MissingUsername: true, MissingPassword: true, Failed: true},
}

var goldenScopes = []oauth.Scopes{
	nil,
	{"openid"},
	{"openid", "email", "phone", "profile"},
	{"bank:transfers:write"},
	{"openid", "bank:transfers:write", "email"},
	{"unknown<scope>", "x&y"},
}

func diffAt(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo := max(0, i-60)
	return fmt.Sprintf("first difference at byte %d:\n got: %q\nwant: %q", i, a[lo:min(len(a), i+60)], b[lo:min(len(b), i+60)])
}

func TestLogin_MatchesTheHTMLTemplateRenderingByteForByte(t *testing.T) {
	p, o := newPages(t), newOracle(t, "/assets/")
	n := 0
	for _, lang := range goldenLangs {
		for pi, problem := range goldenProblems {
			for i := range hostile {
				f := hostileForm(i + pi)
				for _, noLogo := range []bool{false, true} {
					if noLogo {
						f.Client = &oauth.Client{Name: f.Client.Name}
					}
					username := hostile[(i+pi+7)%len(hostile)]
					want, err := o.login(lang, f, username, problem)
					if err != nil {
						t.Fatal(err)
					}
					var got bytes.Buffer
					if err := p.Login(&got, lang, f, username, problem); err != nil {
						t.Fatal(err)
					}
					if got.String() != want {
						t.Fatalf("login %s %+v form %d logo %v: %s", lang, problem, i, !noLogo, diffAt(got.String(), want))
					}
					n++
				}
			}
		}
	}
	t.Logf("%d login pages identical", n)
}

func TestConsent_MatchesTheHTMLTemplateRenderingByteForByte(t *testing.T) {
	p, o := newPages(t), newOracle(t, "/assets/")
	for _, lang := range goldenLangs {
		for si, scopes := range goldenScopes {
			for i := range hostile {
				f := hostileForm(i + si)
				for _, noLogo := range []bool{false, true} {
					if noLogo {
						f.Client = &oauth.Client{Name: f.Client.Name}
					}
					user := hostile[(i+si+11)%len(hostile)]
					want, err := o.consent(lang, f, user, scopes)
					if err != nil {
						t.Fatal(err)
					}
					var got bytes.Buffer
					if err := p.Consent(&got, lang, f, user, scopes); err != nil {
						t.Fatal(err)
					}
					if got.String() != want {
						t.Fatalf("consent %s %v form %d logo %v: %s", lang, scopes, i, !noLogo, diffAt(got.String(), want))
					}
				}
			}
		}
	}
}

func TestError_MatchesTheHTMLTemplateRenderingByteForByte(t *testing.T) {
	for _, assets := range []string{"/assets/", "javascript:alert(1)//", `"><script>`} {
		p, err := New(assets)
		if err != nil {
			t.Fatal(err)
		}
		o := newOracle(t, assets)
		for _, lang := range goldenLangs {
			for _, kind := range append(slices.Clone(errorKinds), "nonsense", "") {
				want, err := o.error(lang, kind)
				if err != nil {
					t.Fatal(err)
				}
				var got bytes.Buffer
				if err := p.Error(&got, lang, kind); err != nil {
					t.Fatal(err)
				}
				if got.String() != want {
					t.Fatalf("error %s %s assets %q: %s", lang, kind, assets, diffAt(got.String(), want))
				}
			}
		}
	}
}

// FuzzPages_MatchHTMLTemplate renders the login and consent pages with any client name, logo,
// form action, username and language against the html/template oracle.
func FuzzPages_MatchHTMLTemplate(f *testing.F) {
	for i, h := range hostile {
		f.Add(h, hostile[(i+3)%len(hostile)], hostile[(i+5)%len(hostile)], hostile[(i+9)%len(hostile)], Locales[i%len(Locales)], uint8(i))
	}
	p, o := newPages(f), newOracle(f, "/assets/")
	f.Fuzz(func(t *testing.T, name, logo, action, username, lang string, bits uint8) {
		form := Form{Action: action, RequestID: username, CSRF: name, RedirectURI: logo,
			Client: &oauth.Client{Name: name, LogoURI: logo}}
		problem := LoginProblem{MissingUsername: bits&1 != 0, MissingPassword: bits&2 != 0, Failed: bits&4 != 0}
		want, err := o.login(lang, form, username, problem)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := p.Login(&got, lang, form, username, problem); err != nil {
			t.Fatal(err)
		}
		if got.String() != want {
			t.Fatalf("login: %s", diffAt(got.String(), want))
		}
		scopes := oauth.Scopes{"openid", username}
		if bits&8 != 0 {
			scopes = append(scopes, "bank:transfers:write")
		}
		want, err = o.consent(lang, form, username, scopes)
		if err != nil {
			t.Fatal(err)
		}
		got.Reset()
		if err := p.Consent(&got, lang, form, username, scopes); err != nil {
			t.Fatal(err)
		}
		if got.String() != want {
			t.Fatalf("consent: %s", diffAt(got.String(), want))
		}
	})
}
