package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/app"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/oauth"
)

func localApp(t *testing.T, dataDir string) *app.App {
	t.Helper()
	vars := map[string]string{config.EnvDataDir: dataDir, config.EnvAuditLog: filepath.Join(t.TempDir(), "audit.jsonl")}
	cfg, err := config.FromLookup(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A data directory whose key files are gone (restored without keys/) makes the start fail,
// naming the keys folder and what to do, instead of serving 500s that spend every code.
func TestStart_RefusesWhenItsSigningKeysAreMissing(t *testing.T) {
	dir := t.TempDir()
	a := localApp(t, dir)
	if _, err := a.Rotator().Rotate(context.Background()); err != nil { // the first key, as a start makes it
		t.Fatal(err)
	}
	if err := checkSigningKeys(context.Background(), a); err != nil {
		t.Fatalf("with its keys in place: %v", err)
	}
	a.Close()
	if err := os.RemoveAll(filepath.Join(dir, "keys")); err != nil {
		t.Fatal(err)
	}
	a = localApp(t, dir)
	defer a.Close()
	err := checkSigningKeys(context.Background(), a)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "keys")) || !strings.Contains(err.Error(), "restore") {
		t.Fatalf("start without the key files: %v, want a refusal naming %s and what to do", err, filepath.Join(dir, "keys"))
	}
}

// /healthz answers while the process serves; /readyz only while the store takes a write.
func TestHealth_LiveAndReadyEndpoints(t *testing.T) {
	a := localApp(t, t.TempDir())
	defer a.Close()
	mux := http.NewServeMux()
	if err := mountHealth(mux, a, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != "ok" {
			t.Errorf("GET %s: %d %q, want 200 ok", path, rec.Code, rec.Body)
		}
	}
	if _, ok := a.Store.(oauth.WriteChecker); !ok {
		t.Fatal("the embedded store cannot be checked for writes")
	}
}
