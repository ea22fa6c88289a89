package web

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/httpapi"
)

// FuzzAuthorizeEndpoint drives the authorization endpoint and its forms with any method,
// query, Cookie header and form body: never a 5xx or a panic, every answer carries the page
// security headers, and a redirect only ever goes to a registered redirect URI.
func FuzzAuthorizeEndpoint(f *testing.F) {
	q := url.Values{"client_id": {fuzzClientID}, "redirect_uri": {fuzzRedirect}, "scope": {"openid email"}, "state": {"s"},
		"code_challenge": {strings.Repeat("a", 43)}, "code_challenge_method": {"S256"}}.Encode()
	f.Add(false, q, "", "")
	f.Add(false, q+"&prompt=none", "sid=ss_x; bid=abc", "")
	f.Add(false, "client_id="+fuzzClientID+"&redirect_uri=https://client.example/cb/&scope=openid", "", "")
	f.Add(false, "client_id="+fuzzClientID+"&redirect_uri=https://client.example/cbx&scope=openid&response_type=token&state=s", "", "")
	f.Add(false, "client_id="+fuzzClientID+"&redirect_uri=https://client.example/cb%2F..%2Fevil&scope=openid&prompt=none", "", "")
	f.Add(false, "client_id="+fuzzClientID+"&redirect_uri=http://127.0.0.1:9999/cb?x=1&scope=openid&response_type=token", "", "")
	f.Add(false, q+"&max_age=-1&ui_locales=fr", "bid="+strings.Repeat("b", 200), "")
	f.Add(true, "", "bid=x; __Host-sid=y; sid=", "request_id=ar_x&csrf_token=cs_x&action=login&username="+fuzzUser+"&password="+fuzzPassword)
	f.Add(true, "", "bid=\"x\"", q)
	f.Add(true, "", "", "request_id=ar_x&request_id=ar_y")
	pg := fuzzPages(f)
	f.Fuzz(func(t *testing.T, post bool, query, cookie, body string) {
		svc, st := fuzzService(t)
		h, err := NewAuthorizeHandler(svc, fuzzUsers(t, svc, st), pg, svc.Log, true)
		if err != nil {
			t.Fatal(err)
		}
		var r *http.Request
		if post {
			r = httptest.NewRequest(http.MethodPost, httpapi.PathAuthorize, strings.NewReader(body))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		} else {
			r = httptest.NewRequest(http.MethodGet, httpapi.PathAuthorize, nil)
		}
		r.URL.RawQuery = query
		r.Header.Set("Cookie", cookie)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code >= 500 {
			t.Fatalf("authorize answered %d", w.Code)
		}
		hd := w.Header()
		if !strings.Contains(hd.Get("Content-Security-Policy"), "frame-ancestors 'none'") || hd.Get("Cache-Control") != "no-store" {
			t.Fatalf("answer %d without the security headers: %v", w.Code, hd)
		}
		if loc := hd.Get("Location"); loc != "" {
			u, err := url.Parse(loc)
			if err != nil {
				t.Fatalf("unparsable Location %q", loc)
			}
			base := u.Scheme + "://" + u.Host + u.EscapedPath()
			if !slices.ContainsFunc(st.Client.RedirectURIs, func(reg string) bool { return strings.HasPrefix(reg, base) && (reg == base || reg[len(base)] == '?') }) {
				t.Fatalf("redirected to %q, not a registered redirect URI", loc)
			}
			if u.Query().Get("code") == "" && u.Query().Get("error") == "" {
				t.Fatalf("redirect %q carries neither code nor error", loc)
			}
		}
		for _, c := range w.Result().Cookies() {
			if !strings.HasPrefix(c.Name, "__Host-") || !c.Secure || !c.HttpOnly || c.Path != "/" || c.Domain != "" {
				t.Fatalf("cookie %q set without the __Host- guarantees", c.Name)
			}
		}
	})
}
