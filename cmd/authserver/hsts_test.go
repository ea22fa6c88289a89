package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/app"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
)

// testServer is the local server's handler for a base URL, over a fresh data directory.
func testServer(t *testing.T, baseURL string) http.Handler {
	t.Helper()
	vars := map[string]string{config.EnvBaseURL: baseURL, config.EnvDataDir: t.TempDir()}
	cfg, err := config.FromLookup(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := app.New(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	mux, err := a.Mux()
	if err != nil {
		t.Fatal(err)
	}
	return serverHandler(context.Background(), a, log, mux)
}

// TestServer_HSTSOnEveryResponseOverHTTPSOnly: with an https base URL every response, errors
// and unknown paths included, carries Strict-Transport-Security; over http none does.
func TestServer_HSTSOnEveryResponseOverHTTPSOnly(t *testing.T) {
	requests := []*http.Request{
		httptest.NewRequest(http.MethodGet, httpapi.PathDiscovery, nil),
		httptest.NewRequest(http.MethodGet, httpapi.PathJWKS, nil),
		httptest.NewRequest(http.MethodGet, httpapi.PathAuthorize, nil),
		httptest.NewRequest(http.MethodGet, httpapi.PathAuthorize+"?client_id=nobody", nil),
		httptest.NewRequest(http.MethodPost, httpapi.PathToken, strings.NewReader("grant_type=password")),
		httptest.NewRequest(http.MethodPost, httpapi.PathRevoke, nil),
		httptest.NewRequest(http.MethodGet, httpapi.PathUserinfo, nil),
		httptest.NewRequest(http.MethodGet, "/no/such/path", nil),
	}
	for _, base := range []string{"https://auth.bank.example", "http://127.0.0.1:8080"} {
		h := testServer(t, base)
		for _, req := range requests {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req.Clone(context.Background()))
			got := rec.Header().Get("Strict-Transport-Security")
			want := ""
			if strings.HasPrefix(base, "https://") {
				want = "max-age=63072000; includeSubDomains"
			}
			if got != want {
				t.Errorf("%s: %s %s answered %d with Strict-Transport-Security %q, want %q", base, req.Method, req.URL, rec.Code, got, want)
			}
		}
	}
}
