package pages

import (
	"bytes"
	"fmt"
	"html"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/oauth"
)

// These tests render every page, in every state and language, with hostile values in every
// place a client registration, a request or a user can reach, and check what html/template's
// contextual escaping made of them: no markup, attribute or script of the input's own, every
// value shown as it was given once unescaped, and URLs with a scheme that runs code replaced
// by html/template's #ZgotmplZ.

// hostile are values a client registration, a request or a user can put on a page: markup,
// both quotes, entities, characters html/template treats specially (NUL, +), URLs with schemes
// it refuses, percent escapes, invalid UTF-8, format verbs, template actions, non-ASCII text.
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
	"</title><script>alert(1)</script>",
	"<img src=x onerror=alert(1)>",
}

// codeScheme matches a URL whose scheme runs code; html/template must never let one through.
var codeScheme = regexp.MustCompile(`(?i)^\s*(javascript|vbscript|data):`)

func hostileForm(i int) Form {
	h := func(k int) string { return hostile[(i+k)%len(hostile)] }
	return Form{Action: h(0), RequestID: h(1), CSRF: h(2), RedirectURI: h(3),
		Client: &oauth.Client{ID: "c", Name: h(4), LogoURI: h(5)}}
}

// escapingLangs are the languages of the pages plus one they do not have, which falls back to
// English strings while the page keeps the code it was given.
var escapingLangs = append(slices.Clone(Locales), "de")

var loginProblems = []LoginProblem{
	{}, {Failed: true}, {MissingUsername: true}, {MissingPassword: true},
	{MissingUsername: true, MissingPassword: true}, {MissingUsername: true, Failed: true},
	{MissingPassword: true, Failed: true}, {MissingUsername: true, MissingPassword: true, Failed: true},
}

var consentScopes = []oauth.Scopes{
	nil,
	{"openid"},
	{"openid", "email", "phone", "profile"},
	{"bank:transfers:write"},
	{"openid", "bank:transfers:write", "email"},
	{"unknown<scope>", `x&y"z`},
}

var (
	elemRe      = regexp.MustCompile(`<(/?[a-zA-Z][a-zA-Z0-9]*)((?:\s+[a-zA-Z-]+(?:="[^"]*")?)*)\s*/?>`)
	attrNameRe  = regexp.MustCompile(`\s+([a-zA-Z-]+)(?:="([^"]*)")?`)
	templTagRe  = regexp.MustCompile(`<(/?[a-zA-Z][a-zA-Z0-9]*)`)
	templAttrRe = regexp.MustCompile(`\s([a-zA-Z-]+)(?:=|[\s>{])`)
)

// markup is what the templates themselves may produce: their element and attribute names.
func markup(t *testing.T) (tags, attrs map[string]bool) {
	t.Helper()
	tags, attrs = map[string]bool{}, map[string]bool{}
	for path, src := range templateSources(t) {
		if !strings.HasSuffix(path, ".html") {
			continue
		}
		src = actionRe.ReplaceAllString(src, " ")
		for _, m := range templTagRe.FindAllStringSubmatch(src, -1) {
			tags[strings.ToLower(strings.TrimPrefix(m[1], "/"))] = true
		}
		for _, tag := range regexp.MustCompile(`<[^>]*>`).FindAllString(src, -1) {
			for _, m := range templAttrRe.FindAllStringSubmatch(tag, -1) {
				attrs[strings.ToLower(m[1])] = true
			}
		}
	}
	return tags, attrs
}

// shown is how a value reads once the page is unescaped: html/template replaces NUL.
func shown(v string) string { return strings.ReplaceAll(v, "\x00", "\uFFFD") }

// unescaped says what is wrong with a page whatever was put in it: an element or attribute
// of no template, a bare markup character in text, a script, a URL attribute with a scheme
// that runs code, or an input with a markup character shown raw. nil means none.
func unescaped(page string, tags, attrs map[string]bool, inputs ...string) error {
	if strings.Contains(strings.ToLower(page), "<script") {
		return fmt.Errorf("page has a script element:\n%s", page)
	}
	rest := strings.Replace(page, "<!doctype html>", "", 1)
	for _, m := range elemRe.FindAllStringSubmatch(rest, -1) {
		if !tags[strings.ToLower(strings.TrimPrefix(m[1], "/"))] {
			return fmt.Errorf("page has an element <%s> of no template", m[1])
		}
		for _, a := range attrNameRe.FindAllStringSubmatch(m[2], -1) {
			name := strings.ToLower(a[1])
			if !attrs[name] {
				return fmt.Errorf("page has an attribute %s of no template in %s", name, m[0])
			}
			if (name == "src" || name == "href" || name == "action") && codeScheme.MatchString(html.UnescapeString(a[2])) {
				return fmt.Errorf("page has a code URL: %s", m[0])
			}
		}
	}
	if text := elemRe.ReplaceAllString(rest, ""); strings.ContainsAny(text, `<>"`) {
		return fmt.Errorf("page text has a bare markup character: %q", text)
	}
	for _, v := range inputs {
		if strings.ContainsAny(v, `<>"'&`) && strings.Contains(page, v) {
			return fmt.Errorf("input %q appears unescaped", v)
		}
	}
	return nil
}

