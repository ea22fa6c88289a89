package e2e

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
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

// pushedURI pushes a fresh request of the acceptance client and returns its request_uri.
func (e *env) pushedURI(t *testing.T) string {
	t.Helper()
	st, body := e.push(t, pushedParams(oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())))
	uri, _ := body["request_uri"].(string)
	if st != http.StatusCreated || uri == "" {
		t.Fatalf("push: %d %v", st, body)
	}
	return uri
}

// toConsent opens authURL in b and signs in if the login page shows, passing a second step if
// the request needs one, and fails unless the consent page is open.
func (b *browser) toConsent(e *env, authURL string) {
	b.t.Helper()
	if resp := b.open(authURL); resp.StatusCode != http.StatusOK {
		b.t.Fatalf("authorize answered %d: %.300s", resp.StatusCode, b.last)
	}
	if strings.Contains(b.last, `type="password"`) {
		b.login(e, username, password)
	}
	b.secondStep(e)
	if !strings.Contains(b.last, `value="allow"`) {
		b.t.Fatalf("expected the consent page, got: %.400s", b.last)
	}
}

// TestPAR_FiftyRacingOpensOfOneRequestURIAllShowTheLoginPage: opening the page does not spend
// the request_uri (FAPI 2.0 Security Profile 5.3.2.2, the note on request_uri reuse): 50
// browsers opening one request_uri at once all get the login page; once one of them has
// decided, the request_uri opens no page. On both stores.
func TestPAR_FiftyRacingOpensOfOneRequestURIAllShowTheLoginPage(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		uri := e.pushedURI(t)
		const racers = 50
		browsers := make([]*browser, racers)
		statuses := make([]int, racers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range browsers {
			browsers[i] = newBrowser(t)
			wg.Go(func() {
				<-start
				resp, err := browsers[i].client.Get(e.parURL(uri))
				if err != nil {
					return
				}
				browsers[i].read(resp)
				statuses[i] = resp.StatusCode
			})
		}
		close(start)
		wg.Wait()
		for i, st := range statuses {
			if st != http.StatusOK || !strings.Contains(browsers[i].last, `type="password"`) {
				t.Fatalf("open %d: %d, want the login page: %.300s", i, st, browsers[i].last)
			}
		}
		b := browsers[racers/2]
		b.login(e, username, password)
		if loc := b.decide(e, "allow"); loc.Query().Get("code") == "" || loc.Query().Get("state") != "st-par" {
			t.Fatalf("redirect %s: want a code and the pushed state", loc.Redacted())
		}
		if resp := newBrowser(t).open(e.parURL(uri)); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("the decided request_uri opened again: %d, want an error page", resp.StatusCode)
		}
		// The spent mark is the one-time value request_uri:pr_<hash> (docs/storage.md), kept until
		// every page the request_uri opened has expired: expires_in plus a pending request's life.
		key, now := "request_uri:pr_"+oauth.HashToken(uri), e.clock.Now()
		keep := oauth.PushedRequestLifetime + e.app.Service.Lifetimes.Request
		if err := e.app.Store.UseOnce(context.Background(), key, now.Add(time.Hour), now.Add(keep-time.Second)); !errors.Is(err, oauth.ErrUsed) {
			t.Fatalf("the spent mark just before %v: %v, want it still used", keep, err)
		}
		if err := e.app.Store.UseOnce(context.Background(), key, now.Add(time.Hour), now.Add(keep+time.Second)); err != nil {
			t.Fatalf("the spent mark after %v: %v, want it gone", keep, err)
		}
	})
}

// TestPAR_AReloadOrPrefetchOpensThePageAgainAndOnlyOneDecisionIssuesACode: a link prefetch and
// the navigation (or a reload) in one browser both get the login page; the sign-in on the
// second page gets a code, and the first page, decided after it, gets the expired page and no
// code: the request_uri is spent at the decision.
func TestPAR_AReloadOrPrefetchOpensThePageAgainAndOnlyOneDecisionIssuesACode(t *testing.T) {
	e := newEnv(t)
	uri := e.pushedURI(t)
	prefetch, b := newBrowser(t), newBrowser(t)
	for _, x := range []*browser{prefetch, b, b} { // a prefetch, the navigation, a reload
		if resp := x.open(e.parURL(uri)); resp.StatusCode != http.StatusOK || !strings.Contains(x.last, `type="password"`) {
			t.Fatalf("open: %d, want the login page: %.300s", resp.StatusCode, x.last)
		}
	}
	b.login(e, username, password)
	if loc := b.decide(e, "allow"); loc.Query().Get("code") == "" {
		t.Fatalf("redirect %s without a code", loc.Redacted())
	}
	before := e.writes.list()
	prefetch.login(e, username, password)
	prefetch.secondStep(e)
	resp := prefetch.submit(e.url(httpapi.PathAuthorize), url.Values{"decision": {"allow"}})
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
		t.Fatalf("the prefetched page's decision: %d to %q, want the expired page", resp.StatusCode, resp.Header.Get("Location"))
	}
	if got := e.writes.list()[len(before):]; slices.Contains(got, "CreateCode") {
		t.Fatalf("the prefetched page's decision wrote %v: a second code", got)
	}
}

