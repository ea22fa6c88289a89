package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/acmebank/authserver/shared/app"
	"github.com/acmebank/authserver/shared/config"
)

// TestBankAPI_IdentityWithoutUpstream: with no upstream configured the local server answers
// each protected route with the identity it would pass on, and the backend path it maps to.
func TestBankAPI_IdentityWithoutUpstream(t *testing.T) {
	e := newEnv(t)
	e.mountAPI(t, app.APIOptions{})
	access, _ := e.apiTokens(t, "openid email")
	tests := []struct{ path, route, backend string }{
		{"/v2/bank/accounts", "GET /v2/bank/accounts", "/v2/bank/accounts"},
		{"/invoicing/invoices?status=open", "GET /invoicing/invoices", "/invoicing/invoices"},
		{"/invoicing/invoices/INV-1", "GET /invoicing/invoices/{invoiceId}", "/invoicing/invoices/INV-1"},
		{"/invoices/query?status=open", "GET /invoices/query", "/invoicing/invoices"},
		{"/invoices/INV%202", "GET /invoices/{invoiceId}", "/invoicing/invoices/INV%202"},
	}
	for _, tc := range tests {
		t.Run(tc.route, func(t *testing.T) {
			r := apiCall(t, http.DefaultClient, http.MethodGet, e.url(tc.path), "Bearer "+access, nil)
			if r.status != http.StatusOK {
				t.Fatalf("answered %d: %s", r.status, r.raw)
			}
			want := map[string]any{"route": tc.route, "backend_path": tc.backend, "uid": "uid-alice", "companyProfileId": "cp-1",
				"companyUserId": "cu-1", "client_id": clientID, "scope": "openid email"}
			for k, v := range want {
				if r.json[k] != v {
					t.Errorf("%s = %v, want %v", k, r.json[k], v)
				}
			}
		})
	}
}

// TestBankAPI_ProxiesToUpstream: behind the authorizer the request reaches the upstream on
// the successor path with its query, and the identity headers replace any the caller forged.
func TestBankAPI_ProxiesToUpstream(t *testing.T) {
	type seen struct {
		path, query, uid, cp, cu, client, scope string
	}
	var mu sync.Mutex
	var got []seen
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, seen{r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get("X-Auth-Uid"), r.Header.Get("X-Auth-Company-Profile-Id"),
			r.Header.Get("X-Auth-Company-User-Id"), r.Header.Get("X-Auth-Client-Id"), r.Header.Get("X-Auth-Scope")})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTeapot)
		_ = json.NewEncoder(w).Encode(map[string]string{"from": "upstream"})
	}))
	defer upstream.Close()
	e := newEnv(t)
	e.mountAPI(t, app.APIOptions{Upstream: upstream.URL + "/base/"})
	access, _ := e.apiTokens(t, "openid")
	tests := []struct{ path, wantPath, wantQuery string }{
		{"/v2/bank/accounts", "/base/v2/bank/accounts", ""},
		{"/invoicing/invoices?status=open&page=2", "/base/invoicing/invoices", "status=open&page=2"},
		{"/invoices/query?status=open", "/base/invoicing/invoices", "status=open"},
		{"/invoices/INV%203", "/base/invoicing/invoices/INV%203", ""},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			req, _ := http.NewRequest(http.MethodGet, e.url(tc.path), nil)
			req.Header.Set("Authorization", "Bearer "+access)
			req.Header.Set("X-Auth-Uid", "forged-admin")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusTeapot {
				t.Fatalf("status %d: the upstream's answer was not passed back", resp.StatusCode)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 1 {
				t.Fatalf("upstream saw %d requests", len(got))
			}
			want := seen{tc.wantPath, tc.wantQuery, "uid-alice", "cp-1", "cu-1", clientID, "openid"}
			if got[0] != want {
				t.Errorf("upstream saw %+v\nwant           %+v", got[0], want)
			}
		})
	}
	t.Run("refused requests never reach the upstream", func(t *testing.T) {
		mu.Lock()
		got = nil
		mu.Unlock()
		r := apiCall(t, http.DefaultClient, http.MethodGet, e.url("/v2/bank/accounts"), "Bearer at_unknown", nil)
		mu.Lock()
		defer mu.Unlock()
		if r.status != http.StatusUnauthorized || len(got) != 0 {
			t.Errorf("status %d, upstream saw %d requests", r.status, len(got))
		}
	})
}

