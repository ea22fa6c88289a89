package pages

import (
	"bytes"
	"fmt"
	"html/template"
	"os/exec"
	"strings"
	"testing"
	"text/template/parse"
)

// compileSource compiles a login page (plus consent and error pages that are never wrong)
// from the template source login.
func compileSource(t *testing.T, login string) (*programs, error) {
	t.Helper()
	src := `{{define "consent"}}x{{end}}{{define "error"}}x{{end}}{{define "login"}}` + login + `{{end}}`
	trees, err := parse.Parse("test", src, "", "", templateFuncs)
	if err != nil {
		t.Fatalf("parse %q: %v", login, err)
	}
	return compileTrees(trees)
}

func TestCompile_RefusesHolesItCannotEscapeExactly(t *testing.T) {
	cases := []struct{ name, src, wantErr string }{
		{"script element", `<script>var x = "{{.Username}}";</script>`, "<script>"},
		{"style element", `<style>p{color:red}</style>`, "<style>"},
		{"event handler", `<a onclick="{{.Username}}">`, "attribute onclick"},
		{"style attribute", `<p style="{{.Username}}">`, "attribute style"},
		{"srcset", `<img srcset="{{.Client.LogoURI}}">`, "attribute srcset"},
		{"unknown attribute", `<p data-x="{{.Username}}">`, "attribute data-x"},
		{"aria attribute html/template reads as a URL", `<p aria-sourceurl="{{.Username}}">`, "attribute aria-sourceurl"},
		{"unquoted attribute", `<input value={{.Username}}>`, "unquoted"},
		{"attribute name", `<input {{.Username}}>`, "no hole allowed inside"},
		{"tag name", `<{{.Username}}>`, "tag cut"},
		{"middle of a URL", `<a href="/x?u={{.Username}}">`, "whole value of URL attribute href"},
		{"two holes in a URL", `<img src="{{.Client.LogoURI}}{{.Username}}">`, "whole value of URL attribute src"},
		{"printf in a URL", `<form action="{{printf "/x/%s" .Action}}">`, "URL attribute takes one"},
		{"HTML comment", `<!-- {{.Username}} -->`, "comment"},
		{"unknown field", `{{.Password}}`, "no field .Password"},
		{"bool printed", `{{.FocusPassword}}`, "not a string"},
		{"other verb", `{{printf "%d" .Username}}`, "only %s verbs"},
		{"missing operand", `{{printf "%s %s" .Username}}`, "missing operand"},
		{"extra operand", `{{printf "%s" .Username .CSRF}}`, "extra operands"},
		{"condition function printed", `{{and .Username .CSRF}}`, "function and"},
		{"variable", `{{$x := .Username}}{{$x}}`, "single command"},
		{"pipeline", `{{.Username | printf "%s"}}`, "single command"},
		{"branches in different contexts", `<p{{if .Problem.Failed}}>{{end}}x</p>`, "different contexts"},
		{"page ends inside a tag", `<p class="x`, "ends in"},
		{"range over a string", `{{range .Username}}x{{end}}`, "cannot range"},
		{"recursion", `{{template "login" .}}`, "calls itself"},
		{"template without the dot", `{{template "error"}}`, "must pass the dot"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := compileSource(t, c.src)
			if err == nil {
				t.Fatalf("%s compiled; it must be refused", c.src)
			}
			if !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("error %q does not say %q", err, c.wantErr)
			}
		})
	}
}

func TestCompile_AcceptsWhatThePagesUse(t *testing.T) {
	cases := []string{
		`<title>{{printf "%s · %s" .Title "Bank"}}</title>`,
		`<a href="{{.AssetsPath}}app.css" class="a{{if .Problem.Failed}} b{{end}}">x</a>`,
		`<input value='{{.Username}}' aria-describedby="h{{if .Problem.Failed}} e{{else if .Problem.Any}} f{{end}}"{{if not .FocusPassword}} autofocus{{end}}>`,
		`{{with .ReturnTo}}<p>{{printf "to %s" .}}</p>{{end}}`,
		`{{if or .Problem.MissingUsername (not .Problem.Failed)}}<br/>{{end}}`,
		`<img src="{{.Client.LogoURI}}" alt="">`,
	}
	for _, src := range cases {
		if _, err := compileSource(t, src); err != nil {
			t.Errorf("%s: %v", src, err)
		}
	}
}

// TestEscapers_MatchHTMLTemplate runs every single byte, and the hostile strings, through the
// escapers and through html/template in the same contexts.
func TestEscapers_MatchHTMLTemplate(t *testing.T) {
	oracle := template.Must(template.New("").Parse(`{{define "text"}}{{.}}{{end}}{{define "attr"}}<p title="{{.}}">{{end}}{{define "url"}}<a href="{{.}}">{{end}}`))
	inputs := append([]string(nil), hostile...)
	for c := 0; c < 256; c++ {
		inputs = append(inputs, string([]byte{byte(c)}), "a"+string([]byte{byte(c)})+"%4", "%"+string([]byte{byte(c)})+"0")
	}
	for _, s := range inputs {
		for _, k := range []struct {
			name, prefix, suffix string
			escape               func([]byte, string) []byte
		}{{"text", "", "", appendHTML}, {"attr", `<p title="`, `">`, appendHTML}, {"url", `<a href="`, `">`, appendURL}} {
			var want bytes.Buffer
			if err := oracle.ExecuteTemplate(&want, k.name, s); err != nil {
				t.Fatal(err)
			}
			got := k.prefix + string(k.escape(nil, s)) + k.suffix
			if got != want.String() {
				t.Errorf("%s %q: got %q, html/template writes %q", k.name, s, got, want.String())
			}
		}
	}
}

func TestLogin_WithoutClientIsAnErrorNotAPanic(t *testing.T) {
	var b bytes.Buffer
	if err := newPages(t).Login(&b, "en", Form{}, "", LoginProblem{}); err == nil {
		t.Fatal("login page rendered without a client")
	}
	if b.Len() != 0 {
		t.Errorf("a failed page wrote %d bytes", b.Len())
	}
}

// TestPackage_ExecutesNoTemplates keeps the template engines (reflection-driven, and large in
// every binary that serves pages) out of the package: only their parser may be linked.
func TestPackage_ExecutesNoTemplates(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the package's dependencies")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "text/template" || dep == "html/template" {
			t.Errorf("package pages depends on %s", dep)
		}
	}
}

// TestPages_RenderConcurrently shares one Pages between goroutines, as the handlers do: every
// page is whole and identical whatever runs beside it (the output buffers are pooled).
func TestPages_RenderConcurrently(t *testing.T) {
	p := newPages(t)
	var want [2]bytes.Buffer
	if err := p.Login(&want[0], "en", testForm(), "alice", LoginProblem{Failed: true}); err != nil {
		t.Fatal(err)
	}
	if err := p.Consent(&want[1], "fr", testForm(), "Alice", []string{"openid", "bank:transfers:write"}); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			var b bytes.Buffer
			for range 200 {
				b.Reset()
				var err error
				if g%2 == 0 {
					err = p.Login(&b, "en", testForm(), "alice", LoginProblem{Failed: true})
				} else {
					err = p.Consent(&b, "fr", testForm(), "Alice", []string{"openid", "bank:transfers:write"})
				}
				if err == nil && !bytes.Equal(b.Bytes(), want[g%2].Bytes()) {
					err = fmt.Errorf("goroutine %d: page differs: %s", g, diffAt(b.String(), want[g%2].String()))
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
