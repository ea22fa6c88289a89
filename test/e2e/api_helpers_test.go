package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/app"
	"github.com/acmebank/authserver/shared/httpapi"
)

// Helpers of the bank API, userinfo, introspection and mutual-TLS tests (issue 6).

// mountAPI adds the bank API routes to the env's server, as cmd/authserver does.
func (e *env) mountAPI(t *testing.T, opts app.APIOptions) {
	t.Helper()
	if e.accessLog {
		t.Fatal("the env's handler is not the app's mux")
	}
	if err := e.app.MountBankAPI(e.mux, opts); err != nil {
		t.Fatal(err)
	}
}

// apiTokens runs the flow for scope and returns the access and refresh tokens.
func (e *env) apiTokens(t *testing.T, scope string) (access, refresh string) {
	t.Helper()
	st, body := e.exchange(t, e.code(t, url.Values{"scope": {scope}}), nil)
	if st != http.StatusOK {
		t.Fatalf("token exchange answered %d: %v", st, body)
	}
	return body["access_token"].(string), body["refresh_token"].(string)
}

// apiRevoke revokes token on path as the acceptance client; it must answer 200.
func (e *env) apiRevoke(t *testing.T, path, token string) {
	t.Helper()
	if st, body, _ := e.post(t, path, url.Values{"token": {token}}, false, false); st != http.StatusOK {
		t.Fatalf("revoke on %s answered %d: %v", path, st, body)
	}
}

// apiResponse is one answer of the API: status, headers, raw body and the body as JSON (nil
// when empty or not JSON).
type apiResponse struct {
	status int
	header http.Header
	raw    string
	json   map[string]any
}

// apiCall sends method to u through client with the Authorization header auth (none when
// empty) and an optional form body.
func apiCall(t *testing.T, client *http.Client, method, u, auth string, form url.Values) apiResponse {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := apiResponse{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &out.json)
	return out
}

// introspect posts an introspection request with client credentials (form, client_secret_post).
func (e *env) apiIntrospect(t *testing.T, client *http.Client, base, id, secret, token string) apiResponse {
	t.Helper()
	form := url.Values{"token": {token}}
	if id != "" {
		form.Set("client_id", id)
	}
	if secret != "" {
		form.Set("client_secret", secret)
	}
	return apiCall(t, client, http.MethodPost, base+httpapi.PathIntrospect, "", form)
}
