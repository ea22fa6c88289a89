package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/httpapi"
)

// TestBadInput_TokenAndRevoke: each malformed or hostile request gets its RFC error with a
// description, never a 5xx, and writes nothing to the store.
func TestBadInput_TokenAndRevoke(t *testing.T) {
	e := newEnv(t)
	code := e.code(t, nil) // a live code the bad requests must not spend
	form := "application/x-www-form-urlencoded"
	auth := "client_id=" + clientID + "&client_secret=" + clientSecret
	cases := []struct {
		name, path, ctype, body string
		status                  int
		errCode                 string
	}{
		{"no grant_type", httpapi.PathToken, form, auth + "&code=" + code, 400, "invalid_request"},
		{"unsupported grant_type", httpapi.PathToken, form, auth + "&grant_type=password&username=a&password=b", 400, "unsupported_grant_type"},
		{"implicit grant_type", httpapi.PathToken, form, auth + "&grant_type=implicit", 400, "unsupported_grant_type"},
		{"client_credentials for a client not registered for it", httpapi.PathToken, form, auth + "&grant_type=client_credentials", 400, "unauthorized_client"},
		{"missing code", httpapi.PathToken, form, auth + "&grant_type=authorization_code&redirect_uri=" + redirectURI, 400, "invalid_request"},
		{"garbage code", httpapi.PathToken, form, auth + "&grant_type=authorization_code&code=ac_garbage&redirect_uri=" + redirectURI, 400, "invalid_grant"},
		{"repeated code", httpapi.PathToken, form, auth + "&grant_type=authorization_code&code=" + code + "&code=" + code, 400, "invalid_request"},
		{"repeated grant_type", httpapi.PathToken, form, auth + "&grant_type=authorization_code&grant_type=refresh_token&code=" + code, 400, "invalid_request"},
		{"repeated client_id", httpapi.PathToken, form, auth + "&client_id=" + clientID + "&grant_type=authorization_code&code=" + code, 400, "invalid_request"},
		{"malformed verifier", httpapi.PathToken, form, auth + "&grant_type=authorization_code&code=" + code + "&redirect_uri=" + redirectURI + "&code_verifier=short", 400, "invalid_request"},
		{"missing refresh_token", httpapi.PathToken, form, auth + "&grant_type=refresh_token", 400, "invalid_request"},
		{"garbage refresh_token", httpapi.PathToken, form, auth + "&grant_type=refresh_token&refresh_token=rt_nope", 400, "invalid_grant"},
		{"unknown scope on refresh", httpapi.PathToken, form, auth + "&grant_type=refresh_token&refresh_token=rt_nope&scope=admin", 400, "invalid_scope"},
		{"no client", httpapi.PathToken, form, "grant_type=authorization_code&code=" + code, 401, "invalid_client"},
		{"unknown client", httpapi.PathToken, form, "client_id=nobody&client_secret=x&grant_type=authorization_code&code=" + code, 401, "invalid_client"},
		{"text/plain", httpapi.PathToken, "text/plain", auth + "&grant_type=authorization_code&code=" + code, 400, "invalid_request"},
		{"no content type", httpapi.PathToken, "", auth + "&grant_type=authorization_code&code=" + code, 400, "invalid_request"},
		{"multipart", httpapi.PathToken, "multipart/form-data; boundary=x", "--x--", 400, "invalid_request"},
		{"JSON array", httpapi.PathToken, "application/json", `["grant_type"]`, 400, "invalid_request"},
		{"JSON number value", httpapi.PathToken, "application/json", `{"grant_type":1}`, 400, "invalid_request"},
		{"JSON nested", httpapi.PathToken, "application/json", `{"grant_type":{"a":"b"}}`, 400, "invalid_request"},
		{"JSON duplicate key", httpapi.PathToken, "application/json", `{"client_id":"` + clientID + `","client_secret":"` + clientSecret + `","grant_type":"authorization_code","code":"` + code + `","code":"x"}`, 400, "invalid_request"},
		{"JSON trailing data", httpapi.PathToken, "application/json", `{"grant_type":"authorization_code"} {}`, 400, "invalid_request"},
		{"JSON truncated", httpapi.PathToken, "application/json", `{"grant_type":"authorization_co`, 400, "invalid_request"},
		{"bad percent-encoding", httpapi.PathToken, form, auth + "&grant_type=%zz", 400, "invalid_request"},
		{"oversized body", httpapi.PathToken, form, auth + "&grant_type=authorization_code&pad=" + strings.Repeat("a", httpapi.MaxBodyBytes), 413, "invalid_request"},
		{"revoke without token", httpapi.PathRevoke, form, auth, 400, "invalid_request"},
		{"revoke repeated token", httpapi.PathRevoke, form, auth + "&token=a&token=b", 400, "invalid_request"},
		{"revoke wrong content type", httpapi.PathRevokeLegacy, "text/xml", "<token/>", 400, "invalid_request"},
		{"revoke unauthenticated", httpapi.PathRevokeLegacy, form, "token=rt_x", 401, "invalid_client"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := e.writes.count()
			req, _ := http.NewRequest(http.MethodPost, e.url(c.path), strings.NewReader(c.body))
			if c.ctype != "" {
				req.Header.Set("Content-Type", c.ctype)
			}
			st, body, h := do(t, req)
			if st != c.status || body["error"] != c.errCode || body["error_description"] == "" {
				t.Fatalf("got %d %v, want %d %s", st, body, c.status, c.errCode)
			}
			if h.Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control %q", h.Get("Cache-Control"))
			}
			if n := e.writes.count(); n != before {
				t.Fatalf("the store was written: %v", e.writes.list()[before:])
			}
		})
	}
	t.Run("basic with malformed credentials", func(t *testing.T) {
		for _, hdr := range []string{"Basic !!!", "Basic " + "bm9jb2xvbg==", "Bearer abc", "Basic"} {
			req, _ := http.NewRequest(http.MethodPost, e.url(httpapi.PathToken), strings.NewReader("grant_type=authorization_code&code="+code))
			req.Header.Set("Content-Type", form)
			req.Header.Set("Authorization", hdr)
			st, body, _ := do(t, req)
			if st != 401 || body["error"] != "invalid_client" {
				t.Fatalf("%q: %d %v", hdr, st, body)
			}
		}
	})
	t.Run("GET on token endpoint", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, e.url(httpapi.PathToken), nil)
		st, body, h := do(t, req)
		if st != 405 || body["error"] != "invalid_request" || h.Get("Allow") != "POST" {
			t.Fatalf("%d %v", st, body)
		}
	})
	// After all that, the code still works: nothing spent it.
	if st, body := e.exchange(t, code, nil); st != 200 {
		t.Fatalf("the code did not survive the bad requests: %d %v", st, body)
	}
}

// TestBadInput_AuthorizeForms: posts to the authorize endpoint that are not our forms, or
// forms with missing state, get an error page and write nothing.
func TestBadInput_AuthorizeForms(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name, ctype, body string
		status            int
	}{
		{"unknown request", "application/x-www-form-urlencoded", "request_id=ar_nope&csrf_token=x&action=login", 400},
		{"json body", "application/json", `{"request_id":"x"}`, 400},
		{"repeated fields", "application/x-www-form-urlencoded", "request_id=a&request_id=b", 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := e.writes.count()
			req, _ := http.NewRequest(http.MethodPost, e.url(httpapi.PathAuthorize), strings.NewReader(c.body))
			req.Header.Set("Content-Type", c.ctype)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.status || resp.Header.Get("Location") != "" {
				t.Fatalf("%d %q", resp.StatusCode, resp.Header.Get("Location"))
			}
			if n := e.writes.count(); n != before {
				t.Fatalf("the store was written: %v", e.writes.list()[before:])
			}
		})
	}
}
