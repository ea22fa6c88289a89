package e2e

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/seed"
)

// Threats of RFC 9700, RFC 6749 section 10, RFC 6819 and OIDC Core 16, one test each (or one
// table), each failing if its defence is removed. docs/SECURITY.md maps them.

// TestThreat_ImplicitAndHybridRefused: only the code flow exists (RFC 9700 2.1.2): response
// types that put tokens in the front channel are refused, back at the client, with the state.
func TestThreat_ImplicitAndHybridRefused(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	for _, rt := range []string{"token", "id_token", "id_token token", "code token", "code id_token", "none", "CODE"} {
		t.Run(rt, func(t *testing.T) {
			before := e.writes.count()
			resp := newBrowser(t).open(e.authorizeURL(url.Values{"response_type": {rt}}))
			loc, _ := url.Parse(resp.Header.Get("Location"))
			q := loc.Query()
			if resp.StatusCode != http.StatusSeeOther || q.Get("error") != "unsupported_response_type" || q.Get("state") != "st-123" ||
				q.Get("code") != "" || q.Get("access_token") != "" || loc.Fragment != "" {
				t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Location"))
			}
			if e.writes.count() != before {
				t.Fatal("a refused request was stored")
			}
		})
	}
}

// TestThreat_OtherGrantTypesRefused: no resource owner password credentials grant (RFC 9700
// 2.4), no client credentials, device or assertion grants; nothing is issued or stored.
func TestThreat_OtherGrantTypesRefused(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	for _, gt := range []string{"password", "implicit", "urn:ietf:params:oauth:grant-type:device_code",
		"urn:ietf:params:oauth:grant-type:jwt-bearer", "urn:ietf:params:oauth:grant-type:token-exchange", "AUTHORIZATION_CODE"} {
		t.Run(gt, func(t *testing.T) {
			before := e.writes.count()
			st, body, _ := e.post(t, httpapi.PathToken, url.Values{"grant_type": {gt}, "username": {username}, "password": {password}, "scope": {"openid"}}, false, false)
			if st != 400 || body["error"] != "unsupported_grant_type" || body["access_token"] != nil {
				t.Fatalf("%d %v", st, body)
			}
			if e.writes.count() != before {
				t.Fatal("the store changed")
			}
		})
	}
}

// TestThreat_TokenParametersOnlyInBody: parameters of the token endpoint are read from the body
// only; credentials in the URL (RFC 6749 2.3.1, 3.2: MUST NOT) are not honoured.
func TestThreat_TokenParametersOnlyInBody(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	code := e.code(t, nil)
	q := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI}, "client_id": {clientID}, "client_secret": {clientSecret}}
	req, _ := http.NewRequest(http.MethodPost, e.url(httpapi.PathToken)+"?"+q.Encode(), strings.NewReader(""))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if st, body, _ := do(t, req); st == 200 || body["access_token"] != nil {
		t.Fatalf("parameters in the URL were honoured: %d", st)
	}
}

