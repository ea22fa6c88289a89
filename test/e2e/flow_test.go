package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/pages"
)

func (e *env) oauth2Config(scopes ...string) *oauth2.Config {
	return &oauth2.Config{
		ClientID: clientID, ClientSecret: clientSecret, RedirectURL: redirectURI, Scopes: scopes,
		Endpoint: oauth2.Endpoint{AuthURL: e.url(httpapi.PathAuthorize), TokenURL: e.url(httpapi.PathToken)},
	}
}

func (e *env) verifier(t *testing.T) *oidc.IDTokenVerifier {
	t.Helper()
	ctx := context.Background()
	p, err := oidc.NewProvider(ctx, e.app.Config.Issuer)
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	return p.Verifier(&oidc.Config{ClientID: clientID})
}

// TestFlow_StandardClients runs the whole flow with golang.org/x/oauth2 and go-oidc: discovery,
// authorize, login, consent, code exchange with PKCE, id_token verification against the JWKS.
func TestFlow_StandardClients(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	verifier := e.verifier(t)
	conf := e.oauth2Config("openid", "email", "phone", "profile")
	pkce := oauth2.GenerateVerifier()
	authURL := conf.AuthCodeURL("state-xyz", oauth2.S256ChallengeOption(pkce), oidc.Nonce("n-0S6_WzA2Mj"))
	loc := e.authorize(t, authURL)
	if got := loc.Query().Get("state"); got != "state-xyz" {
		t.Fatalf("state = %q", got)
	}
	if got := loc.Query().Get("iss"); got != e.app.Config.Issuer {
		t.Fatalf("iss = %q, want %q (RFC 9207)", got, e.app.Config.Issuer)
	}
	if loc.Scheme+"://"+loc.Host+loc.Path != redirectURI {
		t.Fatalf("redirected to %s", loc.Redacted())
	}
	tok, err := conf.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(pkce))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	if tok.TokenType != "Bearer" || tok.RefreshToken == "" || tok.Expiry.IsZero() {
		t.Fatalf("token = %+v", tok)
	}
	if !strings.HasPrefix(tok.AccessToken, "at_") || !strings.HasPrefix(tok.RefreshToken, "rt_") {
		t.Fatalf("tokens lack their type prefixes")
	}
	meta, _ := tok.Extra("metadata").(map[string]any)
	if meta["uid"] != "uid-alice" || meta["companyProfileId"] != "cp-1" || meta["companyUserId"] != "cu-1" {
		t.Fatalf("metadata = %v", tok.Extra("metadata"))
	}
	if s := tok.Extra("scope"); s != "openid email phone profile" {
		t.Fatalf("scope = %v", s)
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := verifier.Verify(ctx, raw)
	if err != nil {
		t.Fatalf("verify id_token: %v", err)
	}
	if idt.Nonce != "n-0S6_WzA2Mj" || idt.Subject != "uid-alice" {
		t.Fatalf("nonce %q sub %q", idt.Nonce, idt.Subject)
	}
	if err := idt.VerifyAccessToken(tok.AccessToken); err != nil {
		t.Fatalf("at_hash: %v", err)
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{
		"email": "alice@example.com", "email_verified": true, "phone": "+33612345678", "phone_number": "+33612345678",
		"name": "Alice Martin", "given_name": "Alice", "family_name": "Martin", "birthdate": "1990-04-01", "gender": "female",
		"picture": "https://img.example/alice.png", "locale": "fr-FR", "zone_info": "Europe/Paris", "zoneinfo": "Europe/Paris",
		"updated_at": float64(1700000000), "aud": clientID,
	} {
		if claims[k] != want {
			t.Errorf("claim %s = %v, want %v", k, claims[k], want)
		}
	}
	if _, ok := claims["auth_time"]; !ok {
		t.Error("no auth_time")
	}
	if !e.tokenValid(tok.AccessToken) {
		t.Error("the access token is not accepted")
	}
}

// TestFlow_ClaimsFollowScopes: each scope releases its claims and only those.
func TestFlow_ClaimsFollowScopes(t *testing.T) {
	e := newEnv(t)
	verifier := e.verifier(t)
	cases := []struct {
		scope      string
		want, deny []string
	}{
		{"openid", nil, []string{"email", "phone", "name", "zoneinfo"}},
		{"openid email", []string{"email", "email_verified"}, []string{"phone", "name"}},
		{"openid phone", []string{"phone", "phone_number"}, []string{"email", "name"}},
		{"openid profile", []string{"name", "given_name", "family_name", "birthdate", "gender", "picture", "locale", "updated_at", "zone_info", "zoneinfo"}, []string{"email", "phone"}},
	}
	for _, c := range cases {
		t.Run(c.scope, func(t *testing.T) {
			code := e.code(t, url.Values{"scope": {c.scope}})
			st, body := e.exchange(t, code, nil)
			if st != 200 {
				t.Fatalf("exchange %d %v", st, body)
			}
			idt, err := verifier.Verify(context.Background(), body["id_token"].(string))
			if err != nil {
				t.Fatal(err)
			}
			var claims map[string]any
			idt.Claims(&claims)
			for _, k := range c.want {
				if _, ok := claims[k]; !ok {
					t.Errorf("missing %s", k)
				}
			}
			for _, k := range c.deny {
				if _, ok := claims[k]; ok {
					t.Errorf("unexpected %s", k)
				}
			}
		})
	}
}

// TestFlow_NoOpenIDNoIDToken: without openid there is no id_token.
func TestFlow_NoOpenIDNoIDToken(t *testing.T) {
	e := newEnv(t)
	st, body := e.exchange(t, e.code(t, url.Values{"scope": {"email"}}), nil)
	if st != 200 || body["id_token"] != nil || body["access_token"] == nil {
		t.Fatalf("%d %v", st, body)
	}
}

// TestFlow_Deny: refusing consent redirects with access_denied and the state, and issues no code.
func TestFlow_Deny(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t)
	b.open(e.authorizeURL(nil))
	b.login(e, username, password)
	loc := b.decide(e, "deny")
	q := loc.Query()
	if q.Get("error") != "access_denied" || q.Get("state") != "st-123" || q.Get("code") != "" {
		t.Fatalf("deny redirect %s", loc.Redacted())
	}
	for _, w := range e.writes.list() {
		if w == "CreateCode" {
			t.Fatal("a code was created on deny")
		}
	}
}

