package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// rfcErrors are the error codes the JSON endpoints may answer with.
var rfcErrors = []string{"invalid_request", "invalid_client", "invalid_grant", "unauthorized_client",
	"unsupported_grant_type", "invalid_scope", "unsupported_token_type"}

// FuzzTokenEndpoints drives the token and revoke handlers with any Content-Type, Authorization
// header and body: the answer is always an RFC 6749 5.2 JSON error (or a success) with
// Cache-Control: no-store, never a 5xx or a panic.
func FuzzTokenEndpoints(f *testing.F) {
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(fuzzClientID+":"+url.QueryEscape(fuzzSecret)))
	for _, c := range []struct {
		revoke         bool
		ct, auth, body string
	}{
		{false, "application/x-www-form-urlencoded", "", "grant_type=authorization_code&code=ac_x&redirect_uri=" + url.QueryEscape(fuzzRedirect) + "&client_id=" + fuzzClientID + "&client_secret=" + fuzzSecret},
		{false, "application/json", basic, `{"grant_type":"refresh_token","refresh_token":"rt_x","scope":"openid"}`},
		{false, "application/json", basic, `{"grant_type":"password","username":"u","password":"p"}`},
		{false, "application/x-www-form-urlencoded", basic, "grant_type=refresh_token&refresh_token=rt&redirect_uri=https://evil.example/"},
		{true, "application/json", "", `{"token":"at_x","token_type_hint":"access_token","client_id":"` + fuzzClientID + `","client_secret":"` + fuzzSecret + `"}`},
		{true, "application/x-www-form-urlencoded", basic, "token=rt_x&token=rt_y"},
		{true, "text/plain", "Bearer x", "token=x"},
	} {
		f.Add(c.revoke, c.ct, c.auth, c.body)
	}
	tok, rev, _, _, svc := fuzzUseCases(f, nil)
	token := &TokenHandler{Token: tok, Log: svc.Log}
	revoke := &RevokeHandler{Revoker: rev, Log: svc.Log}
	f.Fuzz(func(t *testing.T, isRevoke bool, contentType, authorization, body string) {
		var h http.Handler = token
		path := PathToken
		if isRevoke {
			h, path = revoke, PathRevoke
		}
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		r.Header.Set("Content-Type", contentType)
		r.Header.Set("Authorization", authorization)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code >= 500 {
			t.Fatalf("%s answered %d: %s", path, w.Code, w.Body)
		}
		if w.Header().Get("Cache-Control") != "no-store" {
			t.Fatalf("%s answered without Cache-Control: no-store", path)
		}
		if w.Code == http.StatusOK {
			return
		}
		var e struct {
			Error string `json:"error"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || !slices.Contains(rfcErrors, e.Error) {
			t.Fatalf("%s answered %d with %q", path, w.Code, w.Body)
		}
		if (e.Error == "invalid_client") != (w.Code == http.StatusUnauthorized) {
			t.Fatalf("%s: %s answered with %d", path, e.Error, w.Code)
		}
	})
}

// FuzzIntrospectUserinfo drives the introspection and userinfo endpoints with any method,
// Content-Type, Authorization header, query and body: never a 5xx or a panic, always
// no-store, and an error is one of the RFC codes (invalid_token and insufficient_scope
// included, RFC 6750 3.1) or userinfo's bare 401 for a request with no token at all.
func FuzzIntrospectUserinfo(f *testing.F) {
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(fuzzClientID+":"+url.QueryEscape(fuzzSecret)))
	f.Add(false, true, "application/x-www-form-urlencoded", basic, "", "token=at_x&token_type_hint=access_token")
	f.Add(false, true, "application/json", "", "", `{"token":"rt_x","client_id":"`+fuzzClientID+`","client_secret":"`+fuzzSecret+`"}`)
	f.Add(false, true, "application/json", basic, "", `{"token":"a","token":"b"}`)
	f.Add(true, false, "", "Bearer at_x", "", "")
	f.Add(true, false, "", "", "access_token=at_x", "")
	f.Add(true, true, "application/x-www-form-urlencoded", "Bearer at_x", "", "access_token=at_y")
	f.Add(true, true, "", "", "", "access_token=at_x")
	f.Add(true, true, "text/plain", "bearer  a b", "", "x")
	_, _, in, rc, svc := fuzzUseCases(f, map[string]bool{fuzzClientID: true})
	introspect := &IntrospectHandler{Introspector: in, Log: svc.Log}
	userinfo := &UserinfoHandler{Resource: rc, Log: svc.Log}
	allowed := append([]string{"invalid_token", "insufficient_scope"}, rfcErrors...)
	f.Fuzz(func(t *testing.T, isUserinfo, post bool, contentType, authorization, query, body string) {
		var h http.Handler = introspect
		path := PathIntrospect
		if isUserinfo {
			h, path = userinfo, PathUserinfo
		}
		method := http.MethodGet
		if post {
			method = http.MethodPost
		}
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.URL.RawQuery = query
		if contentType != "" {
			r.Header.Set("Content-Type", contentType)
		}
		if authorization != "" {
			r.Header.Set("Authorization", authorization)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code >= 500 {
			t.Fatalf("%s answered %d: %s", path, w.Code, w.Body)
		}
		if w.Header().Get("Cache-Control") != "no-store" {
			t.Fatalf("%s answered %d without Cache-Control: no-store", path, w.Code)
		}
		if w.Code == http.StatusOK || (isUserinfo && w.Code == http.StatusUnauthorized && w.Body.Len() == 0) {
			return
		}
		var e struct {
			Error string `json:"error"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || !slices.Contains(allowed, e.Error) {
			t.Fatalf("%s answered %d with %q", path, w.Code, w.Body)
		}
	})
}
