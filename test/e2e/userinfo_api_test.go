package e2e

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/httpapi"
)

// TestUserinfo_ClaimsOfTheGrantedScopes reads UserInfo with tokens of different scopes, on
// GET and POST, with the token in the header or the form body (OIDC Core 5.3, RFC 6750 2).
func TestUserinfo_ClaimsOfTheGrantedScopes(t *testing.T) {
	e := newEnv(t)
	u := e.url(httpapi.PathUserinfo)
	tests := []struct {
		name, scope string
		want        map[string]any
		absent      []string
	}{
		{"openid alone: sub only", "openid", map[string]any{"sub": "uid-alice"}, []string{"email", "phone", "name"}},
		{"email", "openid email", map[string]any{"sub": "uid-alice", "email": "alice@example.com", "email_verified": true},
			[]string{"phone", "name"}},
		{"phone in both spellings", "openid phone", map[string]any{"phone": "+33612345678", "phone_number": "+33612345678"},
			[]string{"email", "name"}},
		{"profile", "openid profile", map[string]any{"name": "Alice Martin", "given_name": "Alice", "family_name": "Martin",
			"birthdate": "1990-04-01", "gender": "female", "locale": "fr-FR", "zone_info": "Europe/Paris", "zoneinfo": "Europe/Paris",
			"updated_at": float64(1700000000), "picture": "https://img.example/alice.png"}, []string{"email", "phone"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			access, _ := e.apiTokens(t, tc.scope)
			for _, r := range []apiResponse{
				apiCall(t, http.DefaultClient, http.MethodGet, u, "Bearer "+access, nil),
				apiCall(t, http.DefaultClient, http.MethodPost, u, "Bearer "+access, nil),
				apiCall(t, http.DefaultClient, http.MethodPost, u, "", url.Values{"access_token": {access}}),
			} {
				if r.status != http.StatusOK {
					t.Fatalf("answered %d: %s", r.status, r.raw)
				}
				if r.header.Get("Cache-Control") != "no-store" || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
					t.Errorf("headers: %v", r.header)
				}
				for k, v := range tc.want {
					if r.json[k] != v {
						t.Errorf("%s = %v, want %v", k, r.json[k], v)
					}
				}
				for _, k := range tc.absent {
					if _, ok := r.json[k]; ok {
						t.Errorf("%s released without its scope", k)
					}
				}
			}
		})
	}
}

// TestUserinfo_Errors checks RFC 6750's answers: status, WWW-Authenticate, body.
func TestUserinfo_Errors(t *testing.T) {
	e := newEnv(t)
	u := e.url(httpapi.PathUserinfo)
	access, _ := e.apiTokens(t, "openid email")
	noOpenID, _ := e.apiTokens(t, "email")
	revoked, _ := e.apiTokens(t, "openid")
	e.apiRevoke(t, httpapi.PathRevoke, revoked)
	tests := []struct {
		name, method, auth string
		form               url.Values
		query              string
		status             int
		challenge          string // substring of WWW-Authenticate; "-" for none
		code               string // error in the body; "" for no body
	}{
		{"no token: bare challenge, no error", http.MethodGet, "", nil, "", 401, `Bearer realm="acmebank"`, ""},
		{"another scheme counts as no token", http.MethodGet, "Basic YTpi", nil, "", 401, `Bearer realm="acmebank"`, ""},
		{"malformed header", http.MethodGet, "Bearer a b", nil, "", 400, `error="invalid_request"`, "invalid_request"},
		{"unknown token", http.MethodGet, "Bearer at_nope", nil, "", 401, `error="invalid_token"`, "invalid_token"},
		{"revoked token", http.MethodGet, "Bearer " + revoked, nil, "", 401, `error="invalid_token"`, "invalid_token"},
		{"token without openid", http.MethodGet, "Bearer " + noOpenID, nil, "", 403, `error="insufficient_scope", error_description="the access token was not granted the openid scope", scope="openid"`, "insufficient_scope"},
		{"token in header and body", http.MethodPost, "Bearer " + access, url.Values{"access_token": {access}}, "", 400, `error="invalid_request"`, "invalid_request"},
		{"token in the query", http.MethodGet, "", nil, "?access_token=" + access, 400, `error="invalid_request"`, "invalid_request"},
		{"wrong method", http.MethodDelete, "Bearer " + access, nil, "", 405, "-", "invalid_request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := apiCall(t, http.DefaultClient, tc.method, u+tc.query, tc.auth, tc.form)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.raw)
			}
			wa := r.header.Get("WWW-Authenticate")
			if tc.challenge == "-" {
				if wa != "" {
					t.Errorf("WWW-Authenticate %q on a non-token error", wa)
				}
			} else if !strings.Contains(wa, tc.challenge) || !strings.HasPrefix(wa, "Bearer ") {
				t.Errorf("WWW-Authenticate = %q, want it to contain %q", wa, tc.challenge)
			}
			if tc.code == "" {
				if r.raw != "" {
					t.Errorf("body %q, want none (RFC 6750 3.1)", r.raw)
				}
			} else if r.json["error"] != tc.code {
				t.Errorf("error = %v, want %s", r.json["error"], tc.code)
			}
		})
	}
}

// TestUserinfo_PostBodies: a POST may come with an empty body of any declared type (the token
// in the header), but a body needs a form Content-Type to be read.
func TestUserinfo_PostBodies(t *testing.T) {
	e := newEnv(t)
	access, _ := e.apiTokens(t, "openid")
	tests := []struct {
		name, contentType, body, auth string
		status                        int
	}{
		{"empty body declared JSON, token in header", "application/json", "", "Bearer " + access, 200},
		{"empty body, no type, token in header", "", "", "Bearer " + access, 200},
		{"form body without Content-Type", "", "access_token=" + access, "", 400},
		{"body of another type", "text/plain", "access_token=" + access, "", 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, e.url(httpapi.PathUserinfo), strings.NewReader(tc.body))
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
		})
	}
}
