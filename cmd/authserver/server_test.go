package main

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/app"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
)

// testServer is the local server's handler for a base URL, over a fresh data directory.
func testServer(t *testing.T, baseURL string, extra map[string]string) http.Handler {
	t.Helper()
	vars := map[string]string{config.EnvBaseURL: baseURL, config.EnvDataDir: t.TempDir()}
	maps.Copy(vars, extra)
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
		h := testServer(t, base, nil)
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

// TestServer_RateLimitsInFront: the local server answers a flood of token, userinfo or bank
// API requests from one address with 429 past the per-address burst, and AUTH_RATE_LIMIT=false
// turns that off (load benchmarks from one address).
func TestServer_RateLimitsInFront(t *testing.T) {
	for _, c := range []struct {
		vars    map[string]string
		limited bool
	}{{nil, true}, {map[string]string{config.EnvRateLimit: "false"}, false}} {
		h := testServer(t, "http://127.0.0.1:8080", c.vars)
		for _, req := range []*http.Request{
			httptest.NewRequest(http.MethodPost, httpapi.PathToken, strings.NewReader("grant_type=password")),
			httptest.NewRequest(http.MethodGet, httpapi.PathUserinfo, nil),
			httptest.NewRequest(http.MethodGet, "/v2/bank/accounts", nil),
			httptest.NewRequest(http.MethodGet, "/invoices/INV-1", nil),
		} {
			limited := 0
			for range 100 {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req.Clone(context.Background()))
				if rec.Code == http.StatusTooManyRequests {
					limited++
				}
			}
			if (limited > 0) != c.limited {
				t.Errorf("%v: %d of 100 %s requests from one address answered 429", c.vars, limited, req.URL.Path)
			}
		}
	}
}
