package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goTestJSON runs the real `go test -json` on a throwaway module holding the given files and
// returns its stream (its exit status is the counter's business, not the test's).
func goTestJSON(t *testing.T, files map[string]string) []byte {
	t.Helper()
	dir := t.TempDir()
	files["go.mod"] = "module example.test/m\n\ngo 1.21\n"
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "test", "-json", "./...")
	cmd.Dir = dir
	out, _ := cmd.Output()
	if len(out) == 0 {
		t.Fatal("go test -json wrote nothing")
	}
	return out
}

func TestCountsPassedFailedAndSkippedTestsWithSubtestsAndShowsOnlyFailures(t *testing.T) {
	stream := goTestJSON(t, map[string]string{
		"a/a_test.go": `package a
import "testing"
func TestPasses(t *testing.T) { t.Log("quiet"); t.Run("sub", func(t *testing.T) {}) }
func TestSkips(t *testing.T)  { t.Skip("not here") }
func TestFails(t *testing.T)  { t.Fatal("the reason") }
`,
	})
	var out bytes.Buffer
	c, err := count(bytes.NewReader(stream), &out)
	if err != nil {
		t.Fatal(err)
	}
	if c != (counts{Passed: 2, Failed: 1, Skipped: 1}) {
		t.Errorf("counts = %+v, want 2 passed (TestPasses and its subtest), 1 failed, 1 skipped", c)
	}
	if !strings.Contains(out.String(), "the reason") || strings.Contains(out.String(), "quiet") {
		t.Errorf("output shows a passing test's log or hides the failure's:\n%s", out.String())
	}
}

func TestCountsAPackageThatDoesNotBuildAsAFailure(t *testing.T) {
	stream := goTestJSON(t, map[string]string{
		"ok/ok_test.go":   "package ok\nimport \"testing\"\nfunc TestOK(t *testing.T) {}\n",
		"bad/bad_test.go": "package bad\nimport \"testing\"\nfunc TestBad(t *testing.T) { undefined() }\n",
	})
	var out bytes.Buffer
	c, err := count(bytes.NewReader(stream), &out)
	if err != nil {
		t.Fatal(err)
	}
	if c.Passed != 1 || c.Failed != 1 {
		t.Errorf("counts = %+v, want 1 passed and the unbuildable package as 1 failed", c)
	}
	if !strings.Contains(out.String(), "undefined") {
		t.Errorf("the build error is not shown:\n%s", out.String())
	}
}