// TestFlow_SessionSparesSecondLogin: a signed-in user goes straight to consent, unless
// prompt=login.
func TestFlow_SessionSparesSecondLogin(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t)
	b.open(e.authorizeURL(nil))
	b.login(e, username, password)
	b.decide(e, "allow")
	b.open(e.authorizeURL(nil))
	if !strings.Contains(b.last, `value="allow"`) {
		t.Fatal("second authorization did not go straight to consent")
	}
	b.open(e.authorizeURL(url.Values{"prompt": {"login"}}))
	if !strings.Contains(b.last, `type="password"`) {
		t.Fatal("prompt=login did not force a login")
	}
}

// TestFlow_WrongPasswordGenericMessage: a wrong password and an unknown user get one message.
func TestFlow_WrongPasswordGenericMessage(t *testing.T) {
	e := newEnv(t)
	var pages []string
	for _, u := range []string{username, "nobody"} {
		b := newBrowser(t)
		b.open(e.authorizeURL(nil))
		b.login(e, u, "wrong-password")
		if !strings.Contains(b.last, `role="alert"`) {
			t.Fatalf("no error shown for %s", u)
		}
		pages = append(pages, b.last[strings.Index(b.last, `role="alert"`):][:120])
	}
	if pages[0] != pages[1] {
		t.Fatalf("messages differ: %q vs %q", pages[0], pages[1])
	}
}

// TestFlow_PKCE: the right verifier works; a wrong or missing one is invalid_grant.
func TestFlow_PKCE(t *testing.T) {
	e := newEnv(t)
	v := randomVerifier()
	sum := sha256.Sum256([]byte(v))
	challenge := base64.RawURLEncoding.EncodeToString(sum[:])
	pk := url.Values{"code_challenge": {challenge}, "code_challenge_method": {"S256"}}
	for _, c := range []struct {
		name     string
		verifier string
		status   int
		errCode  string
	}{
		{"right", v, 200, ""},
		{"wrong", randomVerifier(), 400, "invalid_grant"},
		{"missing", "", 400, "invalid_grant"},
	} {
		t.Run(c.name, func(t *testing.T) {
			extra := url.Values{}
			if c.verifier != "" {
				extra.Set("code_verifier", c.verifier)
			}
			st, body := e.exchange(t, e.code(t, pk), extra)
			if st != c.status || (c.errCode != "" && body["error"] != c.errCode) {
				t.Fatalf("%d %v", st, body)
			}
		})
	}
	t.Run("plain refused", func(t *testing.T) {
		b := newBrowser(t)
		resp := b.open(e.authorizeURL(url.Values{"code_challenge": {challenge}, "code_challenge_method": {"plain"}}))
		loc, _ := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusSeeOther || loc.Query().Get("error") != "invalid_request" {
			t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Location"))
		}
	})
}