func escaped(t *testing.T, page string, tags, attrs map[string]bool, inputs ...string) {
	t.Helper()
	if err := unescaped(page, tags, attrs, inputs...); err != nil {
		t.Fatal(err)
	}
}

// texts returns the unescaped contents of every match of re's first group.
func texts(page string, re *regexp.Regexp) []string {
	var out []string
	for _, m := range re.FindAllStringSubmatch(page, -1) {
		out = append(out, html.UnescapeString(m[1]))
	}
	return out
}

// one checks that re matches page once and that its group reads want once unescaped.
func one(t *testing.T, page, what string, re *regexp.Regexp, want string) {
	t.Helper()
	got := texts(page, re)
	if len(got) != 1 || got[0] != want {
		t.Fatalf("%s = %q, want [%q]", what, got, want)
	}
}

// urlAttr checks a URL attribute: a code scheme becomes html/template's #ZgotmplZ, and nothing the
// input had can close the attribute.
func urlAttr(t *testing.T, page, what string, re *regexp.Regexp, in string) {
	t.Helper()
	got := texts(page, re)
	if len(got) != 1 {
		t.Fatalf("%s: %d matches, want 1", what, len(got))
	}
	if codeScheme.MatchString(in) && !strings.HasPrefix(got[0], "#ZgotmplZ") {
		t.Fatalf("%s for %q is %q, want #ZgotmplZ", what, in, got[0])
	}
}

var (
	titleRe   = regexp.MustCompile(`(?s)<title>(.*?)</title>`)
	requestRe = regexp.MustCompile(`<input type="hidden" name="request_id" value="([^"]*)">`)
	csrfRe    = regexp.MustCompile(`<input type="hidden" name="csrf_token" value="([^"]*)">`)
	actionRe2 = regexp.MustCompile(`<form method="post" action="([^"]*)"`)
	logoRe    = regexp.MustCompile(`<img class="logo" src="([^"]*)"`)
	appRe     = regexp.MustCompile(`(?s)<span>(.*?)</span></p>`)
	userRe    = regexp.MustCompile(`<input id="username"[^>]* value="([^"]*)"`)
	leadRe    = regexp.MustCompile(`(?s)<p class="lead">(.*?)</p>`)
	h1Re      = regexp.MustCompile(`(?s)<h1>(.*?)</h1>`)
	whoRe     = regexp.MustCompile(`(?s)<strong class="who-name">(.*?)</strong>`)
	scopeLead = regexp.MustCompile(`(?s)<p class="lead" id="scopes-lead">(.*?)</p>`)
	scopeRe   = regexp.MustCompile(`(?s)<div><strong>(.*?)</strong>`)
	returnRe  = regexp.MustCompile(`(?s)<p class="return">(.*?)</p>`)
	cssRe     = regexp.MustCompile(`<link rel="stylesheet" href="([^"]*)">`)
)

// formShown checks the parts of the form and the app every login and consent page shows.
func formShown(t *testing.T, page, lang, title string, f Form) {
	t.Helper()
	m := Messages(lang)
	one(t, page, "title", titleRe, shown(fmt.Sprintf(m["page.title"], title, m["brand"])))
	one(t, page, "request_id", requestRe, shown(f.RequestID))
	one(t, page, "csrf_token", csrfRe, shown(f.CSRF))
	one(t, page, "app line", appRe, shown(fmt.Sprintf(m["app.requesting"], f.Client.Name)))
	urlAttr(t, page, "form action", actionRe2, f.Action)
	if f.Client.LogoURI == "" {
		if logoRe.MatchString(page) {
			t.Fatal("a logo is shown for a client without one")
		}
	} else {
		urlAttr(t, page, "logo", logoRe, f.Client.LogoURI)
	}
}

