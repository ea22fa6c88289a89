package pages

import (
	"bytes"
	"fmt"
	"html"
	"io/fs"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"testing/fstest"
	"unicode"

	"github.com/acmebank/authserver/shared/oauth"
)

var verbRe = regexp.MustCompile(`%(\[\d+\])?[a-zA-Z%]`)

// verbs lists a message's format verbs, sorted, so that two translations can be compared.
func verbs(s string) []string {
	v := verbRe.FindAllString(s, -1)
	sort.Strings(v)
	return v
}

func TestCatalogue_EveryKeyInEveryLanguageWithTheSameVerbs(t *testing.T) {
	en := catalogue[Locales[0]]
	if len(en) == 0 {
		t.Fatal("the default language has no catalogue")
	}
	for _, lang := range Locales {
		m, ok := catalogue[lang]
		if !ok {
			t.Errorf("language %s is offered but has no catalogue", lang)
			continue
		}
		for k, ev := range en {
			v, ok := m[k]
			switch {
			case !ok:
				t.Errorf("%s: key %q missing", lang, k)
			case strings.TrimSpace(v) == "":
				t.Errorf("%s: key %q is empty", lang, k)
			case !slices.Equal(verbs(v), verbs(ev)):
				t.Errorf("%s: key %q has verbs %v, English has %v", lang, k, verbs(v), verbs(ev))
			}
		}
		for k := range m {
			if _, ok := en[k]; !ok {
				t.Errorf("%s: key %q is not in the default catalogue", lang, k)
			}
		}
	}
	for lang := range catalogue {
		if !slices.Contains(Locales, lang) {
			t.Errorf("catalogue %s is not listed in Locales", lang)
		}
	}
}

// keysInCode are the keys the Go code builds at run time rather than naming in a template.
func keysInCode() []string {
	keys := []string{"brand", "page.title", "page.title.err", "login.title", "consent.title"}
	for _, s := range oauth.KnownScopes {
		keys = append(keys, "scope."+s+".title", "scope."+s+".desc")
	}
	for _, k := range errorKinds {
		keys = append(keys, "error."+k+".heading", "error."+k+".message", "error."+k+".action")
	}
	keys = append(keys, "detail.payment.heading", "detail.accounts.heading", "detail.other.heading", "detail.amount",
		"detail.amount.format", "detail.payee", "detail.payee.account", "detail.reference", "detail.date",
		"detail.perms", "detail.accounts", "detail.accounts.all", "detail.expiry", "detail.account.bban",
		"detail.account.scheme", "detail.date.format")
	for _, p := range []string{"balances", "transactions", "details", "beneficiaries", "standing_orders"} {
		keys = append(keys, "detail.perm."+p)
	}
	for i := 1; i <= 12; i++ {
		keys = append(keys, fmt.Sprintf("month.%d", i))
	}
	return keys
}

