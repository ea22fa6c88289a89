package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"

	"github.com/acmebank/authserver/shared/app"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/seed"
)

// Grant Management for OAuth 2.0 end to end, with golang.org/x/oauth2 for the authorization
// requests and exchanges and raw HTTP for /grants/{grant_id}, on both stores.

// gmScopes are the scopes that let a token query and revoke its client's grants.
const gmScopes = "grant_management_query grant_management_revoke"

// gmGrant runs an authorization of the acceptance client for scope with grant_management_action
// action (and grant_id when given), and its exchange with golang.org/x/oauth2.
func (e *env) gmGrant(t *testing.T, scope, action, grantID string) *oauth2.Token {
	t.Helper()
	cfg := e.oauth2Config(strings.Fields(scope)...)
	pkce := oauth2.GenerateVerifier()
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(pkce), oauth2.SetAuthURLParam("grant_management_action", action)}
	if grantID != "" {
		opts = append(opts, oauth2.SetAuthURLParam("grant_id", grantID))
	}
	loc := e.authorize(t, cfg.AuthCodeURL("st-gm", opts...))
	tok, err := cfg.Exchange(context.Background(), loc.Query().Get("code"), oauth2.VerifierOption(pkce))
	if err != nil {
		t.Fatalf("exchange (%s): %v", action, err)
	}
	return tok
}

// grantAPI calls the grant management endpoint for id with the Authorization header auth.
func (e *env) grantAPI(t *testing.T, method, id, auth string) apiResponse {
	t.Helper()
	return apiCall(t, http.DefaultClient, method, e.url(httpapi.PathGrants+"/"+id), auth, nil)
}

// grantScope is the scope string of a query response (one entry: one resource).
func grantScope(t *testing.T, r apiResponse) string {
	t.Helper()
	list, _ := r.json["scopes"].([]any)
	if r.status != http.StatusOK || len(list) != 1 {
		t.Fatalf("grant query: %d %s, want 200 with one scopes entry", r.status, r.raw)
	}
	s, _ := list[0].(map[string]any)["scope"].(string)
	return s
}

