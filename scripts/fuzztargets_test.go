package scripts_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestFuzz_EveryTargetInTheTreeIsRunFromItsPackage: scripts/fuzz.sh (which CI runs) lists every
// Go fuzz target of the module under the package that declares it, so a target added, or moved
// with its package, is fuzzed and not silently skipped.
func TestFuzz_EveryTargetInTheTreeIsRunFromItsPackage(t *testing.T) {
	var declared []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != "..") {
			return filepath.SkipDir
		}
		if d.IsDir() && path != ".." {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module (bench)
			}
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Fuzz") {
				rel, _ := filepath.Rel("..", filepath.Dir(path))
				declared = append(declared, "./"+filepath.ToSlash(rel)+" "+fn.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile("fuzz.sh")
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, m := range regexp.MustCompile(`(?m)^\s*"(\./\S+ Fuzz\w+)"`).FindAllStringSubmatch(string(script), -1) {
		listed = append(listed, m[1])
	}
	slices.Sort(declared)
	slices.Sort(listed)
	if len(declared) == 0 {
		t.Fatal("found no fuzz target in the tree")
	}
	for _, d := range declared {
		if !slices.Contains(listed, d) {
			t.Errorf("scripts/fuzz.sh does not run %q", d)
		}
	}
	for _, l := range listed {
		if !slices.Contains(declared, l) {
			t.Errorf("scripts/fuzz.sh lists %q, which is not a fuzz target of that package", l)
		}
	}
}