// TestThreat_PKCEDowngrade: a verifier sent for a code issued without a challenge is refused
// (RFC 9700 4.8.2), and a challenge method without a challenge is an error, so an attacker
// cannot strip PKCE from a request.
func TestThreat_PKCEDowngrade(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	st, body := e.exchange(t, e.code(t, nil), url.Values{"code_verifier": {randomVerifier()}})
	if st != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("verifier for a code without challenge: %d %v", st, body)
	}
	for _, extra := range []url.Values{
		{"code_challenge_method": {"S256"}},
		{"code_challenge": {"short"}, "code_challenge_method": {"S256"}},
		{"code_challenge": {strings.Repeat("a", 43)}},
	} {
		resp := newBrowser(t).open(e.authorizeURL(extra))
		loc, _ := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusSeeOther || loc.Query().Get("error") != "invalid_request" {
			t.Errorf("%v: %d %s", extra, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	st, body = e.exchange(t, e.code(t, nil), url.Values{"code_verifier": {"too-short"}})
	if st != 400 || body["error"] != "invalid_request" {
		t.Fatalf("malformed verifier: %d %v", st, body)
	}
}

// TestThreat_CodeLifetime: a code lives at most AUTH_CODE_TTL (RFC 6749 4.1.2, RFC 6819
// 5.1.5.3); a late exchange is invalid_grant.
func TestThreat_CodeLifetime(t *testing.T) {
	e := newSecEnv(t, secOptions{env: map[string]string{config.EnvCodeTTL: "1m"}})
	code := e.code(t, nil)
	e.clock.Advance(61 * time.Second)
	if st, body := e.exchange(t, code, nil); st != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("expired code: %d %v", st, body)
	}
	code = e.code(t, nil)
	e.clock.Advance(59 * time.Second)
	if st, body := e.exchange(t, code, nil); st != 200 {
		t.Fatalf("code within its lifetime: %d %v", st, body)
	}
}

// TestThreat_TokenTypeConfusion: every secret is usable only as what it is: a refresh token or
// code is no access token, an access token or code is no refresh token, a token is no code
// (RFC 6819 5.1.5.x; the type prefixes are for people, the store keeps the kind).
func TestThreat_TokenTypeConfusion(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	tok := e.secTokens(t, nil)
	at, rt, idt := tok["access_token"].(string), tok["refresh_token"].(string), tok["id_token"].(string)
	code := e.code(t, nil)
	for name, s := range map[string]string{"refresh token": rt, "id_token": idt, "code": code} {
		if e.tokenValid(s) {
			t.Errorf("a %s is accepted as an access token", name)
		}
	}
	for name, s := range map[string]string{"access token": at, "id_token": idt, "code": code} {
		if st, body := e.secRefresh(t, s); st != 400 || body["error"] != "invalid_grant" {
			t.Errorf("a %s as refresh token: %d %v", name, st, body)
		}
	}
	for name, s := range map[string]string{"access token": at, "refresh token": rt} {
		if st, body := e.exchange(t, s, nil); st != 400 || body["error"] != "invalid_grant" {
			t.Errorf("a %s as code: %d %v", name, st, body)
		}
	}
	if !e.tokenValid(at) {
		t.Fatal("the access token stopped working")
	}
	if st, _ := e.secRefresh(t, rt); st != 200 {
		t.Fatal("the refresh token stopped working")
	}
}

// TestThreat_RefreshTokenBoundToClient: a refresh token presented by another client is
// invalid_grant and is not spent (RFC 6749 10.4, RFC 9700 4.14).
func TestThreat_RefreshTokenBoundToClient(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	rt := e.secTokens(t, nil)["refresh_token"].(string)
	st, body, _ := e.post(t, httpapi.PathToken, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt},
		"client_id": {otherID}, "client_secret": {otherSecret}}, false, false)
	if st != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("another client's refresh: %d %v", st, body)
	}
	if st, body := e.secRefresh(t, rt); st != 200 {
		t.Fatalf("the owner's refresh after another client's try: %d %v", st, body)
	}
}