// TestGrantManagement_CreateQueryMergeReplaceRevoke: a grant created with
// grant_management_action=create has its grant_id in the token response (and in a refresh's;
// a grant made without the parameter has none); the client queries it
// (scopes, claims, details, times); a merge grows it under the same grant_id and its old tokens
// die at once; a replace leaves the new request's scopes only; a DELETE revokes it (204) and the
// bank API's authorizer refuses its tokens at once. On both stores.
func TestGrantManagement_CreateQueryMergeReplaceRevoke(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		e.mountAPI(t, app.APIOptions{})
		api := e.url("/v2/bank/accounts")
		first := e.gmGrant(t, "openid email "+gmScopes, "create", "")
		id, _ := first.Extra("grant_id").(string)
		if id == "" {
			t.Fatalf("the token response of a create carries no grant_id: %v", first.Extra("scope"))
		}
		bearer := func(tok *oauth2.Token) string { return "Bearer " + tok.AccessToken }
		q := e.grantAPI(t, http.MethodGet, id, bearer(first))
		if got := grantScope(t, q); got != "openid email "+gmScopes {
			t.Fatalf("queried scopes %q", got)
		}
		if claims, _ := q.json["claims"].([]any); len(claims) != 2 || claims[0] != "email" || claims[1] != "email_verified" {
			t.Errorf("queried claims %v, want [email email_verified]", q.json["claims"])
		}
		if q.json["created_at"] == nil || q.json["updated_at"] != nil || q.header.Get("Cache-Control") != "no-store" {
			t.Errorf("query: created_at %v, updated_at %v (want none before a merge), Cache-Control %q", q.json["created_at"], q.json["updated_at"], q.header.Get("Cache-Control"))
		}

		// Merge: the grant grows, under the same id; the tokens issued before it die at once.
		e.clock.Advance(time.Second)
		merged := e.gmGrant(t, "openid phone", "merge", id)
		if merged.Extra("grant_id") != id || merged.Extra("scope") != "openid email "+gmScopes+" phone" {
			t.Fatalf("merge: grant_id %v scope %v, want %s and the union", merged.Extra("grant_id"), merged.Extra("scope"), id)
		}
		if r := apiCall(t, http.DefaultClient, http.MethodGet, api, bearer(first), nil); r.status != http.StatusUnauthorized {
			t.Fatalf("the bank API took a token issued before the merge: %d", r.status)
		}
		if e.tokenValid(first.RefreshToken) {
			t.Fatal("the refresh token issued before the merge is still valid")
		}
		q = e.grantAPI(t, http.MethodGet, id, bearer(merged))
		if got := grantScope(t, q); got != "openid email "+gmScopes+" phone" || q.json["updated_at"] == nil {
			t.Fatalf("after the merge: scopes %q, updated_at %v", got, q.json["updated_at"])
		}
		if r := apiCall(t, http.DefaultClient, http.MethodGet, api, bearer(merged), nil); r.status != http.StatusOK {
			t.Fatalf("the bank API refused the merged grant's token: %d %s", r.status, r.raw)
		}
		// A refresh of a managed grant's token carries its grant_id too.
		st, refreshed, _ := e.post(t, httpapi.PathToken, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {merged.RefreshToken}}, false, false)
		if st != http.StatusOK || refreshed["grant_id"] != id {
			t.Fatalf("refresh of the merged grant: %d grant_id %v, want %s", st, refreshed["grant_id"], id)
		}
		// A grant made without grant_management_action has no grant_id in its token response.
		if _, plain := e.exchange(t, e.code(t, url.Values{"scope": {"openid"}}), nil); plain["grant_id"] != nil {
			t.Fatalf("a grant made without grant management answered grant_id %v", plain["grant_id"])
		}

		// Replace: the request's scopes only.
		replaced := e.gmGrant(t, "openid "+gmScopes, "replace", id)
		if replaced.Extra("grant_id") != id || replaced.Extra("scope") != "openid "+gmScopes {
			t.Fatalf("replace: grant_id %v scope %v", replaced.Extra("grant_id"), replaced.Extra("scope"))
		}
		if got := grantScope(t, e.grantAPI(t, http.MethodGet, id, bearer(replaced))); got != "openid "+gmScopes {
			t.Fatalf("after the replace: scopes %q", got)
		}
		if e.tokenValid(merged.AccessToken) {
			t.Fatal("a token issued before the replace is still valid")
		}

		// Revoke: 204, audited, and every token of the grant is refused at once.
		before := e.writes.count()
		if r := e.grantAPI(t, http.MethodDelete, id, bearer(replaced)); r.status != http.StatusNoContent || r.raw != "" {
			t.Fatalf("revoke: %d %q, want 204", r.status, r.raw)
		}
		if got := e.writes.list()[before:]; len(got) != 1 || !strings.HasPrefix(got[0], "RevokeGrant") {
			t.Errorf("the revocation wrote %v, want one RevokeGrant", got)
		}
		if r := apiCall(t, http.DefaultClient, http.MethodGet, api, bearer(replaced), nil); r.status != http.StatusUnauthorized {
			t.Fatalf("the bank API took a token of the revoked grant: %d", r.status)
		}
		if e.tokenValid(replaced.RefreshToken) {
			t.Fatal("the revoked grant's refresh token is still valid")
		}
		if !strings.Contains(e.logs.String(), `"event":"grant_revoked"`) || !strings.Contains(e.logs.String(), `"reason":"grant_management"`) {
			t.Error("no grant_revoked audit line with reason grant_management")
		}
		if strings.Contains(e.logs.String(), replaced.AccessToken) {
			t.Error("an access token reached the logs")
		}
	})
}

