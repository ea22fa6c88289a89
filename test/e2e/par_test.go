package e2e

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
)

// push sends a pushed authorization request of the acceptance client (client_secret_basic)
// and returns the status and the JSON answer.
func (e *env) push(t *testing.T, params url.Values) (int, map[string]any) {
	t.Helper()
	st, body, h := e.post(t, httpapi.PathPAR, params, true, false)
	if h.Get("Cache-Control") != "no-store" {
		t.Errorf("PAR answer without Cache-Control: no-store")
	}
	return st, body
}

// pushedParams is a complete authorization request with PKCE.
func pushedParams(challenge string) url.Values {
	return url.Values{"response_type": {"code"}, "redirect_uri": {redirectURI}, "scope": {"openid email"},
		"state": {"st-par"}, "nonce": {"n-par"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}
}

// parURL is the authorization request that names a pushed request: client_id and request_uri.
func (e *env) parURL(requestURI string) string {
	return e.url(httpapi.PathAuthorize) + "?" + url.Values{"client_id": {clientID}, "request_uri": {requestURI}}.Encode()
}

// TestPAR_PushedRequestCompletesTheFlowWithStandardClients: the client pushes its request,
// sends the user to authorize with client_id and request_uri alone, and exchanges the code
// with golang.org/x/oauth2; go-oidc verifies the id_token, whose nonce came from the pushed
// request. On both stores.
func TestPAR_PushedRequestCompletesTheFlowWithStandardClients(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		pkce := oauth2.GenerateVerifier()
		st, body := e.push(t, pushedParams(oauth2.S256ChallengeFromVerifier(pkce)))
		uri, _ := body["request_uri"].(string)
		if st != http.StatusCreated || !strings.HasPrefix(uri, oauth.RequestURIPrefix) || body["expires_in"] != float64(60) {
			t.Fatalf("push: %d %v", st, body)
		}
		// Parameters beside client_id and request_uri are ignored (RFC 9126 4): this state is not
		// the pushed one, and must not come back.
		loc := e.authorize(t, e.parURL(uri)+"&state=forged")
		q := loc.Query()
		if q.Get("state") != "st-par" || q.Get("code") == "" || q.Get("iss") != e.app.Config.Issuer {
			t.Fatalf("redirect %s: want the pushed state, a code and iss", loc.Redacted())
		}
		tok, err := e.oauth2Config("openid", "email").Exchange(context.Background(), q.Get("code"), oauth2.VerifierOption(pkce))
		if err != nil {
			t.Fatalf("exchange: %v", err)
		}
		raw, _ := tok.Extra("id_token").(string)
		p, err := oidc.NewProvider(context.Background(), e.app.Config.Issuer)
		if err != nil {
			t.Fatal(err)
		}
		idt, err := p.Verifier(&oidc.Config{ClientID: clientID}).Verify(context.Background(), raw)
		if err != nil || idt.Nonce != "n-par" {
			t.Fatalf("id_token: %v, nonce %q", err, idt.Nonce)
		}
		var meta struct {
			PAR string `json:"pushed_authorization_request_endpoint"`
		}
		if err := p.Claims(&meta); err != nil || meta.PAR != e.url(httpapi.PathPAR) {
			t.Fatalf("discovery's pushed_authorization_request_endpoint = %q (%v)", meta.PAR, err)
		}
	})
}

// TestPAR_RequestURIIsSingleUse: 50 browsers open the same request_uri at once; exactly one
// gets the login page, the others an error page. On both stores.
func TestPAR_RequestURIIsSingleUse(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		_, body := e.push(t, pushedParams(oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())))
		uri, _ := body["request_uri"].(string)
		const racers = 50
		var wg sync.WaitGroup
		var mu sync.Mutex
		statuses := map[int]int{}
		start := make(chan struct{})
		for range racers {
			wg.Go(func() {
				b := newBrowser(t)
				<-start
				resp := b.open(e.parURL(uri))
				mu.Lock()
				statuses[resp.StatusCode]++
				mu.Unlock()
			})
		}
		close(start)
		wg.Wait()
		if statuses[http.StatusOK] != 1 || statuses[http.StatusBadRequest] != racers-1 {
			t.Fatalf("statuses %v: want one login page and %d error pages", statuses, racers-1)
		}
	})
}

