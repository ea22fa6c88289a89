package e2e

import (
	"context"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acmebank/authserver/internal/webauthntest"
	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/web"
)

// The local bank app page (issue 31): on the local server, a customer signs in, sees the CIBA
// requests awaiting them with their binding message, and approves one with a passkey. These
// tests drive it over HTTP as a phone's browser would, against the local server's mux.

var (
	bankRefRe     = regexp.MustCompile(`<input type="hidden" name="ref" value="([^"]*)">`)
	bankBindingRe = regexp.MustCompile(`(?s)<p class="binding-code">(.*?)</p>`)
)

// bankAppEnv is an env with passkeys on, the acceptance client registered for the CIBA grant
// (poll mode) and alice holding the passkey it returns.
func bankAppEnv(t *testing.T) (*env, *authenticator) {
	t.Helper()
	e := newEnvFrom(t, envSetup{vars: passkeysOn})
	ctx := context.Background()
	if err := e.app.Store.UpdateClient(ctx, clientID, func(c oauth.Client) (oauth.Client, error) {
		c.GrantTypes = []string{oauth.GrantTypeAuthorizationCode, oauth.GrantTypeRefreshToken, oauth.GrantTypeCIBA}
		return c, nil
	}); err != nil {
		t.Fatal(err)
	}
	u, err := e.app.Store.GetUserByUsername(ctx, username)
	if err != nil {
		t.Fatal(err)
	}
	a := newAuthenticator(t, "localhost", e.srv.URL)
	c, err := e.app.Users.BeginPasskeyRegistration(ctx, &u)
	if err != nil {
		t.Fatal(err)
	}
	resp := a.CreateWith(t, webauthntest.PublicKey(t, string(c.Options)))
	if _, err := e.app.Users.FinishPasskeyRegistration(ctx, &u, authn.FirstFactor, c.State, []byte(resp), ""); err != nil {
		t.Fatal(err)
	}
	return e, a
}

// startCIBA is the acceptance client's backchannel authentication request for hint with a
// binding message, at the local server's endpoint; it returns the auth_req_id.
func (e *env) startCIBA(t *testing.T, hint, message string) string {
	t.Helper()
	st, body, _ := e.post(t, httpapi.PathBackchannel, url.Values{"scope": {"openid"}, "login_hint": {hint}, "binding_message": {message}}, true, false)
	id, _ := body["auth_req_id"].(string)
	if st != http.StatusOK || id == "" {
		t.Fatalf("backchannel authentication: %d %v", st, body)
	}
	return id
}

// bankTexts returns the unescaped contents of every match of re's first group.
func bankTexts(page string, re *regexp.Regexp) []string {
	var out []string
	for _, m := range re.FindAllStringSubmatch(page, -1) {
		out = append(out, html.UnescapeString(m[1]))
	}
	return out
}

// bankPost posts a form of the bank app page that is open with fields.
func (b *browser) bankPost(e *env, fields url.Values) *http.Response {
	b.t.Helper()
	return b.submit(e.url(web.PathBankApp), fields)
}