// TestGrantManagement_TokensWithoutTheRightOrOfAnotherClientAreRefusedAndWriteNothing: a token
// without the action's scope is 403 insufficient_scope; another client's token, or a grant id
// that does not exist, is 404; no token is 401 with a challenge; a method other than GET and
// DELETE is 405. None of them writes anything or carries a consent receipt, and the grant is
// left as it was.
func TestGrantManagement_TokensWithoutTheRightOrOfAnotherClientAreRefusedAndWriteNothing(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		tok := e.gmGrant(t, "openid "+gmScopes, "create", "")
		id := tok.Extra("grant_id").(string)
		queryOnly := e.gmGrant(t, "openid grant_management_query", "create", "")
		plain, _ := e.apiTokens(t, "openid email")
		otherCfg := &oauth2.Config{ClientID: otherID, ClientSecret: otherSecret, RedirectURL: otherURI, Scopes: []string{"openid", "grant_management_query", "grant_management_revoke"},
			Endpoint: oauth2.Endpoint{AuthURL: e.url(httpapi.PathAuthorize), TokenURL: e.url(httpapi.PathToken)}}
		loc := e.authorize(t, otherCfg.AuthCodeURL("st-other"))
		other, err := otherCfg.Exchange(context.Background(), loc.Query().Get("code"))
		if err != nil {
			t.Fatal(err)
		}
		before, items := e.writes.count(), e.itemCount(t)
		for _, c := range []struct {
			name, method, id, auth string
			status                 int
			errCode                string
		}{
			{"a query without grant_management_query", http.MethodGet, id, "Bearer " + plain, http.StatusForbidden, "insufficient_scope"},
			{"a revocation without grant_management_revoke", http.MethodDelete, id, "Bearer " + queryOnly.AccessToken, http.StatusForbidden, "insufficient_scope"},
			{"another client's token", http.MethodGet, id, "Bearer " + other.AccessToken, http.StatusNotFound, "invalid_grant_id"},
			{"another client's revocation", http.MethodDelete, id, "Bearer " + other.AccessToken, http.StatusNotFound, "invalid_grant_id"},
			{"an unknown grant", http.MethodGet, "gr_unknown", "Bearer " + tok.AccessToken, http.StatusNotFound, "invalid_grant_id"},
			{"an overlong grant id", http.MethodDelete, strings.Repeat("g", 4000), "Bearer " + tok.AccessToken, http.StatusNotFound, "invalid_grant_id"},
			{"a made-up token", http.MethodGet, id, "Bearer at_madeUp", http.StatusUnauthorized, "invalid_token"},
			{"no token", http.MethodDelete, id, "", http.StatusUnauthorized, ""},
			{"a POST", http.MethodPost, id, "Bearer " + tok.AccessToken, http.StatusMethodNotAllowed, ""},
		} {
			r := e.grantAPI(t, c.method, c.id, c.auth)
			if r.status != c.status || (c.errCode != "" && r.json["error"] != c.errCode) {
				t.Errorf("%s: %d %s, want %d %s", c.name, r.status, r.raw, c.status, c.errCode)
			}
			if c.status == http.StatusUnauthorized && r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s: 401 without a WWW-Authenticate challenge", c.name)
			}
			if strings.Contains(r.raw, "consent_receipt") || strings.Contains(r.raw, "eyJ") {
				t.Errorf("%s: the refusal carries a consent receipt: %s", c.name, r.raw)
			}
		}
		if got := e.writes.list()[before:]; len(got) != 0 || e.itemCount(t) != items {
			t.Fatalf("refused grant management requests wrote %v", got)
		}
		if grantScope(t, e.grantAPI(t, http.MethodGet, id, "Bearer "+tok.AccessToken)) != "openid "+gmScopes {
			t.Fatal("the grant changed")
		}
	})
}

