package e2e

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/acmebank/authserver/shared/httpapi"
)

func (e *env) refresh(t *testing.T, rt string, extra url.Values) (int, map[string]any) {
	t.Helper()
	p := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}}
	for k, v := range extra {
		p[k] = v
	}
	st, body, _ := e.post(t, httpapi.PathToken, p, false, false)
	return st, body
}

func (e *env) revoke(t *testing.T, path, token string, extra url.Values) int {
	t.Helper()
	p := url.Values{"token": {token}}
	for k, v := range extra {
		p[k] = v
	}
	st, _, _ := e.post(t, path, p, false, false)
	return st
}

// tokens runs a whole authorization and returns the token response.
func (e *env) tokens(t *testing.T, scope string) map[string]any {
	t.Helper()
	st, body := e.exchange(t, e.code(t, url.Values{"scope": {scope}}), nil)
	if st != 200 {
		t.Fatalf("exchange %d %v", st, body)
	}
	return body
}

// TestRefresh_TokenSourceRotates: golang.org/x/oauth2's TokenSource refreshes an expired token;
// the refresh token rotates and the new id_token keeps sub and auth_time, without nonce.
func TestRefresh_TokenSourceRotates(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	conf := e.oauth2Config("openid", "email")
	loc := e.authorize(t, conf.AuthCodeURL("s", oauth2.SetAuthURLParam("nonce", "n1")))
	tok, err := conf.Exchange(ctx, loc.Query().Get("code"))
	if err != nil {
		t.Fatal(err)
	}
	firstID, _ := tok.Extra("id_token").(string)
	tok.Expiry = time.Now().Add(-time.Minute) // make the library refresh
	e.clock.Advance(2 * time.Second)
	fresh, err := conf.TokenSource(ctx, tok).Token()
	if err != nil {
		t.Fatalf("refresh: %v", err)
	}
	if fresh.AccessToken == tok.AccessToken || fresh.RefreshToken == tok.RefreshToken || fresh.RefreshToken == "" {
		t.Fatal("refresh did not rotate both tokens")
	}
	verifier := e.verifier(t)
	a, err := verifier.Verify(ctx, firstID)
	if err != nil {
		t.Fatal(err)
	}
	b, err := verifier.Verify(ctx, fresh.Extra("id_token").(string))
	if err != nil {
		t.Fatal(err)
	}
	var ca, cb map[string]any
	a.Claims(&ca)
	b.Claims(&cb)
	if cb["sub"] != ca["sub"] || cb["auth_time"] != ca["auth_time"] || cb["nonce"] != nil || ca["nonce"] != "n1" {
		t.Fatalf("first %v, refreshed %v", ca, cb)
	}
	if !b.IssuedAt.After(a.IssuedAt) {
		t.Fatal("the refreshed id_token has no newer iat")
	}
	if meta, _ := fresh.Extra("metadata").(map[string]any); meta["uid"] != "uid-alice" {
		t.Fatalf("metadata %v", fresh.Extra("metadata"))
	}
}

// TestRefresh_ReusedTokenRevokesGrant: the spent refresh token fails and revokes the grant:
// the tokens of the legitimate refresh stop working too.
func TestRefresh_ReusedTokenRevokesGrant(t *testing.T) {
	e := newEnv(t)
	first := e.tokens(t, "openid email")
	st, second := e.refresh(t, first["refresh_token"].(string), nil)
	if st != 200 {
		t.Fatalf("refresh %d %v", st, second)
	}
	st, body := e.refresh(t, first["refresh_token"].(string), nil)
	if st != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("reuse %d %v", st, body)
	}
	if e.tokenValid(second["access_token"].(string)) {
		t.Fatal("the access token of the grant still works after reuse")
	}
	if st, _ := e.refresh(t, second["refresh_token"].(string), nil); st != 400 {
		t.Fatalf("the newest refresh token still works after reuse: %d", st)
	}
	if !strings.Contains(e.logs.String(), `"event":"refresh_reuse_detected"`) {
		t.Fatal("no audit event for the reuse")
	}
}

