package e2e

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/httpapi"
)

// Headers (RFC 6749 5.1 and 10.13, RFC 6819 4.4.1.9 and 5.2.2.6, RFC 9700 4.16, OIDC Core
// 16.x): every HTML page forbids scripts, framing, referrers and caching; every response that
// carries a token or a code is no-store; cookies are __Host- over https.

// checkPageHeaders fails unless resp has the headers every page of the service must have.
func checkPageHeaders(t *testing.T, what string, resp *http.Response, body string) {
	t.Helper()
	h := resp.Header
	csp := h.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("%s: CSP %q lacks %q", what, csp, want)
		}
	}
	for _, bad := range []string{"script-src", "'unsafe-inline'", "'unsafe-eval'", "*"} {
		if strings.Contains(csp, bad) {
			t.Errorf("%s: CSP %q allows %q", what, csp, bad)
		}
	}
	for name, want := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff",
		"Referrer-Policy": "no-referrer", "Cache-Control": "no-store"} {
		if h.Get(name) != want {
			t.Errorf("%s: %s = %q, want %q", what, name, h.Get(name), want)
		}
	}
	if body != "" {
		if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") || !strings.Contains(strings.ToLower(ct), "charset=utf-8") {
			t.Errorf("%s: Content-Type %q", what, ct)
		}
		// Pages go out whole with their length, not chunked (httpapi renders a page whole, then writes it).
		if resp.ContentLength != int64(len(body)) {
			t.Errorf("%s: Content-Length %d for a body of %d bytes", what, resp.ContentLength, len(body))
		}
		if inlineCode.MatchString(body) {
			t.Errorf("%s: inline script, handler or style: %q", what, inlineCode.FindString(body))
		}
	}
}

// inlineCode finds what a CSP without 'unsafe-inline' would block: scripts, event handlers,
// javascript: URLs and style attributes.
var inlineCode = regexp.MustCompile(`(?i)<script|\son[a-z]+\s*=|javascript:|\sstyle\s*=|<style`)

// TestHeaders_EveryPage: login, failed login, consent, and every error page.
func TestHeaders_EveryPage(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	b := newBrowser(t)
	resp := b.open(e.authorizeURL(nil))
	checkPageHeaders(t, "login page", resp, b.last)
	form := b.form
	resp = b.login(e, username, "wrong")
	checkPageHeaders(t, "failed login page", resp, b.last)
	resp = b.login(e, username, password)
	checkPageHeaders(t, "consent page", resp, b.last)
	form = b.form // the sign-in replaced the login page's request by one bound to the user
	if !strings.Contains(resp.Header.Get("Content-Security-Policy"), "form-action 'self' http://127.0.0.1:4499") {
		t.Errorf("consent CSP does not allow the redirect that follows the form: %q", resp.Header.Get("Content-Security-Policy"))
	}

	errorPages := []struct {
		name   string
		req    func() *http.Request
		status int
	}{
		{"unknown client", func() *http.Request {
			r, _ := http.NewRequest(http.MethodGet, e.authorizeURL(url.Values{"client_id": {"nobody"}}), nil)
			return r
		}, 400},
		{"unregistered redirect_uri", func() *http.Request {
			r, _ := http.NewRequest(http.MethodGet, e.authorizeURL(url.Values{"redirect_uri": {"https://evil.example/"}}), nil)
			return r
		}, 400},
		{"expired request", func() *http.Request {
			r, _ := http.NewRequest(http.MethodPost, e.url(httpapi.PathAuthorize), strings.NewReader("request_id=ar_gone&csrf_token=x&action=login"))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return r
		}, 400},
		{"forged CSRF token", func() *http.Request {
			v := url.Values{"request_id": {form.Get("request_id")}, "csrf_token": {"cs_forged"}, "action": {"login"}}
			r, _ := http.NewRequest(http.MethodPost, e.url(httpapi.PathAuthorize), strings.NewReader(v.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return r
		}, 403},
		{"method not allowed", func() *http.Request {
			r, _ := http.NewRequest(http.MethodPut, e.authorizeURL(nil), nil)
			return r
		}, 405},
		{"not a form", func() *http.Request {
			r, _ := http.NewRequest(http.MethodPost, e.url(httpapi.PathAuthorize), strings.NewReader("{}"))
			r.Header.Set("Content-Type", "application/json")
			return r
		}, 400},
	}
	for _, p := range errorPages {
		t.Run(p.name, func(t *testing.T) {
			resp, err := b.client.Do(p.req())
			if err != nil {
				t.Fatal(err)
			}
			b.read(resp)
			if resp.StatusCode != p.status {
				t.Fatalf("answered %d, want %d", resp.StatusCode, p.status)
			}
			checkPageHeaders(t, p.name, resp, b.last)
		})
	}
}

// TestHeaders_TokenBearingResponsesNoStore: the redirects that carry a code or an error, the
// token responses (code, refresh, error) and the revocation answers are never cached.
func TestHeaders_TokenBearingResponsesNoStore(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	noStore := func(what string, h http.Header) {
		t.Helper()
		if h.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: Cache-Control %q, want no-store", what, h.Get("Cache-Control"))
		}
	}
	b := newBrowser(t)
	b.open(e.authorizeURL(nil))
	b.login(e, username, password)
	resp := b.submit(e.url(httpapi.PathAuthorize), url.Values{"decision": {"allow"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("consent answered %d", resp.StatusCode)
	}
	noStore("redirect with the code", resp.Header)
	code, _ := url.Parse(resp.Header.Get("Location"))
	resp = newBrowser(t).open(e.authorizeURL(url.Values{"scope": {"admin"}}))
	noStore("redirect with an error", resp.Header)

	p := url.Values{"grant_type": {"authorization_code"}, "code": {code.Query().Get("code")}, "redirect_uri": {redirectURI}}
	st, tok, h := e.post(t, httpapi.PathToken, p, false, false)
	if st != 200 {
		t.Fatalf("exchange %d %v", st, tok)
	}
	noStore("code exchange", h)
	if h.Get("Pragma") != "no-cache" {
		t.Error("code exchange: no Pragma: no-cache (RFC 6749 5.1)")
	}
	st, _, h = e.post(t, httpapi.PathToken, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)}}, true, true)
	if st != 200 {
		t.Fatalf("refresh %d", st)
	}
	noStore("refresh", h)
	_, _, h = e.post(t, httpapi.PathToken, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"rt_nope"}}, false, false)
	noStore("token error", h)
	for _, path := range []string{httpapi.PathRevoke, httpapi.PathRevokeLegacy} {
		_, _, h = e.post(t, path, url.Values{"token": {"at_nope"}}, false, false)
		noStore(path, h)
		_, _, h = e.post(t, path, url.Values{"token": {"at_nope"}, "client_secret": {"wrong"}, "client_id": {clientID}}, false, false)
		noStore(path+" error", h)
	}
	// The endpoints of other issues that answer with token data, where this build serves them.
	for _, path := range []string{httpapi.PathUserinfo, httpapi.PathIntrospect} {
		req, _ := http.NewRequest(http.MethodPost, e.url(path), strings.NewReader("token="+tok["access_token"].(string)))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+tok["access_token"].(string))
		req.SetBasicAuth(clientID, clientSecret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			noStore(path, resp.Header)
		}
	}
}

