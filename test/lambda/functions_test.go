package lambda_test

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFunctions_EveryFunctionDirectoryRunsUnderTheHarness: a function added under functions/ is
// in this harness's table (and so built and started under the Runtime API, with the template's
// logical id), not silently left out.
func TestFunctions_EveryFunctionDirectoryRunsUnderTheHarness(t *testing.T) {
	dirs, err := os.ReadDir(filepath.Join(moduleRoot, "functions"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		n++
		if _, ok := functions[d.Name()]; !ok {
			t.Errorf("functions/%s is not in test/lambda's functions table", d.Name())
		}
	}
	if n != len(functions) {
		t.Errorf("functions/ has %d function directories, the table %d", n, len(functions))
	}
}
