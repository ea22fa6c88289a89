package e2e

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
)

// TestIntrospect_OwnTokens: a client introspects its own tokens (RFC 7662 2.2).
func TestIntrospect_OwnTokens(t *testing.T) {
	e := newEnv(t)
	access, refresh := e.apiTokens(t, "openid email")
	r := e.apiIntrospect(t, http.DefaultClient, e.srv.URL, clientID, clientSecret, access)
	if r.status != http.StatusOK || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("answered %d %v: %s", r.status, r.header, r.raw)
	}
	now := float64(e.clock.Now().Unix())
	want := map[string]any{"active": true, "scope": "openid email", "client_id": clientID, "sub": "uid-alice",
		"token_type": "Bearer", "iss": e.app.Config.Issuer}
	for k, v := range want {
		if r.json[k] != v {
			t.Errorf("%s = %v, want %v", k, r.json[k], v)
		}
	}
	if exp, _ := r.json["exp"].(float64); exp != now+3600 {
		t.Errorf("exp = %v, want now+1h (%v)", r.json["exp"], now+3600)
	}
	if iat, _ := r.json["iat"].(float64); iat != now {
		t.Errorf("iat = %v, want %v", r.json["iat"], now)
	}
	md, _ := r.json["metadata"].(map[string]any)
	if md["uid"] != "uid-alice" || md["companyProfileId"] != "cp-1" || md["companyUserId"] != "cu-1" {
		t.Errorf("metadata = %v", r.json["metadata"])
	}
	if _, bound := r.json["cnf"]; bound {
		t.Errorf("cnf on a token issued without mutual TLS: %v", r.json["cnf"])
	}

	rr := e.apiIntrospect(t, http.DefaultClient, e.srv.URL, clientID, clientSecret, refresh)
	if rr.json["active"] != true || rr.json["token_type"] != nil || rr.json["client_id"] != clientID {
		t.Errorf("own refresh token: %s", rr.raw)
	}
}

// TestIntrospect_Inactive: everything the caller may not know about, or that no longer works,
// is {"active":false} and nothing more.
func TestIntrospect_Inactive(t *testing.T) {
	e := newEnv(t)
	revoked, _ := e.apiTokens(t, "openid")
	e.apiRevoke(t, httpapi.PathRevokeLegacy, revoked)
	_, spent := e.apiTokens(t, "openid")
	if st, body := e.refreshOnce(t, spent); st != http.StatusOK {
		t.Fatalf("refresh answered %d: %v", st, body)
	}
	foreign, _ := e.apiTokens(t, "openid")
	expiring, _ := e.apiTokens(t, "openid")
	tests := []struct {
		name, id, secret, token string
		advance                 bool
	}{
		{"unknown token", clientID, clientSecret, "at_unknown", false},
		{"revoked token", clientID, clientSecret, revoked, false},
		{"spent refresh token", clientID, clientSecret, spent, false},
		{"another client's token", otherID, otherSecret, foreign, false},
		{"expired token", clientID, clientSecret, expiring, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.advance {
				e.clock.Advance(e.app.Config.Lifetimes.AccessToken)
			}
			r := e.apiIntrospect(t, http.DefaultClient, e.srv.URL, tc.id, tc.secret, tc.token)
			if r.status != http.StatusOK || len(r.json) != 1 || r.json["active"] != false {
				t.Errorf("answered %d %s, want 200 {\"active\":false}", r.status, r.raw)
			}
		})
	}
}

// refreshOnce spends a refresh token.
func (e *env) refreshOnce(t *testing.T, rt string) (int, map[string]any) {
	t.Helper()
	st, body, _ := e.post(t, httpapi.PathToken, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}}, false, false)
	return st, body
}

// TestIntrospect_ResourceServer: a client named in AUTH_INTROSPECTION_CLIENTS introspects
// access tokens issued to others, but not their refresh tokens.
func TestIntrospect_ResourceServer(t *testing.T) {
	e := newEnvFrom(t, envSetup{vars: map[string]string{config.EnvIntrospectionClients: " " + otherID + " ,"}})
	access, refresh := e.apiTokens(t, "openid email")
	r := e.apiIntrospect(t, http.DefaultClient, e.srv.URL, otherID, otherSecret, access)
	if r.json["active"] != true || r.json["client_id"] != clientID || r.json["sub"] != "uid-alice" {
		t.Errorf("resource server introspecting an access token: %s", r.raw)
	}
	r = e.apiIntrospect(t, http.DefaultClient, e.srv.URL, otherID, otherSecret, refresh)
	if r.json["active"] != false {
		t.Errorf("resource server learnt about another client's refresh token: %s", r.raw)
	}
}

// TestIntrospect_ClientAuthentication: introspection authenticates its caller like the token
// endpoint (RFC 7662 2.1), in both body encodings and both secret methods.
func TestIntrospect_ClientAuthentication(t *testing.T) {
	e := newEnv(t)
	access, _ := e.apiTokens(t, "openid")
	tests := []struct {
		name          string
		params        url.Values
		basic, asJSON bool
		status        int
		code          string
	}{
		{"secret in a form body", url.Values{"token": {access}}, false, false, 200, ""},
		{"secret in a JSON body", url.Values{"token": {access}}, false, true, 200, ""},
		{"HTTP Basic", url.Values{"token": {access}}, true, false, 200, ""},
		{"wrong secret", url.Values{"token": {access}, "client_id": {clientID}, "client_secret": {"nope"}}, false, false, 401, "invalid_client"},
		{"no credentials", url.Values{"token": {access}, "client_id": {clientID}}, false, false, 401, "invalid_client"},
		{"no token", url.Values{}, false, false, 400, "invalid_request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, body, _ := e.post(t, httpapi.PathIntrospect, tc.params, tc.basic, tc.asJSON)
			if st != tc.status {
				t.Fatalf("status %d, want %d: %v", st, tc.status, body)
			}
			if tc.code != "" && body["error"] != tc.code {
				t.Errorf("error = %v, want %s", body["error"], tc.code)
			}
			if tc.code == "" && body["active"] != true {
				t.Errorf("body = %v", body)
			}
		})
	}
	if r := apiCall(t, http.DefaultClient, http.MethodGet, e.url(httpapi.PathIntrospect), "", nil); r.status != http.StatusMethodNotAllowed {
		t.Errorf("GET answered %d", r.status)
	}
}