// TestFlow_CodeReuseRevokes: a code presented twice fails, and revokes what the first exchange
// issued.
func TestFlow_CodeReuseRevokes(t *testing.T) {
	e := newEnv(t)
	code := e.code(t, nil)
	st, first := e.exchange(t, code, nil)
	if st != 200 {
		t.Fatalf("first exchange %d %v", st, first)
	}
	st, second := e.exchange(t, code, nil)
	if st != 400 || second["error"] != "invalid_grant" {
		t.Fatalf("second exchange %d %v", st, second)
	}
	if e.tokenValid(first["access_token"].(string)) {
		t.Fatal("the access token of a replayed code still works")
	}
	st, body, _ := e.post(t, httpapi.PathToken, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {first["refresh_token"].(string)}}, false, false)
	if st != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("refresh after replay %d %v", st, body)
	}
	if !strings.Contains(e.logs.String(), `"event":"code_reuse_detected"`) {
		t.Fatal("no audit event for the replay")
	}
}

// TestFlow_ClientAuthentication covers both methods, both encodings and wrong secrets.
func TestFlow_ClientAuthentication(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		name          string
		basic, asJSON bool
	}{{"post form", false, false}, {"post json", false, true}, {"basic form", true, false}, {"basic json", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			code := e.code(t, nil)
			st, body, h := e.post(t, httpapi.PathToken, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI}}, c.basic, c.asJSON)
			if st != 200 || body["access_token"] == nil {
				t.Fatalf("%d %v", st, body)
			}
			if h.Get("Cache-Control") != "no-store" {
				t.Fatalf("Cache-Control %q", h.Get("Cache-Control"))
			}
		})
	}
	t.Run("wrong secret", func(t *testing.T) {
		code := e.code(t, nil)
		st, body, h := e.post(t, httpapi.PathToken, url.Values{"grant_type": {"authorization_code"}, "code": {code},
			"redirect_uri": {redirectURI}, "client_id": {clientID}, "client_secret": {"wrong-secret-0123456789abcdef0123"}}, false, false)
		if st != 401 || body["error"] != "invalid_client" || h.Get("WWW-Authenticate") == "" {
			t.Fatalf("%d %v", st, body)
		}
		// The code was not spent by the failed attempt.
		if st, _ := e.exchange(t, code, nil); st != 200 {
			t.Fatalf("the code did not survive a failed client authentication: %d", st)
		}
	})
	t.Run("another client's code", func(t *testing.T) {
		code := e.code(t, nil)
		st, body, _ := e.post(t, httpapi.PathToken, url.Values{"grant_type": {"authorization_code"}, "code": {code},
			"redirect_uri": {redirectURI}, "client_id": {otherID}, "client_secret": {otherSecret}}, false, false)
		if st != 400 || body["error"] != "invalid_grant" {
			t.Fatalf("%d %v", st, body)
		}
		if st, _ := e.exchange(t, code, nil); st != 200 {
			t.Fatalf("another client's attempt spent the code: %d", st)
		}
	})
}

// TestFlow_RedirectURIMismatch: at authorize an unregistered URI gets an error page, never a
// redirect; at the token endpoint a different URI is invalid_grant.
func TestFlow_RedirectURIMismatch(t *testing.T) {
	e := newEnv(t)
	for _, bad := range []string{"http://127.0.0.1:4499/callback/", "http://127.0.0.1:4499/CALLBACK", "http://evil.example/callback",
		"http://127.0.0.1:4499/callback?x=1", "http://127.0.0.1:4499/callback#f", "http://user@127.0.0.1:4499/callback",
		"http://127.0.0.1:4499/%63allback", "http://127.0.0.1:4499"} {
		b := newBrowser(t)
		resp := b.open(e.authorizeURL(url.Values{"redirect_uri": {bad}}))
		if resp.StatusCode != 400 || resp.Header.Get("Location") != "" {
			t.Errorf("%s: %d Location %q", bad, resp.StatusCode, resp.Header.Get("Location"))
		}
		if !strings.Contains(b.last, html.EscapeString(pages.Messages("en")["error.redirect.heading"])) {
			t.Errorf("%s: the error page does not say the return address is the problem", bad)
		}
	}
	code := e.code(t, nil)
	st, body := e.exchange(t, code, url.Values{"redirect_uri": {"http://127.0.0.1:4499/other"}})
	if st != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("%d %v", st, body)
	}
}