// TestThreat_ConsentAnsweredOnce: a consent form replayed (same request id and CSRF token)
// issues nothing more: a pending request is taken once.
func TestThreat_ConsentAnsweredOnce(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	b := newBrowser(t)
	b.open(e.authorizeURL(nil))
	b.login(e, username, password)
	form := b.form
	b.decide(e, "allow")
	b.form = form
	resp := b.submit(e.url(httpapi.PathAuthorize), url.Values{"decision": {"allow"}})
	if resp.StatusCode == http.StatusSeeOther || resp.Header.Get("Location") != "" {
		t.Fatalf("a replayed consent answered %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	n := 0
	for _, w := range e.writes.list() {
		if w == "CreateCode" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d codes issued for one consent", n)
	}
}

// TestThreat_RedirectAfterFormIs303: the answer to the consent form redirects with 303, so the
// browser follows with a GET; a 307 would re-post the form, credentials included, to the
// client (RFC 9700 4.12).
func TestThreat_RedirectAfterFormIs303(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	for _, decision := range []string{"allow", "deny"} {
		b := newBrowser(t)
		b.open(e.authorizeURL(nil))
		b.login(e, username, password)
		resp := b.submit(e.url(httpapi.PathAuthorize), url.Values{"decision": {decision}})
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("%s answered %d, want 303", decision, resp.StatusCode)
		}
	}
}

// TestThreat_StateAndIssuerReturnedIntact: state comes back byte for byte whatever it holds
// (CSRF protection of the client, RFC 6749 10.12), without breaking the Location header, and
// every authorization response names the issuer (mix-up, RFC 9207, RFC 9700 4.4).
func TestThreat_StateAndIssuerReturnedIntact(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	state := "a&b=c#d\r\nSet-Cookie: x=1 \"<é>\" %zz+"
	iss := e.app.Config.Issuer
	check := func(what string, resp *http.Response, wantErr string) {
		t.Helper()
		raw := resp.Header.Get("Location")
		if strings.ContainsAny(raw, "\r\n ") || len(resp.Header.Values("Set-Cookie")) > 1 && strings.Contains(strings.Join(resp.Header.Values("Set-Cookie"), ";"), "x=1") {
			t.Fatalf("%s: Location %q breaks the header", what, raw)
		}
		loc, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		q := loc.Query()
		if q.Get("state") != state || q.Get("iss") != iss || q.Get("error") != wantErr {
			t.Fatalf("%s: state %q iss %q error %q", what, q.Get("state"), q.Get("iss"), q.Get("error"))
		}
	}
	b := newBrowser(t)
	b.open(e.authorizeURL(url.Values{"state": {state}}))
	b.login(e, username, password)
	check("code", b.submit(e.url(httpapi.PathAuthorize), url.Values{"decision": {"allow"}}), "")
	b = newBrowser(t)
	b.open(e.authorizeURL(url.Values{"state": {state}}))
	b.login(e, username, password)
	check("deny", b.submit(e.url(httpapi.PathAuthorize), url.Values{"decision": {"deny"}}), "access_denied")
	check("invalid_scope", newBrowser(t).open(e.authorizeURL(url.Values{"state": {state}, "scope": {"openid admin"}})), "invalid_scope")
	check("prompt=none", newBrowser(t).open(e.authorizeURL(url.Values{"state": {state}, "prompt": {"none"}})), "login_required")
}

// TestThreat_ErrorDescriptionsClean: an error_description that quotes the caller's input keeps
// to the characters RFC 6749 5.2 allows and is bounded, so it cannot carry markup or break a
// client's parser.
func TestThreat_ErrorDescriptionsClean(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	rt := e.secTokens(t, nil)["refresh_token"].(string)
	st, body, _ := e.post(t, httpapi.PathToken, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt},
		"scope": {"openid <script>\"\\é\x01" + strings.Repeat("x", 500)}}, false, false)
	d, _ := body["error_description"].(string)
	if st != 400 || body["error"] != "invalid_scope" || d == "" {
		t.Fatalf("%d %v", st, body)
	}
	if len(d) > 200 {
		t.Errorf("description of %d characters", len(d))
	}
	for _, c := range []byte(d) {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			t.Fatalf("description %q has %q", d, c)
		}
	}
}

// TestThreat_PagesEscapeInput: what a user typed and what an operator registered is escaped on
// the pages (reflected and stored XSS; the CSP is the second line).
func TestThreat_PagesEscapeInput(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	evil := `"><script>alert(1)</script><img src=x onerror=alert(2)>`
	f := &seed.File{Clients: []seed.Client{{ClientID: "evil-name", ClientSecret: strings.Repeat("s", 32), Name: evil,
		RedirectURIs: []string{otherURI}, Scopes: []string{"openid"}}}}
	if _, err := seed.Load(context.Background(), e.app.Store, f, cheapHasher, time.Now()); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t)
	b.open(e.authorizeURL(url.Values{"client_id": {"evil-name"}, "redirect_uri": {otherURI}, "scope": {"openid"}}))
	pages := b.last
	b.login(e, evil, "wrong")
	pages += b.last
	b.login(e, username, password)
	pages += b.last
	if !onConsent(b) {
		t.Fatalf("no consent page: %.300s", b.last)
	}
	for _, raw := range []string{"<script>alert(1)", "<img src=x onerror"} {
		if strings.Contains(pages, raw) {
			t.Fatalf("unescaped %q on a page", raw)
		}
	}
}