// TestRefresh_Scope: a subset narrows the access token, more than granted is invalid_scope,
// and the next refresh can ask for the whole grant again.
func TestRefresh_Scope(t *testing.T) {
	e := newEnv(t)
	first := e.tokens(t, "openid email phone")
	st, narrow := e.refresh(t, first["refresh_token"].(string), url.Values{"scope": {"email"}})
	if st != 200 || narrow["scope"] != "email" || narrow["id_token"] != nil {
		t.Fatalf("narrow %d %v", st, narrow)
	}
	st, body := e.refresh(t, narrow["refresh_token"].(string), url.Values{"scope": {"email profile"}})
	if st != 400 || body["error"] != "invalid_scope" {
		t.Fatalf("widen %d %v", st, body)
	}
	// invalid_scope spent nothing: the same token refreshes to the whole grant.
	st, full := e.refresh(t, narrow["refresh_token"].(string), nil)
	if st != 200 || full["scope"] != "openid email phone" {
		t.Fatalf("full %d %v", st, full)
	}
}

// TestRefresh_RedirectURI: the documented usage sends a registered redirect_uri; an
// unregistered one is refused without spending the token.
func TestRefresh_RedirectURI(t *testing.T) {
	e := newEnv(t)
	first := e.tokens(t, "openid")
	rt := first["refresh_token"].(string)
	if st, body := e.refresh(t, rt, url.Values{"redirect_uri": {"https://evil.example/cb"}}); st != 400 || body["error"] != "invalid_request" {
		t.Fatalf("%d %v", st, body)
	}
	if st, body := e.refresh(t, rt, url.Values{"redirect_uri": {redirectURI}}); st != 200 {
		t.Fatalf("%d %v", st, body)
	}
}

// TestRefresh_Refused: another client's, expired, garbage and revoked-grant refresh tokens are
// invalid_grant, and another client's attempt does not spend the token.
func TestRefresh_Refused(t *testing.T) {
	e := newEnv(t)
	first := e.tokens(t, "openid")
	rt := first["refresh_token"].(string)
	st, body, _ := e.post(t, httpapi.PathToken, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt},
		"client_id": {otherID}, "client_secret": {otherSecret}}, false, false)
	if st != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("other client %d %v", st, body)
	}
	if st, body := e.refresh(t, "rt_garbage", nil); st != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("garbage %d %v", st, body)
	}
	st, second := e.refresh(t, rt, nil)
	if st != 200 {
		t.Fatalf("the owner's refresh after another client's attempt: %d %v", st, second)
	}
	e.clock.Advance(e.app.Config.Lifetimes.RefreshToken + time.Minute)
	if st, body := e.refresh(t, second["refresh_token"].(string), nil); st != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("expired %d %v", st, body)
	}
}

// TestRefresh_GrantAbsoluteLifetime: refreshing keeps working until the grant's end, not after.
func TestRefresh_GrantAbsoluteLifetime(t *testing.T) {
	e := newEnv(t)
	e.app.Service.Lifetimes.Grant = 3 * time.Hour
	e.app.Service.Lifetimes.RefreshToken = 2 * time.Hour
	rt := e.tokens(t, "openid")["refresh_token"].(string)
	for i := 0; i < 2; i++ {
		e.clock.Advance(80 * time.Minute)
		st, body := e.refresh(t, rt, nil)
		if st != 200 {
			t.Fatalf("refresh %d: %d %v", i, st, body)
		}
		rt = body["refresh_token"].(string)
	}
	e.clock.Advance(30 * time.Minute) // 190 minutes: past the grant's 3 hours
	if st, body := e.refresh(t, rt, nil); st != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("after the grant's end %d %v", st, body)
	}
}

// TestRevoke_BothPaths: revoking the refresh token on either path revokes the grant: the
// access token stops at once and only a new authorization yields tokens.
func TestRevoke_BothPaths(t *testing.T) {
	for _, path := range []string{httpapi.PathRevoke, httpapi.PathRevokeLegacy} {
		t.Run(path, func(t *testing.T) {
			e := newEnv(t)
			tok := e.tokens(t, "openid email")
			if st := e.revoke(t, path, tok["refresh_token"].(string), url.Values{"token_type_hint": {"refresh_token"}}); st != 200 {
				t.Fatalf("revoke %d", st)
			}
			if e.tokenValid(tok["access_token"].(string)) {
				t.Fatal("the access token survived the revocation of its refresh token")
			}
			if st, body := e.refresh(t, tok["refresh_token"].(string), nil); st != 400 || body["error"] != "invalid_grant" {
				t.Fatalf("refresh after revoke %d %v", st, body)
			}
			if st := e.revoke(t, path, tok["refresh_token"].(string), nil); st != 200 {
				t.Fatalf("revoking again %d", st)
			}
			if fresh := e.tokens(t, "openid"); !e.tokenValid(fresh["access_token"].(string)) {
				t.Fatal("a new authorization does not yield working tokens")
			}
		})
	}
}