// TestBankApp_SignInSeeTheBindingMessageApproveWithAPasskey: alice opens the bank app page,
// signs in with her password, sees the client's request with its binding message, approves it
// with her passkey; the request is approved once with a strong amr, and the approval replayed
// or posted without the CSRF token is refused (403) writing nothing.
func TestBankApp_SignInSeeTheBindingMessageApproveWithAPasskey(t *testing.T) {
	e, key := bankAppEnv(t)
	authReqID := e.startCIBA(t, username, "K7-42")
	ref := oauth.BackchannelRequestID(authReqID)

	b := newBrowser(t)
	resp := b.open(e.url(web.PathBankApp))
	if resp.StatusCode != http.StatusOK || !strings.Contains(b.last, `name="password"`) {
		t.Fatalf("the signed-out page: %d %.300s", resp.StatusCode, b.last)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("the page's CSP %q does not forbid framing", csp)
	}
	resp = b.bankPost(e, url.Values{"action": {"sign_in"}, "username": {username}, "password": {password}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-in: %d %.300s", resp.StatusCode, b.last)
	}
	// The app's own session, under its own cookie: the authorization pages' sid is not set.
	var set []string
	for _, c := range resp.Cookies() {
		set = append(set, c.Name)
	}
	if !slices.Contains(set, "bsid") || slices.Contains(set, "sid") {
		t.Fatalf("the sign-in set cookies %q, want bsid and not sid", set)
	}
	if got := bankTexts(b.last, bankBindingRe); !slices.Equal(got, []string{"K7-42"}) || !strings.Contains(b.last, "Acceptance App") {
		t.Fatalf("the list shows binding messages %q; want the request's K7-42 from Acceptance App", got)
	}
	m := bankRefRe.FindStringSubmatch(b.last)
	if m == nil || html.UnescapeString(m[1]) != ref {
		t.Fatalf("the list names no request %s", ref)
	}
	if strings.Contains(b.last, authReqID) {
		t.Fatal("the page shows the auth_req_id")
	}
	b.bankPost(e, url.Values{"action": {"approve"}, "ref": {ref}})
	if !strings.Contains(b.last, `value="approve_passkey"`) {
		t.Fatalf("the approving page has no passkey: %.600s", b.last)
	}
	approval := url.Values{"action": {"approve_passkey"}, "credential": {key.get(t, b.last)}}
	for k := range b.form { // the replay below posts the very same form
		if approval.Get(k) == "" {
			approval.Set(k, b.form.Get(k))
		}
	}
	resp = b.bankPost(e, approval)
	if resp.StatusCode != http.StatusOK || !strings.Contains(b.last, `class="alert done"`) {
		t.Fatalf("the approval: %d %.600s", resp.StatusCode, b.last)
	}
	r, err := e.app.Store.GetBackchannelRequest(context.Background(), ref, time.Now())
	if err != nil || r.State != oauth.CIBAApproved || r.Grant == nil || !oauth.AMRStrong(r.Grant.AMR) {
		t.Fatalf("the stored request: %+v, %v; want approved with a strong amr", r, err)
	}
	// The client's poll gets the tokens.
	st, body, _ := e.post(t, httpapi.PathToken, url.Values{"grant_type": {oauth.GrantTypeCIBA}, "auth_req_id": {authReqID}}, true, false)
	if st != http.StatusOK || body["access_token"] == nil || body["id_token"] == nil {
		t.Fatalf("the poll after the approval: %d %v", st, body)
	}

	// The approval again, then a deny without the CSRF token: refused, nothing written.
	writes := e.writes.count()
	for _, fields := range []url.Values{approval, {"action": {"deny"}, "ref": {ref}}} {
		resp, err := b.client.PostForm(e.url(web.PathBankApp), fields)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("%s replayed or without CSRF: %d, want 403", fields.Get("action"), resp.StatusCode)
		}
	}
	if e.writes.count() != writes {
		t.Fatalf("refused posts wrote: %v", e.writes.list()[writes:])
	}
}

// TestBankApp_HostileBindingMessageIsInert: a stored request whose binding message is markup
// (the endpoint refuses such a message; the page does not rely on it) is shown as text.
func TestBankApp_HostileBindingMessageIsInert(t *testing.T) {
	e, _ := bankAppEnv(t)
	ctx := context.Background()
	now := time.Now()
	hostile := `<script>alert(1)</script><img src=x onerror=alert(2)>"'`
	if err := e.app.Store.PutBackchannelRequest(ctx, oauth.BackchannelRequest{ID: oauth.BackchannelRequestID("ciba_hostile"),
		ClientID: clientID, UID: "uid-alice", Scopes: oauth.Scopes{"openid"}, BindingMessage: hostile, Mode: oauth.CIBAModePoll,
		Interval: 5, CreatedAt: now, ExpiresAt: now.Add(time.Minute), KeepUntil: now.Add(time.Hour), NextPollAt: now, State: oauth.CIBAPending}); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t)
	b.open(e.url(web.PathBankApp))
	b.bankPost(e, url.Values{"action": {"sign_in"}, "username": {username}, "password": {password}})
	if strings.Contains(b.last, "<script>alert") || strings.Contains(b.last, "<img src=x") {
		t.Fatalf("the binding message's markup is on the page: %.2000s", b.last)
	}
	if got := bankTexts(b.last, bankBindingRe); !slices.Equal(got, []string{hostile}) {
		t.Fatalf("the binding message reads %q, want %q as text", got, hostile)
	}
}

// TestBankApp_OnlyTheLocalServerServesThePage: the authorize function's handler (web.Authorize,
// what the Lambda serves) has no bank app page; the local server's mux has it.
func TestBankApp_OnlyTheLocalServerServesThePage(t *testing.T) {
	e := newEnv(t)
	h, err := web.Authorize(e.app.Deps(), e.app.Users)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, web.PathBankApp, nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("the authorize function answers %s with %d, want 404", web.PathBankApp, rec.Code)
	}
	if _, pattern := e.mux.Handler(httptest.NewRequest(http.MethodGet, web.PathBankApp, nil)); pattern != web.PathBankApp {
		t.Fatalf("the local server routes %s to %q", web.PathBankApp, pattern)
	}
}
