package main

import (
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeResult(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRun_DrawsPNGOfSeries draws two series of two points each and decodes the PNG.
func TestRun_DrawsPNGOfSeries(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for _, r := range []string{
		`{"label":"bolt","concurrency":1,"endpoints":{"token":{"per_sec":500,"p99_ms":3}}}`,
		`{"label":"bolt","concurrency":8,"endpoints":{"token":{"per_sec":2000,"p99_ms":9}}}`,
		`{"label":"dynamodb","concurrency":1,"endpoints":{"token":{"per_sec":100,"p99_ms":20}}}`,
		`{"label":"dynamodb","concurrency":8,"endpoints":{"token":{"per_sec":300,"p99_ms":60}}}`,
	} {
		files = append(files, writeResult(t, dir, strings.Repeat("x", len(files)+1)+".json", r))
	}
	out := filepath.Join(dir, "token.png")
	if err := run(append([]string{"-o", out}, files...), io.Discard); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 560 || b.Dy() != 504 {
		t.Errorf("image is %dx%d, want 560x504 (7in x 6.3in at 80 dpi)", b.Dx(), b.Dy())
	}
}

// TestLoad_RejectsFilesThatAreNotLoadResults keeps a stray JSON file out of the chart.
func TestLoad_RejectsFilesThatAreNotLoadResults(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ name, body string }{
		{"not JSON", `nope`},
		{"no token endpoint", `{"label":"x","concurrency":2,"endpoints":{}}`},
		{"no concurrency", `{"label":"x","endpoints":{"token":{"per_sec":1,"p99_ms":1}}}`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeResult(t, dir, strings.Repeat("y", i+1)+".json", tt.body)
			if _, err := load([]string{p}); err == nil {
				t.Error("accepted")
			}
		})
	}
}