// TestRevoke_AccessTokenOnly: revoking an access token ends that token; the refresh token
// still works.
func TestRevoke_AccessTokenOnly(t *testing.T) {
	e := newEnv(t)
	tok := e.tokens(t, "openid")
	if st := e.revoke(t, httpapi.PathRevoke, tok["access_token"].(string), url.Values{"token_type_hint": {"access_token"}}); st != 200 {
		t.Fatalf("revoke %d", st)
	}
	if e.tokenValid(tok["access_token"].(string)) {
		t.Fatal("the revoked access token still works")
	}
	if st, _ := e.refresh(t, tok["refresh_token"].(string), nil); st != 200 {
		t.Fatalf("refresh after revoking the access token only: %d", st)
	}
}

// TestRevoke_ForeignAndUnknown: another client's token, garbage, and bad credentials change
// nothing; bad credentials are 401 invalid_client.
func TestRevoke_ForeignAndUnknown(t *testing.T) {
	e := newEnv(t)
	tok := e.tokens(t, "openid")
	before := e.writes.count()
	st, _, _ := e.post(t, httpapi.PathRevoke, url.Values{"token": {tok["refresh_token"].(string)}, "client_id": {otherID},
		"client_secret": {otherSecret}}, false, false)
	if st != 200 {
		t.Fatalf("foreign revoke %d", st)
	}
	if st := e.revoke(t, httpapi.PathRevoke, "rt_unknown", nil); st != 200 {
		t.Fatalf("unknown %d", st)
	}
	st, body, _ := e.post(t, httpapi.PathRevokeLegacy, url.Values{"token": {tok["refresh_token"].(string)}, "client_id": {clientID},
		"client_secret": {"nope-nope-nope-nope-nope-nope-nope"}}, false, false)
	if st != 401 || body["error"] != "invalid_client" {
		t.Fatalf("bad credentials %d %v", st, body)
	}
	if n := e.writes.count(); n != before {
		t.Fatalf("the store was written: %v", e.writes.list()[before:])
	}
	if !e.tokenValid(tok["access_token"].(string)) {
		t.Fatal("a foreign revocation revoked the token")
	}
}

// TestCode_ConcurrentExchangeOneWins: N goroutines exchanging one code: at most one gets
// tokens (none when a loser's revocation reached the winner's exchange in flight), and what it
// got is revoked by the losers and by a later replay.
func TestCode_ConcurrentExchangeOneWins(t *testing.T) {
	e := newEnv(t)
	code := e.code(t, nil)
	const n = 20
	var wg sync.WaitGroup
	var mu sync.Mutex
	var winners []map[string]any
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, body := e.exchange(t, code, nil)
			if st == 200 {
				mu.Lock()
				winners = append(winners, body)
				mu.Unlock()
			} else if st != 400 || body["error"] != "invalid_grant" {
				t.Errorf("loser answered %d %v", st, body)
			}
		}()
	}
	wg.Wait()
	if len(winners) > 1 {
		t.Fatalf("%d exchanges succeeded, want at most 1", len(winners))
	}
	if st, _ := e.exchange(t, code, nil); st != 400 {
		t.Fatalf("replay answered %d", st)
	}
	for _, w := range winners {
		if e.tokenValid(w["access_token"].(string)) {
			t.Fatal("tokens of a replayed code still work")
		}
	}
}

// TestRevoke_RacingRefresh: revocations and refreshes at once leave the grant revoked with no
// usable token.
func TestRevoke_RacingRefresh(t *testing.T) {
	e := newEnv(t)
	tok := e.tokens(t, "openid")
	rt := tok["refresh_token"].(string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var issued []map[string]any
	for i := 0; i < 10; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if st, body := e.refresh(t, rt, nil); st == 200 {
				mu.Lock()
				issued = append(issued, body)
				mu.Unlock()
			}
		}()
		go func() {
			defer wg.Done()
			e.revoke(t, httpapi.PathRevoke, rt, nil)
		}()
	}
	wg.Wait()
	// A refresh that won before the revocation leaves a new refresh token: revoke the chain
	// with it as a client would not; the grant must already be revoked whichever came first,
	// unless the refresh won the race, in which case revoking the spent token revoked the grant.
	if e.tokenValid(tok["access_token"].(string)) {
		t.Fatal("the original access token survived")
	}
	for _, b := range issued {
		if e.tokenValid(b["access_token"].(string)) {
			t.Fatal("a token issued by a racing refresh survived the revocation")
		}
		if st, _ := e.refresh(t, b["refresh_token"].(string), nil); st == 200 {
			t.Fatal("a refresh token issued by a racing refresh still works")
		}
	}
}