func templateSources(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := fs.WalkDir(files, "templates", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(path)
		out[path] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The templates read the catalogue as index $m "key", $m bound once per template to .Common.M,
// so that the keys can be checked here.
var (
	keyRe       = regexp.MustCompile(`index \$m "([^"]+)"`)
	otherReadRe = regexp.MustCompile(`index \$?\.(Common\.)?M\b|\.M\.`)
)

func TestCatalogue_HasEveryKeyTheTemplatesAndCodeUse(t *testing.T) {
	used := keysInCode()
	inTemplates := 0
	for path, src := range templateSources(t) {
		if !strings.HasSuffix(path, ".html") {
			continue
		}
		for _, m := range keyRe.FindAllStringSubmatch(src, -1) {
			used = append(used, m[1])
			inTemplates++
		}
		if otherReadRe.MatchString(src) {
			t.Errorf("%s reads the catalogue otherwise than index $m \"key\"; bind {{$m := .Common.M}} and use index $m \"key\" so keys can be checked", path)
		}
	}
	if inTemplates < 50 {
		t.Errorf("found %d catalogue keys in the templates: the pattern no longer matches how they read it", inTemplates)
	}
	for _, lang := range Locales {
		for _, k := range used {
			if catalogue[lang][k] == "" {
				t.Errorf("%s: key %q is used but not in the catalogue", lang, k)
			}
		}
	}
}

var (
	actionRe  = regexp.MustCompile(`(?s)\{\{.*?\}\}`)
	commentRe = regexp.MustCompile(`(?s)<!--.*?-->`)
	tagRe     = regexp.MustCompile(`(?s)<[^>]*>`)
	attrRe    = regexp.MustCompile(`([a-zA-Z-]+)\s*=\s*"([^"]*)"`)
	// Attributes whose value a person sees or hears.
	visibleAttrs = map[string]bool{"alt": true, "title": true, "aria-label": true, "placeholder": true, "aria-description": true, "aria-roledescription": true, "aria-valuetext": true}
)

func hasLetterOrDigit(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0
}

// literalText returns what a template would show a person that does not come from an action:
// text between tags and visible attributes, with every {{...}} removed.
func literalText(src string) []string {
	src = commentRe.ReplaceAllString(actionRe.ReplaceAllString(src, "\x00"), "")
	var out []string
	for _, tag := range tagRe.FindAllString(src, -1) {
		if strings.HasPrefix(tag, "<!doctype") {
			continue
		}
		for _, a := range attrRe.FindAllStringSubmatch(tag, -1) {
			name := strings.ToLower(a[1])
			visible := visibleAttrs[name] || (name == "value" && regexp.MustCompile(`type="(submit|button|reset)"`).MatchString(tag) && strings.HasPrefix(tag, "<input"))
			if visible && hasLetterOrDigit(a[2]) {
				out = append(out, tag)
			}
		}
	}
	for _, text := range tagRe.Split(src, -1) {
		if hasLetterOrDigit(text) {
			out = append(out, strings.TrimSpace(text))
		}
	}
	return out
}

func TestTemplates_HoldNoLiteralUserVisibleText(t *testing.T) {
	for path, src := range templateSources(t) {
		if !strings.HasSuffix(path, ".html") {
			continue
		}
		if got := literalText(src); len(got) > 0 {
			t.Errorf("%s shows text that is not from the catalogue: %q", path, got)
		}
	}
}

func TestLiteralText_FindsWhatItMustFind(t *testing.T) {
	cases := []struct {
		name, src string
		found     bool
	}{
		{"text between tags", `<p>Hello</p>`, true},
		{"text beside an action", `<p>{{index .M "x"}} now</p>`, true},
		{"alt text", `<img alt="logo">`, true},
		{"aria-label", `<span aria-label="Bank">{{.X}}</span>`, true},
		{"submit value", `<input type="submit" value="Go">`, true},
		{"catalogue only", `<p>{{index .M "x"}}</p><img alt="{{index .M "y"}}">`, false},
		{"hidden input value", `<input type="hidden" name="action" value="login">`, false},
		{"button value", `<button name="decision" value="allow">{{index .M "a"}}</button>`, false},
		{"punctuation", `<p>{{.A}} · {{.B}}</p>`, false},
		{"svg path", `<svg><path d="M12 2 2 7v2h20"/></svg>`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := len(literalText(c.src)) > 0; got != c.found {
				t.Errorf("literalText(%q) found=%v, want %v", c.src, got, c.found)
			}
		})
	}
}

func TestStylesheet_GeneratesNoText(t *testing.T) {
	css, err := files.ReadFile("templates/app.css")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?:^|[;{\s])content\s*:\s*([^;}]*)`).FindAllStringSubmatch(string(css), -1) {
		if hasLetterOrDigit(strings.Trim(m[1], `"' `)) && !strings.Contains(m[1], "none") {
			t.Errorf("the stylesheet shows text %q", m[1])
		}
	}
	if regexp.MustCompile(`@import|url\(\s*["']?(https?:)?//`).Match(css) {
		t.Error("the stylesheet loads something from elsewhere")
	}
}