// TestThreat_DisabledClientStops: a disabled client can neither start an authorization nor
// use its credentials (RFC 6819 5.2.3.x): its code and refresh tokens are dead.
func TestThreat_DisabledClientStops(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	rt := e.secTokens(t, nil)["refresh_token"].(string)
	code := e.code(t, nil)
	if err := e.app.Store.UpdateClient(context.Background(), clientID, func(c oauth.Client) (oauth.Client, error) {
		c.Disabled = true
		return c, nil
	}); err != nil {
		t.Fatal(err)
	}
	resp := newBrowser(t).open(e.authorizeURL(nil))
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || loc.Query().Get("error") != "unauthorized_client" {
		t.Fatalf("authorize for a disabled client: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if st, body := e.secRefresh(t, rt); st != 401 || body["error"] != "invalid_client" {
		t.Fatalf("refresh: %d %v", st, body)
	}
	if st, body := e.exchange(t, code, nil); st != 401 || body["error"] != "invalid_client" {
		t.Fatalf("exchange: %d %v", st, body)
	}
}

// TestThreat_DisabledUserLosesSession: disabling a user ends their signed-in session on our
// pages at once and refuses their password.
func TestThreat_DisabledUserLosesSession(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	b := newBrowser(t)
	e.loginAttempt(t, b, username, password)
	if !onConsent(b) {
		t.Fatal("no consent page")
	}
	if err := e.app.Store.UpdateUser(context.Background(), "uid-alice", func(u oauth.User) (oauth.User, error) {
		u.Disabled = true
		return u, nil
	}); err != nil {
		t.Fatal(err)
	}
	b.submit(e.url(httpapi.PathAuthorize), url.Values{"decision": {"allow"}})
	if onConsent(b) || strings.Contains(b.last, "code=") {
		t.Fatal("a disabled user's session answered the consent")
	}
	b.open(e.authorizeURL(nil))
	if onConsent(b) {
		t.Fatal("a disabled user's session skipped the login")
	}
	b.login(e, username, password)
	if onConsent(b) {
		t.Fatal("a disabled user signed in")
	}
}

// TestThreat_CertificateBoundTokens: tokens issued over mutual TLS are bound to the client's
// certificate (RFC 8705 3, RFC 9700 4.10.1): without it, or with another, the access token is
// invalid and the refresh token does not refresh.
func TestThreat_CertificateBoundTokens(t *testing.T) {
	e := newSecEnv(t, secOptions{})
	ctx := context.Background()
	svc := e.app.Service
	client, err := svc.AuthenticateClient(ctx, oauth.ClientCredentials{ID: clientID, Secret: clientSecret})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := svc.ExchangeCode(ctx, client, oauth.CodeExchange{Code: e.code(t, nil), RedirectURI: redirectURI, CertThumbprint: "thumb-1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cert string
		ok   bool
	}{{"", false}, {"thumb-2", false}, {"thumb-1", true}} {
		if _, err := svc.ValidateAccessToken(ctx, tok.AccessToken, c.cert); (err == nil) != c.ok {
			t.Errorf("access token with certificate %q: %v", c.cert, err)
		}
	}
	if _, err := svc.Refresh(ctx, client, oauth.RefreshRequest{RefreshToken: tok.RefreshToken}); err == nil {
		t.Fatal("a certificate-bound refresh token refreshed without the certificate")
	}
}
