package e2e

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/acmebank/authserver/shared/app"
)

// recordingUpstream is a bank API backend that keeps every request it received.
type recordingUpstream struct {
	*httptest.Server
	mu   sync.Mutex
	seen []*http.Request
}

func newRecordingUpstream(t *testing.T) *recordingUpstream {
	u := &recordingUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.seen = append(u.seen, r.Clone(r.Context()))
		u.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(u.Close)
	return u
}

// take returns the requests received since the last take.
func (u *recordingUpstream) take() []*http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := u.seen
	u.seen = nil
	return out
}

// TestBankAPI_CallerNeverSetsIdentityHeaders: whatever spelling a caller gives the identity
// headers, X-Real-Ip or the forwarding headers (underscores for hyphens, any case, names of
// our X-Auth- family the proxy does not set), the upstream receives none of the caller's
// values: only ours, X-Real-Ip the caller's address as the proxy saw it.
func TestBankAPI_CallerNeverSetsIdentityHeaders(t *testing.T) {
	upstream := newRecordingUpstream(t)
	e := newEnv(t)
	e.mountAPI(t, app.APIOptions{Upstream: upstream.URL})
	access, _ := e.apiTokens(t, "openid")
	hostile := []string{
		"X-Auth-Uid", "X_Auth_Uid", "x_auth_uid", "X-AUTH-UID", "x-auth_uid", "X_Auth-Uid",
		"X_Auth_Company_Profile_Id", "x-auth-company_profile-id", "X_AUTH_COMPANY_USER_ID", "X-Auth-Company_User-Id",
		"X_Auth_Client_Id", "x_auth-client_id", "X_Auth_Scope", "X-AUTH_SCOPE", "X-Auth-Admin", "X_Auth_Roles",
		"X-Real-Ip", "X_Real_Ip", "x-real_ip", "X-REAL-IP",
		"X-Forwarded-For", "X_Forwarded_For", "x-forwarded-host", "X_Forwarded_Proto", "Forwarded",
	}
	const forged = "forged-by-the-caller"
	for _, name := range hostile {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, e.url("/v2/bank/accounts"), nil)
			req.Header.Set("Authorization", "Bearer "+access)
			req.Header[name] = []string{forged} // as spelled: not canonicalised
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			got := upstream.take()
			if resp.StatusCode != http.StatusOK || len(got) != 1 {
				t.Fatalf("answered %d, upstream saw %d requests", resp.StatusCode, len(got))
			}
			h := got[0].Header
			for k, vs := range h {
				for _, v := range vs {
					if strings.Contains(v, forged) {
						t.Errorf("the upstream received the caller's %s as %s: %q", name, k, v)
					}
				}
			}
			want := map[string]string{"X-Auth-Uid": "uid-alice", "X-Auth-Client-Id": clientID, "X-Auth-Scope": "openid", "X-Real-Ip": "127.0.0.1"}
			for k, v := range want {
				if vs := h.Values(k); len(vs) != 1 || vs[0] != v {
					t.Errorf("upstream %s = %q, want exactly %q", k, vs, v)
				}
			}
		})
	}
}

// noRedirects shows a redirect instead of following it.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// TestBankAPI_PathParameterThatEscapesItsRouteIsRefused: an invoice id holding an encoded path
// separator, an encoded dot segment, a backslash, a control character or a double-encoded
// separator is refused with 400 invalid_request (or never routed: 404; a literal dot segment is
// redirected to the normalised URL) and never reaches the upstream, with or without a valid
// token; ordinary ids still go through.
func TestBankAPI_PathParameterThatEscapesItsRouteIsRefused(t *testing.T) {
	upstream := newRecordingUpstream(t)
	e := newEnv(t)
	e.mountAPI(t, app.APIOptions{Upstream: upstream.URL})
	access, _ := e.apiTokens(t, "openid")
	for _, base := range []string{"/invoicing/invoices/", "/invoices/"} {
		for _, id := range []string{"..%2F..%2Fadmin", "..%2f..%2fadmin", "%2e%2e", "%2E", "..", ".", "a%5Cb", "..%5C..%5Cadmin",
			"..%252F..%252Fadmin", "a%00b", "a%0Ab", "%2e%2e%2fadmin", "%25"} {
			for _, auth := range []string{"Bearer " + access, "Bearer at_made-up", ""} {
				r := apiCall(t, noRedirects, http.MethodGet, e.url(base+id), auth, nil)
				// A literal dot segment never reaches the route: the mux redirects to the
				// normalised URL (RFC 3986 5.2.4), which names another resource or none.
				literalDots := id == "." || id == ".."
				if r.status != http.StatusBadRequest && r.status != http.StatusNotFound && !(literalDots && r.status/100 == 3) {
					t.Errorf("%s%s (%q): answered %d %s, want 400 or 404", base, id, auth, r.status, r.raw)
				}
				if r.status == http.StatusBadRequest && r.json["error"] != "invalid_request" {
					t.Errorf("%s%s: 400 with %s, want invalid_request", base, id, r.raw)
				}
				if got := upstream.take(); len(got) != 0 {
					t.Errorf("%s%s (%q): the upstream received %s", base, id, auth, got[0].URL.EscapedPath())
				}
			}
		}
		for _, id := range []string{"INV-1", "INV%201", "INV.1", "..INV", "INV..", "%C3%A9t%C3%A9"} {
			r := apiCall(t, http.DefaultClient, http.MethodGet, e.url(base+id), "Bearer "+access, nil)
			got := upstream.take()
			if r.status != http.StatusOK || len(got) != 1 {
				t.Errorf("%s%s: answered %d, upstream saw %d requests", base, id, r.status, len(got))
				continue
			}
			if p := got[0].URL.EscapedPath(); p != "/invoicing/invoices/"+id && !strings.EqualFold(p, "/invoicing/invoices/"+id) {
				t.Errorf("%s%s: upstream path %s", base, id, p)
			}
		}
	}
}