// TestGrantManagement_BadGrantIDRefusedAtTheRequestAndStoresNothing: grant management
// parameters that are malformed, or a grant_id that is unknown, another client's or a payment
// grant, are refused at PAR (400 JSON) and at the authorization endpoint (a redirect to the
// client with the error and the state), before anything is stored; a merge of another user's
// grant is refused at the consent's decision with invalid_grant_id, and leaves it as it was.
func TestGrantManagement_BadGrantIDRefusedAtTheRequestAndStoresNothing(t *testing.T) {
	bothStores(t, passkeysOn, func(t *testing.T, e *env) {
		mine := e.gmGrant(t, "openid "+gmScopes, "create", "")
		id := mine.Extra("grant_id").(string)
		otherCfg := &oauth2.Config{ClientID: otherID, ClientSecret: otherSecret, RedirectURL: otherURI, Scopes: []string{"openid"},
			Endpoint: oauth2.Endpoint{AuthURL: e.url(httpapi.PathAuthorize), TokenURL: e.url(httpapi.PathToken)}}
		pkce := oauth2.GenerateVerifier()
		loc := e.authorize(t, otherCfg.AuthCodeURL("st", oauth2.SetAuthURLParam("grant_management_action", "create")))
		theirs, err := otherCfg.Exchange(context.Background(), loc.Query().Get("code"))
		if err != nil {
			t.Fatal(err)
		}
		payment := "[" + rarPayment + "]"
		p := pushedParams(oauth2.S256ChallengeFromVerifier(pkce))
		p.Set("authorization_details", payment)
		p.Set("grant_management_action", "create")
		_, body := e.push(t, p)
		st, pay := e.exchange(t, e.authorize(t, e.parURL(body["request_uri"].(string))).Query().Get("code"), url.Values{"code_verifier": {pkce}})
		if st != http.StatusOK || pay["grant_id"] == nil {
			t.Fatalf("payment grant: %d %v", st, pay)
		}
		cases := []struct {
			name, action, grantID, details, errCode string
		}{
			{"an unknown action", "update", id, "", "invalid_request"},
			{"merge without grant_id", "merge", "", "", "invalid_request"},
			{"grant_id without an action", "", id, "", "invalid_request"},
			{"create with a grant_id", "create", id, "", "invalid_request"},
			{"an unknown grant", "merge", "gr_unknown", "", "invalid_grant_id"},
			{"another client's grant", "merge", theirs.Extra("grant_id").(string), "", "invalid_grant_id"},
			{"a payment grant", "replace", pay["grant_id"].(string), "", "invalid_grant_id"},
			{"payment details into a grant", "merge", id, payment, "invalid_request"},
		}
		for _, c := range cases {
			items := e.itemCount(t)
			p := pushedParams(oauth2.S256ChallengeFromVerifier(pkce))
			p.Set("grant_management_action", c.action)
			p.Set("grant_id", c.grantID)
			if c.details != "" {
				p.Set("authorization_details", c.details)
			}
			if st, body := e.push(t, p); st != http.StatusBadRequest || body["error"] != c.errCode {
				t.Errorf("PAR with %s: %d %v, want 400 %s", c.name, st, body, c.errCode)
			}
			b := newBrowser(t)
			q := url.Values{"grant_management_action": {c.action}, "grant_id": {c.grantID}, "code_challenge": {p.Get("code_challenge")},
				"code_challenge_method": {"S256"}}
			if c.details != "" {
				q.Set("authorization_details", c.details)
			}
			resp := b.open(e.authorizeURL(q))
			to, _ := url.Parse(resp.Header.Get("Location"))
			if to == nil || to.Query().Get("error") != c.errCode || to.Query().Get("state") != "st-123" {
				t.Errorf("authorize with %s: %d %v, want a redirect with %s and the state", c.name, resp.StatusCode, to, c.errCode)
			}
			if n := e.itemCount(t); n != items {
				t.Errorf("%s: %d items before, %d after: a refused request stored something", c.name, items, n)
			}
		}

		// Another user (bob) asks to merge alice's grant into his: refused at the decision.
		if _, err := seed.Load(context.Background(), e.app.Store, &seed.File{Users: []seed.User{{UID: "uid-bob", Username: "bob",
			Password: password, Email: "bob@example.com"}}}, cheapHasher, time.Now()); err != nil {
			t.Fatal(err)
		}
		b := newBrowser(t)
		b.open(e.oauth2Config("openid", "phone").AuthCodeURL("st-bob", oauth2.S256ChallengeOption(pkce),
			oauth2.SetAuthURLParam("grant_management_action", "merge"), oauth2.SetAuthURLParam("grant_id", id)))
		b.login(e, "bob", password)
		if to := b.decide(e, "allow"); to.Query().Get("error") != "invalid_grant_id" || to.Query().Get("code") != "" {
			t.Fatalf("bob's merge of alice's grant: redirect %s, want error=invalid_grant_id", to.Redacted())
		}
		if grantScope(t, e.grantAPI(t, http.MethodGet, id, "Bearer "+mine.AccessToken)) != "openid "+gmScopes {
			t.Fatal("alice's grant changed")
		}
	})
}