// TestFlow_DottedTransfersScope: both spellings name one scope; the response spells it as asked.
func TestFlow_DottedTransfersScope(t *testing.T) {
	e := newEnv(t)
	for _, spelling := range []string{"bank:transfers.write", "bank:transfers:write"} {
		st, body := e.exchange(t, e.code(t, url.Values{"scope": {"openid " + spelling}}), nil)
		if st != 200 || body["scope"] != "openid "+spelling {
			t.Fatalf("%s: %d %v", spelling, st, body)
		}
		tok, err := e.app.Service.ValidateAccessToken(context.Background(), body["access_token"].(string), "")
		if err != nil || !tok.Scopes.Has("bank:transfers:write") || !tok.Scopes.Has("bank:transfers.write") {
			t.Fatalf("%s: token scopes %v %v", spelling, tok.Scopes, err)
		}
	}
}

// TestAuthorize_ErrorsRedirectWithState: request errors after the client and redirect URI are
// trusted go back to the client with error, description and state.
func TestAuthorize_ErrorsRedirectWithState(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		name  string
		extra url.Values
		want  string
	}{
		{"response_type token", url.Values{"response_type": {"token"}}, "unsupported_response_type"},
		{"unknown scope", url.Values{"scope": {"openid admin"}}, "invalid_scope"},
		{"scope not allowed", url.Values{"client_id": {otherID}, "redirect_uri": {otherURI}, "scope": {"openid phone"}}, "invalid_scope"},
		{"no scope", url.Values{"scope": {""}}, "invalid_scope"},
		{"prompt none", url.Values{"prompt": {"none"}}, "login_required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newBrowser(t)
			resp := b.open(e.authorizeURL(c.extra))
			loc, _ := url.Parse(resp.Header.Get("Location"))
			if resp.StatusCode != http.StatusSeeOther || loc.Query().Get("error") != c.want || loc.Query().Get("state") != "st-123" {
				t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Location"))
			}
			if loc.Query().Get("error_description") == "" {
				t.Fatal("no error_description")
			}
		})
	}
	t.Run("repeated parameter", func(t *testing.T) {
		b := newBrowser(t)
		resp := b.open(e.authorizeURL(nil) + "&scope=openid")
		loc, _ := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusSeeOther || loc.Query().Get("error") != "invalid_request" {
			t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Location"))
		}
	})
	t.Run("unknown client", func(t *testing.T) {
		b := newBrowser(t)
		resp := b.open(e.authorizeURL(url.Values{"client_id": {"nope"}}))
		if resp.StatusCode != 400 || resp.Header.Get("Location") != "" {
			t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Location"))
		}
	})
}

// TestPages_SecurityHeaders: every page has the CSP (form-action allowing the redirect URI's
// origin), no framing, no referrer, no caching.
func TestPages_SecurityHeaders(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t)
	resp := b.open(e.authorizeURL(nil))
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "frame-ancestors 'none'", "form-action 'self' http://127.0.0.1:4499"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "script-src") || strings.Contains(b.last, "<script") {
		t.Error("pages must not use scripts")
	}
	for h, want := range map[string]string{"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"} {
		if resp.Header.Get(h) != want {
			t.Errorf("%s = %q", h, resp.Header.Get(h))
		}
	}
	setCookie := strings.Join(resp.Header.Values("Set-Cookie"), "\n")
	if !strings.Contains(setCookie, "HttpOnly") || !strings.Contains(setCookie, "SameSite=Lax") {
		t.Errorf("cookies %q", setCookie)
	}
}

// TestPages_CSRF: a form posted without the browser's binding cookie, or with a wrong token,
// is refused.
func TestPages_CSRF(t *testing.T) {
	e := newEnv(t)
	b := newBrowser(t)
	b.open(e.authorizeURL(nil))
	attacker := newBrowser(t)
	attacker.form = b.form // the attacker knows the form's fields but not the victim's cookie
	attacker.last = b.last
	resp := attacker.login(e, username, password)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-browser post answered %d", resp.StatusCode)
	}
	b.form.Set("csrf_token", "cs_forged")
	resp = b.login(e, username, password)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("forged token answered %d", resp.StatusCode)
	}
}