func TestNegotiate_UILocalesThenAcceptLanguageThenEnglish(t *testing.T) {
	cases := []struct {
		name, ui, accept, want string
	}{
		{"nothing asked", "", "", "en"},
		{"ui_locales French", "fr", "en-US,en;q=0.9", "fr"},
		{"ui_locales regional French", "fr-CA", "", "fr"},
		{"first supported of ui_locales", "de fr en", "", "fr"},
		{"unsupported ui_locales falls to Accept-Language", "de", "fr-FR,fr;q=0.9", "fr"},
		{"malformed ui_locales ignored", "!!", "fr", "fr"},
		{"Accept-Language French", "", "fr-FR,fr;q=0.9,en;q=0.5", "fr"},
		{"Accept-Language preference order", "", "en;q=0.5,fr;q=0.9", "fr"},
		{"Accept-Language unsupported", "", "de-DE,ja", "en"},
		{"Accept-Language malformed", "", ";;;q=x", "en"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Negotiate(c.ui, c.accept); got != c.want {
				t.Errorf("Negotiate(%q, %q) = %q, want %q", c.ui, c.accept, got, c.want)
			}
		})
	}
}

var (
	hiddenRe    = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`)
	idRe        = regexp.MustCompile(`\sid="([^"]+)"`)
	describedRe = regexp.MustCompile(`<input[^>]*\sid="([^"]+)"[^>]*aria-describedby="([^"]+)"`)
)