// TestCookies_HostPrefixOverHTTPS: with an https base URL every cookie is __Host- prefixed,
// Secure, HttpOnly, SameSite=Lax, host-only with Path=/ (so a sibling domain cannot plant or
// overwrite it), the flow works with them, and an unprefixed cookie planted by someone else
// is ignored.
func TestCookies_HostPrefixOverHTTPS(t *testing.T) {
	e := newSecEnv(t, secOptions{tls: true})
	if !strings.HasPrefix(e.app.Config.BaseURL, "https://") {
		t.Fatalf("base URL %s", e.app.Config.BaseURL)
	}
	b := e.secBrowser(t)
	var set []*http.Cookie
	resp := b.open(e.authorizeURL(nil))
	set = append(set, resp.Cookies()...)
	resp = b.login(e, username, password)
	set = append(set, resp.Cookies()...)
	if !onConsent(b) {
		t.Fatalf("no consent page over https: %.300s", b.last)
	}
	names := map[string]bool{}
	for _, c := range set {
		names[c.Name] = true
		if !strings.HasPrefix(c.Name, "__Host-") || !c.Secure || !c.HttpOnly || c.Path != "/" || c.Domain != "" || c.SameSite != http.SameSiteLaxMode {
			t.Errorf("cookie %+v lacks the __Host- guarantees", c)
		}
	}
	if !names["__Host-sid"] || !names["__Host-bid"] {
		t.Fatalf("cookies set: %v", names)
	}
	loc := b.decide(e, "allow")
	if loc.Query().Get("code") == "" {
		t.Fatalf("no code over https: %s", loc.Redacted())
	}
	// A session cookie without the prefix, as a sibling domain or a plain-http page could
	// set it, is not read.
	sid := e.secCookie(b, "__Host-sid")
	planted := e.secBrowser(t)
	u, _ := url.Parse(e.srv.URL + "/")
	planted.client.Jar.SetCookies(u, []*http.Cookie{{Name: "sid", Value: sid, Path: "/"}})
	planted.open(e.authorizeURL(nil))
	if onConsent(planted) {
		t.Fatal("an unprefixed session cookie was honoured over https")
	}
	planted.client.Jar.SetCookies(u, []*http.Cookie{{Name: "__Host-sid", Value: sid, Path: "/", Secure: true}})
	planted.open(e.authorizeURL(nil))
	if !onConsent(planted) {
		t.Fatal("the __Host- session cookie was not honoured")
	}
}

// TestCookies_PlainHTTPLocalhost: on the plain-http local server cookies carry no __Host-
// prefix (browsers would drop them) and are still HttpOnly and SameSite=Lax.
func TestCookies_PlainHTTPLocalhost(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	b := newBrowser(t)
	resp := b.open(e.authorizeURL(nil))
	cs := resp.Cookies()
	if len(cs) == 0 {
		t.Fatal("no cookie set")
	}
	for _, c := range cs {
		if strings.HasPrefix(c.Name, "__Host-") || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" {
			t.Errorf("cookie %+v", c)
		}
	}
}