func TestLogin_EscapesHostileInputInEveryStateAndLanguage(t *testing.T) {
	p, n := newPages(t), 0
	tags, attrs := markup(t)
	for _, lang := range escapingLangs {
		m := Messages(lang)
		for pi, problem := range loginProblems {
			for i := range hostile {
				for _, noLogo := range []bool{false, true} {
					f := hostileForm(i + pi)
					if noLogo {
						f.Client.LogoURI = ""
					}
					username := hostile[(i+pi+7)%len(hostile)]
					var b bytes.Buffer
					if err := p.Login(&b, lang, f, username, problem); err != nil {
						t.Fatal(err)
					}
					page := b.String()
					escaped(t, page, tags, attrs, f.Action, f.RequestID, f.CSRF, f.Client.Name, f.Client.LogoURI, username)
					title := m["login.title"]
					if problem.Any() {
						title = fmt.Sprintf(m["page.title.err"], title)
					}
					formShown(t, page, lang, title, f)
					one(t, page, "username", userRe, shown(username))
					one(t, page, "lead", leadRe, shown(fmt.Sprintf(m["login.lead"], f.Client.Name)))
					n++
				}
			}
		}
	}
	t.Logf("%d login pages checked", n)
}

func TestConsent_EscapesHostileInputInEveryStateAndLanguage(t *testing.T) {
	p := newPages(t)
	tags, attrs := markup(t)
	for _, lang := range escapingLangs {
		m := Messages(lang)
		for si, scopes := range consentScopes {
			for i := range hostile {
				for _, noLogo := range []bool{false, true} {
					f := hostileForm(i + si)
					if noLogo {
						f.Client.LogoURI = ""
					}
					user := hostile[(i+si+11)%len(hostile)]
					var b bytes.Buffer
					if err := p.Consent(&b, lang, f, user, scopes, nil); err != nil {
						t.Fatal(err)
					}
					page := b.String()
					escaped(t, page, tags, attrs, append([]string{f.Action, f.RequestID, f.CSRF, f.Client.Name, f.Client.LogoURI, user}, scopes...)...)
					formShown(t, page, lang, fmt.Sprintf(m["consent.title"], f.Client.Name), f)
					one(t, page, "heading", h1Re, shown(fmt.Sprintf(m["consent.title"], f.Client.Name)))
					one(t, page, "user", whoRe, shown(user))
					one(t, page, "scopes lead", scopeLead, shown(fmt.Sprintf(m["consent.lead"], f.Client.Name)))
					var want []string
					for _, s := range scopes {
						title := m["scope."+oauth.CanonicalScope(s)+".title"]
						if title == "" {
							title = s
						}
						want = append(want, title)
					}
					if got := texts(page, scopeRe); !slices.Equal(got, want) {
						t.Fatalf("scopes shown %q, want %q", got, want)
					}
					if to := f.ReturnTo(); to == "" {
						if returnRe.MatchString(page) {
							t.Fatalf("a return host is shown for redirect URI %q", f.RedirectURI)
						}
					} else {
						one(t, page, "return host", returnRe, shown(fmt.Sprintf(m["consent.return"], to)))
					}
				}
			}
		}
	}
}

func TestError_EscapesTheAssetsPathInEveryKindAndLanguage(t *testing.T) {
	for _, assets := range []string{"/assets/", "javascript:alert(1)//", `"><script>alert(1)</script>`} {
		p, err := New(assets)
		if err != nil {
			t.Fatal(err)
		}
		tags, attrs := markup(t)
		for _, lang := range escapingLangs {
			m := Messages(lang)
			for _, kind := range append(slices.Clone(errorKinds), "nonsense", "") {
				var b bytes.Buffer
				if err := p.Error(&b, lang, kind); err != nil {
					t.Fatal(err)
				}
				page := b.String()
				escaped(t, page, tags, attrs, assets)
				urlAttr(t, page, "stylesheet", cssRe, assets)
				k := kind
				if !slices.Contains(errorKinds, k) {
					k = "bad"
				}
				one(t, page, "heading", h1Re, m["error."+k+".heading"])
			}
		}
	}
}

// TestEscaped_CatchesWhatItMustCatch feeds the page checks what a renderer that does not
// escape would produce, so that the tests above can fail.
func TestEscaped_CatchesWhatItMustCatch(t *testing.T) {
	tags, attrs := markup(t)
	for name, page := range map[string]string{
		"script element":     `<p>Hi <script>alert(1)</script></p>`,
		"injected attribute": `<input type="hidden" name="x" value="" onmouseover="alert(1)">`,
		"foreign element":    `<p><iframe src="https://evil.example"></iframe></p>`,
		"code URL":           `<img class="logo" src="javascript:alert(1)">`,
		"bare markup":        `<p>a < b</p>`,
		"raw input":          `<p>Tom & Jerry's</p>`,
	} {
		if unescaped(page, tags, attrs, "Tom & Jerry's") == nil {
			t.Errorf("%s: page %q passes the checks", name, page)
		}
	}
	if err := unescaped(`<p class="lead">Tom &amp; Jerry&#39;s</p>`, tags, attrs, "Tom & Jerry's"); err != nil {
		t.Errorf("an escaped page fails the checks: %v", err)
	}
}