// TestPAR_BadPushesAreRefusedAndKeepNothing: each malformed or unauthenticated push gets its
// RFC error as JSON and stores nothing.
func TestPAR_BadPushesAreRefusedAndKeepNothing(t *testing.T) {
	e := newEnv(t)
	good := func(change func(url.Values)) url.Values {
		p := pushedParams(oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier()))
		change(p)
		return p
	}
	for _, tc := range []struct {
		name   string
		params url.Values
		basic  bool
		status int
		code   string
	}{
		{"no client authentication", good(func(p url.Values) { p.Set("client_id", clientID) }), false, 401, "invalid_client"},
		{"a wrong secret", good(func(p url.Values) { p.Set("client_id", clientID); p.Set("client_secret", "wrong") }), false, 401, "invalid_client"},
		{"a request_uri in the push", good(func(p url.Values) { p.Set("request_uri", oauth.RequestURIPrefix+"x") }), true, 400, "invalid_request"},
		{"an unregistered redirect_uri", good(func(p url.Values) { p.Set("redirect_uri", "https://evil.example/cb") }), true, 400, "invalid_request"},
		{"no redirect_uri", good(func(p url.Values) { p.Del("redirect_uri") }), true, 400, "invalid_request"},
		{"response_type token", good(func(p url.Values) { p.Set("response_type", "token") }), true, 400, "unsupported_response_type"},
		{"plain PKCE", good(func(p url.Values) { p.Set("code_challenge_method", "plain") }), true, 400, "invalid_request"},
		{"an unknown scope", good(func(p url.Values) { p.Set("scope", "openid admin") }), true, 400, "invalid_scope"},
		{"a repeated parameter", good(func(p url.Values) { p.Add("state", "again") }), true, 400, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.writes.count()
			st, body, _ := e.post(t, httpapi.PathPAR, tc.params, tc.basic, false)
			if st != tc.status || body["error"] != tc.code {
				t.Fatalf("%d %v, want %d %s", st, body, tc.status, tc.code)
			}
			if n := e.writes.count() - before; n != 0 {
				t.Fatalf("%d store writes: %v", n, e.writes.list()[before:])
			}
		})
	}
	// Authenticated as one client (Basic), naming another in the body.
	t.Run("another client's client_id", func(t *testing.T) {
		before := e.writes.count()
		p := good(func(p url.Values) { p.Set("client_id", otherID) })
		req, _ := http.NewRequest(http.MethodPost, e.url(httpapi.PathPAR), strings.NewReader(p.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(clientID, clientSecret)
		st, body, _ := do(t, req)
		if st/100 != 4 || (body["error"] != "invalid_request" && body["error"] != "invalid_client") {
			t.Fatalf("%d %v, want invalid_request or invalid_client", st, body)
		}
		if n := e.writes.count() - before; n != 0 {
			t.Fatalf("%d store writes", n)
		}
	})
	req, _ := http.NewRequest(http.MethodGet, e.url(httpapi.PathPAR), nil)
	if st, _, _ := do(t, req); st != http.StatusMethodNotAllowed {
		t.Fatalf("GET /par: %d, want 405", st)
	}
}

// TestPAR_RequestURIRefusedWhenUnknownExpiredOrAnotherClients: each answers an error page
// (nothing there says where the user could safely be sent).
func TestPAR_RequestURIRefusedWhenUnknownExpiredOrAnotherClients(t *testing.T) {
	e := newEnv(t)
	pushed := func() string {
		_, body := e.push(t, pushedParams(oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())))
		return body["request_uri"].(string)
	}
	open := func(u string) *http.Response { return newBrowser(t).open(u) }
	if resp := open(e.parURL(oauth.RequestURIPrefix + "unknown")); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("unknown request_uri: %d", resp.StatusCode)
	}
	other := e.url(httpapi.PathAuthorize) + "?" + url.Values{"client_id": {otherID}, "request_uri": {pushed()}}.Encode()
	if resp := open(other); resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
		t.Errorf("another client's request_uri: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	expired := pushed()
	e.clock.Advance(oauth.PushedRequestLifetime + time.Second)
	if resp := open(e.parURL(expired)); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("expired request_uri: %d", resp.StatusCode)
	}
}

// TestPAR_RequiredPerClientAndPerDeployment: a client registered with
// require_pushed_authorization_requests, or every client when the deployment requires it, gets
// invalid_request for an authorization request sent through the browser, and its pushed ones
// work; discovery says whether the deployment requires it.
func TestPAR_RequiredPerClientAndPerDeployment(t *testing.T) {
	check := func(t *testing.T, e *env) {
		t.Helper()
		resp := newBrowser(t).open(e.authorizeURL(nil))
		to, _ := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusSeeOther || to == nil || to.Query().Get("error") != "invalid_request" || to.Query().Get("state") != "st-123" {
			t.Fatalf("plain authorize: %d to %q, want a redirect with invalid_request", resp.StatusCode, resp.Header.Get("Location"))
		}
		_, body := e.push(t, pushedParams(oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())))
		if got := e.authorize(t, e.parURL(body["request_uri"].(string))); got.Query().Get("code") == "" {
			t.Fatalf("pushed request: redirect %s without a code", got.Redacted())
		}
	}
	t.Run("per client", func(t *testing.T) {
		e := newEnv(t)
		if err := e.app.Store.UpdateClient(context.Background(), clientID, func(c oauth.Client) (oauth.Client, error) {
			c.RequirePAR = true
			return c, nil
		}); err != nil {
			t.Fatal(err)
		}
		check(t, e)
		if resp := newBrowser(t).open(e.url(httpapi.PathAuthorize) + "?" + url.Values{"client_id": {otherID}, "redirect_uri": {otherURI},
			"response_type": {"code"}, "scope": {"openid"}}.Encode()); resp.StatusCode != http.StatusOK {
			t.Fatalf("another client's plain request: %d, want the login page", resp.StatusCode)
		}
	})
	t.Run("per deployment", func(t *testing.T) {
		e := newEnvFrom(t, envSetup{vars: map[string]string{"AUTH_REQUIRE_PAR": "true"}})
		check(t, e)
		p, err := oidc.NewProvider(context.Background(), e.app.Config.Issuer)
		if err != nil {
			t.Fatal(err)
		}
		var meta struct {
			Require bool `json:"require_pushed_authorization_requests"`
		}
		if err := p.Claims(&meta); err != nil || !meta.Require {
			t.Fatalf("discovery: require_pushed_authorization_requests = %v (%v)", meta.Require, err)
		}
	})
}