func newPages(t testing.TB) *Pages {
	t.Helper()
	p, err := New("/assets/")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func testForm() Form {
	return Form{Action: "/authorize", RequestID: "req-1", CSRF: "csrf-1", RedirectURI: "https://app.example:8443/cb",
		Client: &oauth.Client{ID: "c", Name: "Budget <App>", LogoURI: "https://app.example/logo.png"}}
}

// checkPage holds for every rendered page: the language, no formatting slip, and every
// aria-describedby naming an element of the page.
func checkPage(t *testing.T, lang, html string) {
	t.Helper()
	if !strings.Contains(html, `<html lang="`+lang+`">`) {
		t.Errorf("page is not marked as %s", lang)
	}
	if strings.Contains(html, "%!") || strings.Contains(html, "MISSING") {
		t.Errorf("page has a formatting error: %s", html)
	}
	if strings.Contains(html, "Budget <App>") {
		t.Error("the client's name is not escaped")
	}
	ids := map[string]bool{}
	for _, m := range idRe.FindAllStringSubmatch(html, -1) {
		if ids[m[1]] {
			t.Errorf("id %q appears twice", m[1])
		}
		ids[m[1]] = true
	}
	for _, m := range describedRe.FindAllStringSubmatch(html, -1) {
		for _, ref := range strings.Fields(m[2]) {
			if !ids[ref] {
				t.Errorf("input %s is described by %q, which is not on the page", m[1], ref)
			}
		}
	}
}

func hidden(html string) map[string]string {
	out := map[string]string{}
	for _, m := range hiddenRe.FindAllStringSubmatch(html, -1) {
		out[m[1]] = m[2]
	}
	return out
}

func TestLogin_TiesEachErrorToItsField(t *testing.T) {
	cases := []struct {
		name        string
		problem     LoginProblem
		describedBy map[string]string // input id -> id of the message it must be described by
		invalid     []string
		autofocus   string
		messageKeys []string
	}{
		{"first showing", LoginProblem{}, map[string]string{"username": "username-hint"}, nil, "username", nil},
		{"refused credentials", LoginProblem{Failed: true}, map[string]string{"username": "login-error", "password": "login-error"},
			[]string{"username", "password"}, "password", []string{"login.error"}},
		{"username missing", LoginProblem{MissingUsername: true}, map[string]string{"username": "username-error"},
			[]string{"username"}, "username", []string{"login.missing.user", "login.missing.summary"}},
		{"password missing", LoginProblem{MissingPassword: true}, map[string]string{"password": "password-error"},
			[]string{"password"}, "password", []string{"login.missing.pass"}},
		{"both missing", LoginProblem{MissingUsername: true, MissingPassword: true},
			map[string]string{"username": "username-error", "password": "password-error"}, []string{"username", "password"}, "username",
			[]string{"login.missing.user", "login.missing.pass"}},
	}
	p := newPages(t)
	for _, lang := range Locales {
		for _, c := range cases {
			t.Run(lang+"/"+c.name, func(t *testing.T) {
				var b bytes.Buffer
				if err := p.Login(&b, lang, testForm(), "alice", c.problem); err != nil {
					t.Fatal(err)
				}
				html := b.String()
				checkPage(t, lang, html)
				if h := hidden(html); h["request_id"] != "req-1" || h["csrf_token"] != "csrf-1" || h["action"] != "login" {
					t.Errorf("hidden fields = %v", h)
				}
				for _, attr := range []string{`autocomplete="username"`, `autocomplete="current-password"`, `name="username"`, `name="password"`, `for="username"`, `for="password"`, `value="alice"`} {
					if !strings.Contains(html, attr) {
						t.Errorf("login page lacks %s", attr)
					}
				}
				described := map[string]string{}
				for _, m := range describedRe.FindAllStringSubmatch(html, -1) {
					described[m[1]] = m[2]
				}
				for input, msg := range c.describedBy {
					if !slices.Contains(strings.Fields(described[input]), msg) {
						t.Errorf("input %s is described by %q, want it to include %q", input, described[input], msg)
					}
				}
				for _, input := range []string{"username", "password"} {
					re := regexp.MustCompile(`<input id="` + input + `"[^>]*aria-invalid="true"`)
					if got, want := re.MatchString(html), slices.Contains(c.invalid, input); got != want {
						t.Errorf("input %s aria-invalid=%v, want %v", input, got, want)
					}
				}
				if got := regexp.MustCompile(`<input id="([a-z]+)"[^>]* autofocus`).FindAllStringSubmatch(html, -1); len(got) != 1 || got[0][1] != c.autofocus {
					t.Errorf("autofocus on %v, want only %s", got, c.autofocus)
				}
				for _, k := range c.messageKeys {
					if !strings.Contains(html, htmlText(Messages(lang)[k])) {
						t.Errorf("page lacks message %s", k)
					}
				}
				if c.problem.Any() != strings.Contains(html, `role="alert"`) {
					t.Errorf("alert shown=%v, want %v", !c.problem.Any(), c.problem.Any())
				}
				wantTitle := Messages(lang)["login.title"]
				if c.problem.Any() {
					wantTitle = fmt.Sprintf(Messages(lang)["page.title.err"], wantTitle)
				}
				if !strings.Contains(html, "<title>"+htmlText(wantTitle)) {
					t.Errorf("title does not start with %q", wantTitle)
				}
			})
		}
	}
}

// htmlText is how html/template writes a message into text.
func htmlText(s string) string {
	r := strings.NewReplacer("&", "&amp;", "'", "&#39;", "<", "&lt;", ">", "&gt;", `"`, "&#34;")
	return r.Replace(s)
}

func TestConsent_ShowsAppUserScopesAndEqualChoices(t *testing.T) {
	p := newPages(t)
	for _, lang := range Locales {
		t.Run(lang, func(t *testing.T) {
			m := Messages(lang)
			var b bytes.Buffer
			scopes := oauth.ParseScopes("openid email bank:transfers.write")
			if err := p.Consent(&b, lang, testForm(), "Alice Martin", scopes, nil); err != nil {
				t.Fatal(err)
			}
			html := b.String()
			checkPage(t, lang, html)
			if h := hidden(html); h["request_id"] != "req-1" || h["csrf_token"] != "csrf-1" || h["action"] != "consent" {
				t.Errorf("hidden fields = %v", h)
			}
			for _, want := range []string{
				"Alice Martin", `src="https://app.example/logo.png"`, "Budget &lt;App&gt;", "app.example:8443",
				htmlText(m["scope.openid.title"]), htmlText(m["scope.email.desc"]),
				htmlText(m["scope.bank:transfers:write.title"]), htmlText(m["consent.money"]),
				`value="switch"`, htmlText(m["consent.switch"]),
			} {
				if !strings.Contains(html, want) {
					t.Errorf("consent page lacks %q", want)
				}
			}
			if n := strings.Count(html, htmlText(m["consent.money"])); n != 1 {
				t.Errorf("money warning shown %d times, want once (transfers only)", n)
			}
			allow := regexp.MustCompile(`<button type="submit" name="decision" value="allow" class="([^"]*)">`).FindStringSubmatch(html)
			deny := regexp.MustCompile(`<button type="submit" name="decision" value="deny" class="([^"]*)">`).FindStringSubmatch(html)
			if allow == nil || deny == nil || allow[1] != deny[1] {
				t.Errorf("Allow and Deny must look alike: allow=%v deny=%v", allow, deny)
			}
		})
	}
}

func TestConsent_WithoutLogoShowsNoImage(t *testing.T) {
	p := newPages(t)
	f := testForm()
	f.Client.LogoURI = ""
	var b bytes.Buffer
	if err := p.Consent(&b, "en", f, "Alice", oauth.Scopes{"openid"}, nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "<img") {
		t.Error("an image is shown for a client with no logo")
	}
}

func TestForm_ReturnTo(t *testing.T) {
	cases := []struct{ uri, want string }{
		{"https://app.example/cb", "app.example"},
		{"http://127.0.0.1:4499/callback", "127.0.0.1:4499"},
		{"com.example.app:/oauth", "com.example.app"},
		{"", ""},
		{"::bad", ""},
	}
	for _, c := range cases {
		if got := (Form{RedirectURI: c.uri}).ReturnTo(); got != c.want {
			t.Errorf("ReturnTo(%q) = %q, want %q", c.uri, got, c.want)
		}
	}
}

func TestError_SaysWhatWentWrongAndWhatToDo(t *testing.T) {
	p := newPages(t)
	for _, lang := range Locales {
		m := Messages(lang)
		for _, kind := range append(slices.Clone(errorKinds), "no-such-kind") {
			t.Run(lang+"/"+kind, func(t *testing.T) {
				var b bytes.Buffer
				if err := p.Error(&b, lang, kind); err != nil {
					t.Fatal(err)
				}
				html := b.String()
				checkPage(t, lang, html)
				k := kind
				if !slices.Contains(errorKinds, k) {
					k = "bad"
				}
				for _, part := range []string{"heading", "message", "action"} {
					if !strings.Contains(html, htmlText(m["error."+k+"."+part])) {
						t.Errorf("error page lacks its %s", part)
					}
				}
				if !strings.Contains(html, "<h1>"+htmlText(m["error."+k+".heading"])+"</h1>") {
					t.Error("the heading is not the page's h1")
				}
				if strings.Contains(html, "<form") {
					t.Error("an error page has a form")
				}
			})
		}
	}
}

func TestLoginAndConsent_WithoutClientAreAnErrorNotAPanic(t *testing.T) {
	p := newPages(t)
	var b bytes.Buffer
	if err := p.Login(&b, "en", Form{}, "", LoginProblem{}); err == nil {
		t.Error("login page rendered without a client")
	}
	if err := p.Consent(&b, "en", Form{}, "Alice", oauth.Scopes{"openid"}, nil); err == nil {
		t.Error("consent page rendered without a client")
	}
	if b.Len() != 0 {
		t.Errorf("a failed page wrote %d bytes", b.Len())
	}
}

// TestPages_RenderConcurrently shares one Pages between many goroutines, as the handlers do:
// every page is whole and identical whatever runs beside it.
func TestPages_RenderConcurrently(t *testing.T) {
	p := newPages(t)
	details := consentDetails(t, "Evil <b>Corp</b>") // the amount and dates go through x/text's printers
	var want [2]bytes.Buffer
	if err := p.Login(&want[0], "en", testForm(), "alice", LoginProblem{Failed: true}); err != nil {
		t.Fatal(err)
	}
	if err := p.Consent(&want[1], "fr", testForm(), "Alice", oauth.Scopes{"openid", "bank:transfers:write"}, details); err != nil {
		t.Fatal(err)
	}
	const goroutines = 64
	errs := make(chan error, goroutines)
	for g := range goroutines {
		go func() {
			var b bytes.Buffer
			for range 20 {
				b.Reset()
				var err error
				if g%2 == 0 {
					err = p.Login(&b, "en", testForm(), "alice", LoginProblem{Failed: true})
				} else {
					err = p.Consent(&b, "fr", testForm(), "Alice", oauth.Scopes{"openid", "bank:transfers:write"}, details)
				}
				if err == nil && !bytes.Equal(b.Bytes(), want[g%2].Bytes()) {
					err = fmt.Errorf("goroutine %d: page differs:\n%s", g, b.String())
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range goroutines {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// The data a page template executes on has no embedded struct: text/template finds a field
// promoted from one by a breadth-first search through the embedded structs, allocating, at
// every {{.Field}} of every request (a fifth of a login page's allocations), and a direct
// field at once. Common and Form are named fields (.Common.M, .Form.Client); a template that
// reads a field the old way fails New at start-up, since New renders every page.
func TestPageData_HasNoEmbeddedStruct(t *testing.T) {
	for _, data := range []any{LoginData{}, ConsentData{}, MFAData{}, TOTPData{}, RecoveryData{}, PasskeyAddData{}, ErrorData{}} {
		typ := reflect.TypeOf(data)
		for i := range typ.NumField() {
			if f := typ.Field(i); f.Anonymous {
				t.Errorf("%s embeds %s: name the field", typ.Name(), f.Name)
			}
		}
	}
}

// A template html/template cannot escape safely (here an attribute left open on one branch
// only) fails New, at start-up, instead of the first request that shows the page.
func TestNew_RefusesATemplateHTMLTemplateCannotEscape(t *testing.T) {
	fsys := fstest.MapFS{"templates/app.css": {Data: []byte("body{}")}, "templates/passkey.js": {Data: []byte("")}}
	names, err := fs.Glob(files, "templates/*.html")
	if err != nil || len(names) == 0 {
		t.Fatalf("templates: %v", err)
	}
	for _, path := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(path, "templates/"), ".html")
		src, err := files.ReadFile("templates/" + name + ".html")
		if err != nil {
			t.Fatal(err)
		}
		fsys["templates/"+name+".html"] = &fstest.MapFile{Data: src}
	}
	if _, err := load(fsys, "/assets/"); err != nil {
		t.Fatalf("the embedded templates copied: %v", err)
	}
	bad := strings.Replace(string(fsys["templates/error.html"].Data), "<h1>", `{{if .Heading}}<h1 title="{{end}}`, 1)
	fsys["templates/error.html"] = &fstest.MapFile{Data: []byte(bad)}
	if _, err := load(fsys, "/assets/"); err == nil {
		t.Fatal("New accepted a template whose branches end in different contexts")
	}
}

// TestMFA_UsedCodeSaysWaitForTheNext: a refused code that was right but already used gets the
// hint to wait for the app's next code, in every language; any other refusal the one message.
func TestMFA_UsedCodeSaysWaitForTheNext(t *testing.T) {
	p := newPages(t)
	f := Form{Action: "/a", RequestID: "ar_1", CSRF: "c", Client: &oauth.Client{Name: "App"}}
	for _, lang := range Locales {
		m := Messages(lang)
		for _, tc := range []struct {
			st        MFAState
			want, not string
		}{
			{MFAState{HasTOTP: true, Failed: true, CodeUsed: true}, m["mfa.error.used"], m["mfa.error"]},
			{MFAState{HasTOTP: true, Failed: true}, m["mfa.error"], m["mfa.error.used"]},
		} {
			var b strings.Builder
			if err := p.MFA(&b, lang, f, tc.st); err != nil {
				t.Fatal(err)
			}
			page := html.UnescapeString(b.String())
			if !strings.Contains(page, tc.want) || strings.Contains(page, tc.not) {
				t.Errorf("%s %+v: want %q and not %q in the page", lang, tc.st, tc.want, tc.not)
			}
		}
	}
}
