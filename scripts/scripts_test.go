// Package scripts_test checks the command lines of the project's scripts that a newcomer types
// first: --help prints the usage and starts nothing, a mistyped fuzz target is an error.
package scripts_test

import (
	"bytes"
	"errors"
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