// TestGrantManagement_RacingMergesOfOneGrantHaveOneConsistentResult: 50 merges of one grant,
// each consented and its code exchanged at once: exactly one exchange gets tokens, the others
// invalid_grant; the grant is then exactly the winner's merge, and only the winner's tokens
// are valid. On both stores.
func TestGrantManagement_RacingMergesOfOneGrantHaveOneConsistentResult(t *testing.T) {
	const racers = 50
	bothStores(t, nil, func(t *testing.T, e *env) {
		first := e.gmGrant(t, "openid "+gmScopes, "create", "")
		id := first.Extra("grant_id").(string)
		extra := []string{"email", "phone", "profile"}
		codes, verifiers := make([]string, racers), make([]string, racers)
		for i := range racers {
			verifiers[i] = oauth2.GenerateVerifier()
			cfg := e.oauth2Config("openid", extra[i%len(extra)])
			loc := e.authorize(t, cfg.AuthCodeURL("st-race", oauth2.S256ChallengeOption(verifiers[i]),
				oauth2.SetAuthURLParam("grant_management_action", "merge"), oauth2.SetAuthURLParam("grant_id", id)))
			codes[i] = loc.Query().Get("code")
		}
		type answer struct {
			status int
			body   map[string]any
			err    error
		}
		answers := make([]answer, racers)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := range racers {
			wg.Go(func() {
				<-gate
				form := url.Values{"grant_type": {"authorization_code"}, "code": {codes[i]}, "redirect_uri": {redirectURI},
					"code_verifier": {verifiers[i]}, "client_id": {clientID}, "client_secret": {clientSecret}}
				resp, err := http.PostForm(e.url(httpapi.PathToken), form)
				if err != nil {
					answers[i].err = err
					return
				}
				defer resp.Body.Close()
				raw, _ := io.ReadAll(resp.Body)
				answers[i].status = resp.StatusCode
				answers[i].err = json.Unmarshal(raw, &answers[i].body)
			})
		}
		close(gate)
		wg.Wait()
		var winner map[string]any
		for i, a := range answers {
			switch {
			case a.err != nil:
				t.Fatalf("racer %d: %v", i, a.err)
			case a.status == http.StatusOK && winner == nil:
				winner = a.body
			case a.status == http.StatusOK:
				t.Fatalf("racer %d also got tokens: two merges of one revision won", i)
			case a.status != http.StatusBadRequest || a.body["error"] != "invalid_grant":
				t.Fatalf("racer %d: %d %v, want 400 invalid_grant", i, a.status, a.body)
			}
		}
		if winner == nil {
			t.Fatal("no merge won")
		}
		at := winner["access_token"].(string)
		if got := grantScope(t, e.grantAPI(t, http.MethodGet, id, "Bearer "+at)); got != winner["scope"] {
			t.Fatalf("the grant holds %q, the winner's merge is %q", got, winner["scope"])
		}
		if e.tokenValid(first.AccessToken) {
			t.Fatal("the grant's token from before the race is still valid")
		}
	})
}

