package config

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

//go:generate go test -run ^TestREADME_SettingsTableIsGeneratedFromTheDeclarations$ -update .

var update = flag.Bool("update", false, "rewrite README.md's settings table from the declarations")

const (
	tableBegin = "<!-- settings:begin"
	tableEnd   = "<!-- settings:end -->"
)

// TestREADME_SettingsTableIsGeneratedFromTheDeclarations fails when the table between the
// settings markers of README.md is not what Markdown prints from the declarations; with
// -update (go generate ./shared/config) it rewrites it.
func TestREADME_SettingsTableIsGeneratedFromTheDeclarations(t *testing.T) {
	path := filepath.Join("..", "..", "README.md")
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	begin := strings.Index(s, tableBegin)
	end := strings.Index(s, tableEnd)
	if begin < 0 || end < begin {
		t.Fatalf("README.md has no %q ... %q markers around the settings table", tableBegin, tableEnd)
	}
	begin += strings.Index(s[begin:], "\n") + 1
	var table bytes.Buffer
	if err := Markdown(&table); err != nil {
		t.Fatal(err)
	}
	if s[begin:end] == table.String() {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(s[:begin]+table.String()+s[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README.md's settings table differs from the declarations in shared/config/settings.go; run `go generate ./shared/config` to regenerate it")
}

// TestSettings_EveryDeclaredDefaultParses: a declared default is a value its parser accepts,
// so Defaults applies every one (it ignores a parse error only because none can happen).
func TestSettings_EveryDeclaredDefaultParses(t *testing.T) {
	for _, s := range Settings() {
		if s.Default == "" {
			continue
		}
		var c Config
		if err := s.parse(&c, s.Default); err != nil {
			t.Errorf("%s: default %q does not parse: %v", s.Name, s.Default, err)
		}
	}
}

// TestSettings_EachDeclaredOnceWithADoc: one declaration per name and per flag, each with a
// one-line doc, and each read by FromLookup (a recording lookup sees every name asked).
func TestSettings_EachDeclaredOnceWithADoc(t *testing.T) {
	names, flags := map[string]bool{}, map[string]bool{}
	for _, s := range Settings() {
		if !strings.HasPrefix(s.Name, "AUTH_") || names[s.Name] {
			t.Errorf("%q: not an AUTH_ name, or declared twice", s.Name)
		}
		names[s.Name] = true
		if s.Flag != "" && flags[s.Flag] {
			t.Errorf("%s: flag --%s declared twice", s.Name, s.Flag)
		}
		flags[s.Flag] = true
		if s.Doc == "" || strings.Contains(s.Doc, "\n") || s.parse == nil {
			t.Errorf("%s: want a one-line doc and a parser", s.Name)
		}
	}
	asked := map[string]bool{}
	if _, err := FromLookup(func(k string) (string, bool) { asked[k] = true; return "", false }); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(asked, names) {
		t.Errorf("FromLookup asked for %v, the declarations are %v", asked, names)
	}
}

// TestDefaults_AreTheDocumentedOnes pins the declared defaults to the values the service had
// before they were declared (README's former table), so the declarations changed none.
func TestDefaults_AreTheDocumentedOnes(t *testing.T) {
	c := Defaults()
	got := []any{c.BaseURL, c.Store, c.PendingMB, c.DataDir, c.KeyBackend, c.KeyRotation, c.Lifetimes.AccessToken.String(),
		c.Lifetimes.RefreshToken.String(), c.Lifetimes.Grant.String(), c.Lifetimes.Code.String(), c.Lifetimes.IDToken.String(),
		c.Lifetimes.Session.String(), c.Lifetimes.Request.String(), c.ClientCacheTTL.String(), c.KeyCacheTTL.String(),
		c.JWKSMaxAge.String(), c.RotationPeriod.String(), c.LogLevel, c.LogFormat, c.Argon2Time, c.Argon2MemoryKiB,
		c.LoginMaxFailures, c.LoginFailWindow.String(), c.RateLimit, strings.Join(c.IDTokenAlgs, ","), c.Addr, c.SCA.Always, c.SCA.Every,
		len(c.SCA.Scopes) > 0, c.RequirePAR, c.NoSync, len(c.IntrospectionClients), len(c.RouteScopes) > 0}
	want := []any{"http://127.0.0.1:8080", "embedded", 64, "data", "local", true, "1h0m0s",
		"720h0m0s", "2160h0m0s", "2m0s", "1h0m0s",
		"8h0m0s", "15m0s", "30s", "1m0s",
		"1h0m0s", "720h0m0s", "info", "json", uint32(2), uint32(19 * 1024),
		5, "15m0s", true, "RS256,PS256,ES256", "127.0.0.1:8080", false, c.SCA.Every,
		true, false, false, 0, true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaults\n got %v\nwant %v", got, want)
	}
}

// TestUsage_ListsEverySettingWithItsDefaultAndDoc: the --help text names every declared setting
// with its default and doc.
func TestUsage_ListsEverySettingWithItsDefaultAndDoc(t *testing.T) {
	var b bytes.Buffer
	if err := Usage(&b); err != nil {
		t.Fatal(err)
	}
	for _, s := range Settings() {
		line := s.Name + " (default "
		if !strings.Contains(b.String(), line) || !strings.Contains(b.String(), strings.ReplaceAll(s.Doc, "`", "")) {
			t.Errorf("usage lacks %s with its default and doc:\n%s", s.Name, b.String())
		}
	}
}

// TestConfig_LinksNoKeyPackageButTheLeafPolicy: the dependency between configuration and keys
// goes one way. config links shared/keys/keypolicy (a leaf: the standard library only) and no
// other key package, so shared/keys and its backends may import config.
func TestConfig_LinksNoKeyPackageButTheLeafPolicy(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".", "../keys/keypolicy").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/acmebank/authserver/"
	var policyDeps bool
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, module+"shared/keys") && pkg != module+"shared/keys/keypolicy" {
			t.Errorf("config links %s", pkg)
		}
		policyDeps = policyDeps || pkg == module+"shared/keys/keypolicy"
	}
	if !policyDeps {
		t.Error("config does not link keypolicy: the key timing is not checked at load")
	}
	leaf, err := exec.Command("go", "list", "-deps", "../keys/keypolicy").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(leaf)) {
		if strings.Contains(pkg, ".") && pkg != module+"shared/keys/keypolicy" {
			t.Errorf("keypolicy links %s: it must stay a leaf of the standard library", pkg)
		}
	}
}
