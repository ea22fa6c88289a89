// Package scripts_test checks the command lines of the project's scripts that a newcomer types
// first: --help prints the usage and starts nothing, a mistyped fuzz target is an error.
package scripts_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// script runs a script of the repository with args and returns its output and exit code. A
// timeout fails the test: --help must not start the work the script does.
func script(t *testing.T, path string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{filepath.Join("..", path)}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return out.String(), exit.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return out.String(), 0
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s %v still runs after 20s: it started its work\n%s", path, args, out.String())
		return "", -1
	}
}

func TestHelp_PrintsTheUsageAndExitsZeroWithoutRunningAnything(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"scripts/test.sh", "Runs every test of the project"},
		{"scripts/fuzz.sh", "Runs every Go fuzz target"},
		{"test/fapi/run.sh", "Runs the FAPI 2.0 flows"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			out, code := script(t, tc.path, "--help")
			if code != 0 || !strings.Contains(out, tc.want) || !strings.Contains(out, "--help") {
				t.Errorf("%s --help: exit %d, want 0 and the usage:\n%s", tc.path, code, out)
			}
			for _, started := range []string{"==>", "== Fuzz", "ℹ ", "added ", "npm error", "go: "} {
				if strings.Contains(out, started) {
					t.Errorf("%s --help started work (%q):\n%s", tc.path, started, out)
				}
			}
		})
	}
}

func TestFuzz_UnknownTargetIsAnErrorNamingTheTargets(t *testing.T) {
	out, code := script(t, "scripts/fuzz.sh", "FuzzParseFrom")
	if code != 2 || !strings.Contains(out, "unknown fuzz target FuzzParseFrom") || !strings.Contains(out, "FuzzParseForm") {
		t.Errorf("fuzz.sh with a mistyped target: exit %d, want 2 and the list of targets:\n%s", code, out)
	}
	if strings.Contains(out, "no crash") {
		t.Errorf("fuzz.sh with a mistyped target claims a clean run:\n%s", out)
	}
}

func TestTestScript_UnknownArgumentIsAUsageError(t *testing.T) {
	out, code := script(t, "scripts/test.sh", "--bogus")
	if code != 2 || strings.Contains(out, "==>") {
		t.Errorf("test.sh --bogus: exit %d, want 2 before any step:\n%s", code, out)
	}
}

// testScriptHarness returns a bash script that defines scripts/test.sh's own helpers (the
// lines from step() to its EXIT trap, read from the file) and then runs body, from the
// repository root.
func testScriptHarness(t *testing.T, body string) string {
	t.Helper()
	data, err := os.ReadFile("test.sh")
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i, j := strings.Index(s, "\nstep() {"), strings.Index(s, "\ntrap 'total; stop_services' EXIT\n")
	if i < 0 || j < i {
		t.Fatal("scripts/test.sh no longer defines step() ... trap 'total; stop_services' EXIT")
	}
	return "set -euo pipefail\ncd ..\nstop_services() { :; }\n" + s[i:j+len("\ntrap 'total; stop_services' EXIT\n")] + body
}

// TestTestScript_EndsWithTheTotalOfEveryTestAndFailsOnAMissingToolUnderCI runs test.sh's
// helpers as the script does: a Go run and a Node test runner run are added up into the last
// line 'N passed, N failed'; a missing tool is a skipped step outside CI (named in the total)
// and a failure under CI=true (counted, exit 1).
func TestTestScript_EndsWithTheTotalOfEveryTestAndFailsOnAMissingToolUnderCI(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	dir := t.TempDir()
	nodeTest := filepath.Join(dir, "two.test.mjs")
	if err := os.WriteFile(nodeTest, []byte("import test from 'node:test';\ntest('a', () => {});\ntest('b', () => {});\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	body := `
step "go"
gotest -count=1 -run '^TestFromLookup_IntrospectionClientsAreTheTrimmedNonEmptyIDs$' ./shared/config/
step "node"
nodetest node --test --test-reporter=spec ` + nodeTest + `
step "a tool"
if require "No-such-tool" "install it" no-such-tool-xyz --version; then echo ran; else skipped_steps+=("a step (no tool)"); fi
current_step=""
`
	run := func(ci string) (string, int) {
		cmd := exec.Command("bash", "-c", testScriptHarness(t, body))
		cmd.Env = append(os.Environ(), "CI="+ci)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return string(out), exit.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	out, code := run("")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || lines[len(lines)-1] != "3 passed, 0 failed" || !strings.Contains(out, "steps not run: a step (no tool)") {
		t.Errorf("outside CI: exit %d, want 0, 'steps not run' and the last line '3 passed, 0 failed':\n%s", code, out)
	}
	out, code = run("true")
	lines = strings.Split(strings.TrimSpace(out), "\n")
	if code != 1 || lines[len(lines)-1] != "3 passed, 1 failed" || !strings.Contains(out, "required under CI=true") {
		t.Errorf("under CI=true: exit %d, want 1 and the last line '3 passed, 1 failed':\n%s", code, out)
	}
}

// TestTestScript_AGoRunThatFailsWithoutAFailedTestCountsAsOneFailure: a run that fails with
// nothing counted (here gotestsum itself cannot start) is a failure in the total and stops
// the run; gotestsum counts a package that does not build as a failure itself.
func TestTestScript_AGoRunThatFailsWithoutAFailedTestCountsAsOneFailure(t *testing.T) {
	body := `
step "go"
GOFLAGS=-modfile=/nonexistent/go.mod gotest -count=1 ./shared/config/
`
	cmd := exec.Command("bash", "-c", testScriptHarness(t, body))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("the run did not fail (err %v):\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if last := lines[len(lines)-1]; last != "0 passed, 1 failed" {
		t.Errorf("the last line is %q, want '0 passed, 1 failed':\n%s", last, out)
	}
}