// TestGrantManagement_DPoPBoundTokenNeedsItsProof: a token bound to a DPoP key is taken at the
// grant management endpoint only under the DPoP scheme with a proof of that key for the
// request's method and URL, as at the token endpoint's resources. On both stores.
func TestGrantManagement_DPoPBoundTokenNeedsItsProof(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		key, other := newDPoPKey(t, jose.ES256), newDPoPKey(t, jose.ES256)
		code, verifier := e.codeWithPKCE(t, url.Values{"scope": {"openid " + gmScopes}, "grant_management_action": {"create"}})
		st, body, _ := e.dpopPost(t, httpapi.PathToken, codeParams(code, verifier), key.proof(t, e, http.MethodPost, e.url(httpapi.PathToken), ""))
		if st != http.StatusOK || body["token_type"] != "DPoP" || body["grant_id"] == nil {
			t.Fatalf("exchange with a proof: %d %v", st, body)
		}
		at, id := body["access_token"].(string), body["grant_id"].(string)
		u := e.url(httpapi.PathGrants + "/" + id)
		before := e.writes.count()
		for name, c := range map[string]struct{ scheme, proof string }{
			"as Bearer":               {"Bearer", ""},
			"DPoP without a proof":    {"DPoP", ""},
			"another key's proof":     {"DPoP", other.proof(t, e, http.MethodGet, u, at)},
			"a proof for another URL": {"DPoP", key.proof(t, e, http.MethodGet, e.url(httpapi.PathUserinfo), at)},
		} {
			if st, h := dpopGet(t, u, c.scheme, at, c.proof); st != http.StatusUnauthorized || h.Get("WWW-Authenticate") == "" {
				t.Errorf("grant query %s: %d, want 401 with a challenge", name, st)
			}
		}
		if got := e.writes.list()[before:]; len(got) != 0 {
			t.Errorf("refused DPoP presentations wrote %v", got)
		}
		if st, _ := dpopGet(t, u, "DPoP", at, key.proof(t, e, http.MethodGet, u, at)); st != http.StatusOK {
			t.Fatalf("grant query with its proof: %d", st)
		}
	})
}

// TestGrantManagement_CertificateBoundTokenNeedsItsCertificate: a token bound to a client
// certificate (RFC 8705) is taken at the grant management endpoint only over mutual TLS with
// that certificate, as at userinfo and the bank API.
func TestGrantManagement_CertificateBoundTokenNeedsItsCertificate(t *testing.T) {
	m := newMTLSEnv(t)
	withA, withB, noCert := m.client(&m.certA), m.client(&m.certB), m.client(nil)
	r := m.exchangeOver(t, withA, m.code(t, url.Values{"scope": {"openid " + gmScopes}, "grant_management_action": {"create"}}), mtlsSecretCreds)
	id, _ := r.json["grant_id"].(string)
	if r.status != http.StatusOK || id == "" {
		t.Fatalf("token over mTLS: %d %s", r.status, r.raw)
	}
	auth := "Bearer " + r.json["access_token"].(string)
	for name, c := range map[string]struct {
		client *http.Client
		base   string
	}{
		"another certificate":     {withB, m.tlsSrv.URL},
		"TLS without certificate": {noCert, m.tlsSrv.URL},
		"plain HTTP":              {http.DefaultClient, m.srv.URL},
	} {
		if got := apiCall(t, c.client, http.MethodGet, c.base+httpapi.PathGrants+"/"+id, auth, nil); got.status != http.StatusUnauthorized {
			t.Errorf("grant query with %s: %d %s, want 401", name, got.status, got.raw)
		}
	}
	if got := apiCall(t, withA, http.MethodGet, m.tlsSrv.URL+httpapi.PathGrants+"/"+id, auth, nil); got.status != http.StatusOK {
		t.Fatalf("grant query with its certificate: %d %s", got.status, got.raw)
	}
}