// TestDiscovery_NamesEverything: the discovery document names the endpoints, scopes, methods.
func TestDiscovery_NamesEverything(t *testing.T) {
	e := newEnv(t)
	req, _ := http.NewRequest(http.MethodGet, e.url(httpapi.PathDiscovery), nil)
	st, doc, _ := do(t, req)
	if st != 200 || doc["issuer"] != e.app.Config.Issuer || doc["token_endpoint"] != e.url(httpapi.PathToken) ||
		doc["jwks_uri"] != e.url(httpapi.PathJWKS) || doc["revocation_endpoint"] != e.url(httpapi.PathRevoke) {
		t.Fatalf("%d %v", st, doc)
	}
	methods, _ := doc["code_challenge_methods_supported"].([]any)
	if len(methods) != 1 || methods[0] != "S256" {
		t.Fatalf("PKCE methods %v", methods)
	}
	req, _ = http.NewRequest(http.MethodGet, e.url(httpapi.PathJWKS), nil)
	st, jwks, h := do(t, req)
	keys, _ := jwks["keys"].([]any)
	if st != 200 || len(keys) == 0 || h.Get("ETag") == "" || !strings.Contains(h.Get("Cache-Control"), "max-age=") {
		t.Fatalf("%d %v %v", st, jwks, h)
	}
	k := keys[0].(map[string]any)
	if k["kid"] == "" || k["alg"] != "RS256" || k["kty"] != "RSA" || k["use"] != "sig" {
		t.Fatalf("key %v", k)
	}
}

// TestFlow_IDTokensNameTheSessionBySID: every id_token carries sid, the session it was given in
// (OIDC Front-Channel Logout 1.0 3, Back-Channel Logout 1.0 2.4): the same for two
// authorizations in one browser session and after a refresh, another for another browser's
// session; it is neither the session cookie nor the hash the store keys the session by.
func TestFlow_IDTokensNameTheSessionBySID(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	verifier := e.verifier(t)
	sid := func(body map[string]any) string {
		t.Helper()
		raw, _ := body["id_token"].(string)
		idt, err := verifier.Verify(ctx, raw)
		if err != nil {
			t.Fatalf("verify id_token: %v (%v)", err, body)
		}
		var c struct {
			SID string `json:"sid"`
		}
		if err := idt.Claims(&c); err != nil {
			t.Fatal(err)
		}
		return c.SID
	}
	codeOf := func(loc *url.URL) string {
		t.Helper()
		if loc.Query().Get("code") == "" {
			t.Fatalf("no code in %s", loc.Redacted())
		}
		return loc.Query().Get("code")
	}
	b := newBrowser(t)
	b.open(e.authorizeURL(nil))
	b.login(e, username, password)
	st, first := e.exchange(t, codeOf(b.decide(e, "allow")), nil)
	if st != http.StatusOK {
		t.Fatalf("exchange %d %v", st, first)
	}
	sid1 := sid(first)
	if !strings.HasPrefix(sid1, oauth.PrefixSID) {
		t.Fatalf("sid %q", sid1)
	}
	b.open(e.authorizeURL(nil)) // the session spares the login
	if st, second := e.exchange(t, codeOf(b.decide(e, "allow")), nil); st != http.StatusOK || sid(second) != sid1 {
		t.Fatalf("a second authorization in the same session: %d, sid %q, want %q", st, sid(second), sid1)
	}
	e.clock.Advance(2 * time.Second)
	st, refreshed, _ := e.post(t, httpapi.PathToken, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {first["refresh_token"].(string)}}, false, false)
	if st != http.StatusOK || sid(refreshed) != sid1 {
		t.Fatalf("refresh: %d, sid %q, want %q", st, sid(refreshed), sid1)
	}

	other := newBrowser(t)
	other.open(e.authorizeURL(nil))
	other.login(e, username, password)
	if st, body := e.exchange(t, codeOf(other.decide(e, "allow")), nil); st != http.StatusOK || sid(body) == sid1 {
		t.Fatalf("another browser's session has the same sid %q (%d)", sid1, st)
	}
	authorizeURL, _ := url.Parse(e.url(httpapi.PathAuthorize))
	for _, c := range b.client.Jar.Cookies(authorizeURL) {
		if c.Value == sid1 || oauth.HashToken(c.Value) == sid1 || strings.Contains(c.Value, strings.TrimPrefix(sid1, oauth.PrefixSID)) {
			t.Fatalf("sid %q is derived from cookie %s", sid1, c.Name)
		}
	}
}
