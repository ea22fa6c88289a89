package e2e

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/seed"
)

// secOptions varies the environment of the security tests: a configuration read from
// environment variables exactly as a deployment reads it, and TLS (an https base URL).
type secOptions struct {
	env map[string]string // AUTH_* variables, read through config.FromLookup
	tls bool
}

// newSecEnv is newEnv with options, and with the access log of the local server in front of
// the handlers, so that what the service logs per request is inspected too.
func newSecEnv(t *testing.T, o secOptions) *env {
	t.Helper()
	return newEnvFrom(t, envSetup{vars: o.env, tls: o.tls, accessLog: true})
}

// secBrowser is the scripted browser of an environment, over TLS when the server is.
func (e *env) secBrowser(t *testing.T) *browser {
	b := newBrowser(t)
	b.client.Transport = e.srv.Client().Transport
	return b
}

// secDo sends a request with the environment's client (TLS-aware) without following redirects.
func (e *env) secDo(t *testing.T, req *http.Request) *http.Response {
	t.Helper()
	c := e.srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// secPost posts a raw body with a Content-Type and optional Basic credentials.
func (e *env) secPost(t *testing.T, path, contentType, body string, header http.Header) (int, map[string]any, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.url(path), strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	return do(t, req)
}

// secTokens runs a whole authorization of the acceptance client and returns the token
// response (form body, client_secret_post).
func (e *env) secTokens(t *testing.T, extra url.Values) map[string]any {
	t.Helper()
	st, body := e.exchange(t, e.code(t, extra), nil)
	if st != 200 {
		t.Fatalf("exchange %d %v", st, body)
	}
	return body
}

// secRefresh refreshes with the acceptance client's credentials.
func (e *env) secRefresh(t *testing.T, rt string) (int, map[string]any) {
	t.Helper()
	st, body, _ := e.post(t, httpapi.PathToken, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}}, false, false)
	return st, body
}

// secCookieJar returns the value of a cookie the browser holds for the server.
func (e *env) secCookie(b *browser, name string) string {
	u, _ := url.Parse(e.srv.URL + "/")
	for _, c := range b.client.Jar.(*cookiejar.Jar).Cookies(u) {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

// sessionValid reports whether a session cookie value names a live session.
func (e *env) sessionValid(t *testing.T, cookie string) bool {
	t.Helper()
	sess, _, err := e.app.Users.SessionUser(context.Background(), cookie)
	if err != nil {
		t.Fatal(err)
	}
	return sess != nil
}

// addUser creates a user hashed with h.
func (e *env) addUser(t *testing.T, uid, name, pass string, h authn.PasswordHasher) {
	t.Helper()
	f := &seed.File{Users: []seed.User{{UID: uid, Username: name, Password: pass}}}
	if _, err := seed.Load(context.Background(), e.app.Store, f, h, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// loginAttempt opens a fresh authorization in b and submits the login form.
func (e *env) loginAttempt(t *testing.T, b *browser, user, pass string) *http.Response {
	t.Helper()
	b.open(e.authorizeURL(nil))
	return b.login(e, user, pass)
}

// onConsent reports whether the browser's last page is the consent page.
func onConsent(b *browser) bool { return strings.Contains(b.last, `value="allow"`) }

// alertOf is the generic error message of a login page, to compare two failures.
func alertOf(b *browser) string {
	i := strings.Index(b.last, `role="alert"`)
	if i < 0 {
		return ""
	}
	s := b.last[i:]
	if j := strings.Index(s, "</"); j >= 0 {
		s = s[:j]
	}
	return s
}