// TestPAR_RacingDecisionsOnOneRequestURIIssueAtMostOneCode: two browsers signed in on one
// request_uri, with 50 consent pages opened from it between them, answer all 50 at once (allow,
// and some deny): one decision answers the client, with a code or access_denied, and the other
// 49 get the expired page; at most one code is written. On both stores.
func TestPAR_RacingDecisionsOnOneRequestURIIssueAtMostOneCode(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		uri := e.pushedURI(t)
		const racers = 50
		type page struct {
			b    *browser
			form url.Values
		}
		var pages []page
		a, b := newBrowser(t), newBrowser(t)
		for i := range racers {
			x := a
			if i%2 == 1 {
				x = b
			}
			x.toConsent(e, e.parURL(uri))
			decision := "allow"
			if i%5 == 4 {
				decision = "deny"
			}
			pages = append(pages, page{x, with(x.form, url.Values{"decision": {decision}})})
		}
		before := e.writes.list()
		out := make([]answer, racers)
		gate := make(chan struct{})
		var wg sync.WaitGroup
		for i, p := range pages {
			wg.Go(func() {
				<-gate
				out[i] = post(e, p.b, p.form)
			})
		}
		close(gate)
		wg.Wait()
		redirects, expired := 0, 0
		for i, ans := range out {
			switch {
			case ans.err != nil:
				t.Fatalf("decision %d: %v", i, ans.err)
			case ans.status == http.StatusSeeOther:
				redirects++
			case ans.status == http.StatusBadRequest && ans.location == "":
				expired++
			default:
				t.Errorf("decision %d: %d to %q", i, ans.status, ans.location)
			}
		}
		codes := 0
		for _, w := range e.writes.list()[len(before):] {
			if w == "CreateCode" {
				codes++
			}
		}
		if redirects != 1 || expired != racers-1 || codes > 1 {
			t.Fatalf("%d redirects, %d expired pages, %d codes written; want 1, %d, at most 1", redirects, expired, codes, racers-1)
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
	open := func(u string) *http.Response { return newBrowser(t).open(u) }
	if resp := open(e.parURL(oauth.RequestURIPrefix + "unknown")); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("unknown request_uri: %d", resp.StatusCode)
	}
	other := e.url(httpapi.PathAuthorize) + "?" + url.Values{"client_id": {otherID}, "request_uri": {e.pushedURI(t)}}.Encode()
	if resp := open(other); resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
		t.Errorf("another client's request_uri: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	expired := e.pushedURI(t)
	e.clock.Advance(oauth.PushedRequestLifetime + time.Second)
	if resp := open(e.parURL(expired)); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("expired request_uri: %d", resp.StatusCode)
	}
}

// TestPAR_ARequestURIPresentedWithAnotherOrUnknownClientIDChangesNothing: the request_uri of the
// acceptance client, opened with another client's client_id, an unknown one or none, gets an
// error page and writes nothing; the acceptance client's user then opens it and gets a code.
func TestPAR_ARequestURIPresentedWithAnotherOrUnknownClientIDChangesNothing(t *testing.T) {
	e := newEnv(t)
	uri := e.pushedURI(t)
	for _, cid := range []string{otherID, "no-such-client", ""} {
		before := e.writes.count()
		u := e.url(httpapi.PathAuthorize) + "?" + url.Values{"client_id": {cid}, "request_uri": {uri}}.Encode()
		resp := newBrowser(t).open(u)
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
			t.Errorf("client_id %q: %d to %q, want an error page", cid, resp.StatusCode, resp.Header.Get("Location"))
		}
		if got := e.writes.list()[before:]; len(got) != 0 {
			t.Errorf("client_id %q wrote %v", cid, got)
		}
	}
	if loc := e.authorize(t, e.parURL(uri)); loc.Query().Get("code") == "" {
		t.Fatalf("the right client's request: redirect %s without a code", loc.Redacted())
	}
}

// TestPAR_APageOpenedBeforeTheRequestURIExpiresCanStillBeDecided: expires_in bounds when the
// request_uri opens a page; a page opened in time lives as long as any pending request, so a
// user who takes longer than expires_in to sign in still gets the code.
func TestPAR_APageOpenedBeforeTheRequestURIExpiresCanStillBeDecided(t *testing.T) {
	e := newEnv(t)
	uri := e.pushedURI(t)
	b := newBrowser(t)
	if resp := b.open(e.parURL(uri)); resp.StatusCode != http.StatusOK {
		t.Fatalf("open: %d", resp.StatusCode)
	}
	e.clock.Advance(oauth.PushedRequestLifetime + time.Second)
	if resp := newBrowser(t).open(e.parURL(uri)); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("the expired request_uri opened a page: %d", resp.StatusCode)
	}
	b.login(e, username, password)
	if loc := b.decide(e, "allow"); loc.Query().Get("code") == "" {
		t.Fatalf("redirect %s without a code", loc.Redacted())
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