// TestBankAPI_DeprecationHeaders: every response of a deprecated route, errors included,
// carries Deprecation (RFC 9745), Link to its successor and, when configured, Sunset (RFC
// 8594); successor routes carry none of them.
func TestBankAPI_DeprecationHeaders(t *testing.T) {
	e := newEnv(t)
	e.mountAPI(t, app.APIOptions{Deprecation: "@1767225600", Sunset: "Thu, 31 Dec 2026 23:59:59 GMT"})
	access, _ := e.apiTokens(t, "openid")
	noScope, _ := e.apiTokens(t, "email")
	tests := []struct {
		name, path, auth, link string
		status                 int
	}{
		{"query route, accepted", "/invoices/query?status=open", "Bearer " + access, `</invoicing/invoices>; rel="successor-version"`, 200},
		{"item route, accepted", "/invoices/INV-9", "Bearer " + access, `</invoicing/invoices/INV-9>; rel="successor-version"`, 200},
		{"query route, no token", "/invoices/query", "", `</invoicing/invoices>; rel="successor-version"`, 401},
		{"item route, bad token", "/invoices/INV-9", "Bearer at_unknown", `</invoicing/invoices/INV-9>; rel="successor-version"`, 401},
		{"query route, scope missing", "/invoices/query", "Bearer " + noScope, `</invoicing/invoices>; rel="successor-version"`, 403},
		{"successor route", "/invoicing/invoices", "Bearer " + access, "", 200},
		{"accounts", "/v2/bank/accounts", "Bearer " + access, "", 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := apiCall(t, http.DefaultClient, http.MethodGet, e.url(tc.path), tc.auth, nil)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.raw)
			}
			h := r.header
			if tc.link == "" {
				for _, k := range []string{"Deprecation", "Link", "Sunset"} {
					if h.Get(k) != "" {
						t.Errorf("%s: %s on a route that is not deprecated", k, h.Get(k))
					}
				}
				return
			}
			if h.Get("Deprecation") != "@1767225600" {
				t.Errorf("Deprecation = %q", h.Get("Deprecation"))
			}
			if h.Get("Link") != tc.link {
				t.Errorf("Link = %q, want %q", h.Get("Link"), tc.link)
			}
			if h.Get("Sunset") != "Thu, 31 Dec 2026 23:59:59 GMT" {
				t.Errorf("Sunset = %q", h.Get("Sunset"))
			}
		})
	}
}

// TestBankAPI_NoSunsetUntilConfigured: without a removal date there is no Sunset header, and
// the Deprecation date defaults to the template's.
func TestBankAPI_NoSunsetUntilConfigured(t *testing.T) {
	e := newEnv(t)
	e.mountAPI(t, app.APIOptions{})
	access, _ := e.apiTokens(t, "openid")
	r := apiCall(t, http.DefaultClient, http.MethodGet, e.url("/invoices/query"), "Bearer "+access, nil)
	if r.status != http.StatusOK || r.header.Get("Sunset") != "" || r.header.Get("Deprecation") != "@1767225600" {
		t.Errorf("status %d, Deprecation %q, Sunset %q", r.status, r.header.Get("Deprecation"), r.header.Get("Sunset"))
	}
}

// TestBankAPI_BearerErrors: the local server's protected routes answer RFC 6750 challenges,
// which API Gateway's simple-response authorizer cannot.
func TestBankAPI_BearerErrors(t *testing.T) {
	e := newEnv(t)
	e.mountAPI(t, app.APIOptions{})
	access, _ := e.apiTokens(t, "openid")
	noScope, _ := e.apiTokens(t, "email")
	revoked, _ := e.apiTokens(t, "openid")
	e.apiRevoke(t, "/v2/authentication/token/revoke", revoked)
	tests := []struct {
		name, method, auth string
		status             int
		challenge          string
	}{
		{"no token", http.MethodGet, "", 401, `Bearer realm="acmebank"`},
		{"lower-case scheme works", http.MethodGet, "bearer " + access, 200, ""},
		{"malformed", http.MethodGet, "Bearer " + access + " extra", 400, `error="invalid_request"`},
		{"revoked", http.MethodGet, "Bearer " + revoked, 401, `error="invalid_token"`},
		{"scope missing", http.MethodGet, "Bearer " + noScope, 403, `error="insufficient_scope", error_description="the access token lacks a scope this route needs", scope="openid"`},
		{"other method", http.MethodPost, "Bearer " + access, 405, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := apiCall(t, http.DefaultClient, tc.method, e.url("/v2/bank/accounts"), tc.auth, nil)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.raw)
			}
			if wa := r.header.Get("WWW-Authenticate"); !strings.Contains(wa, tc.challenge) || (tc.challenge == "") != (wa == "") {
				t.Errorf("WWW-Authenticate = %q, want %q", wa, tc.challenge)
			}
		})
	}
}

// TestBankAPI_RejectsBadOptions: a misconfigured upstream, date or route table stops the
// server at start (the route table when the configuration loads).
func TestBankAPI_RejectsBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opts app.APIOptions
	}{
		{"relative upstream", app.APIOptions{Upstream: "bank.example"}},
		{"upstream with a query", app.APIOptions{Upstream: "https://bank.example/?a=b"}},
		{"deprecation not @epoch", app.APIOptions{Deprecation: "2026-01-01"}},
		{"sunset not an HTTP-date", app.APIOptions{Sunset: "2026-12-31"}},
	}
	e := newEnv(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := e.app.MountBankAPI(http.NewServeMux(), tc.opts); err == nil {
				t.Error("accepted")
			}
		})
	}
	t.Run("unknown scope in AUTH_ROUTE_SCOPES", func(t *testing.T) {
		bad := map[string]string{config.EnvRouteScopes: `{"GET /v2/bank/accounts":["accounts:read"]}`}
		if _, err := config.FromLookup(func(k string) (string, bool) { v, ok := bad[k]; return v, ok }); err == nil || !strings.Contains(err.Error(), config.EnvRouteScopes) {
			t.Errorf("accepted: %v", err)
		}
	})
}
