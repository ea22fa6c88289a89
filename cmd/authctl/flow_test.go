package main

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/keys"
)

const redirectURI = "http://127.0.0.1:4499/callback"

// TestOperatorFlow runs the operator's day against each store: sign-in keys, a client and
// users set up with the tool, the real OAuth flow with them, then disabling the user and the
// client, which must make their existing tokens fail at once.
func TestOperatorFlow(t *testing.T) {
	stores := []struct {
		name string
		tool func(*testing.T) *tool
	}{{"embedded", embeddedTool}, {"dynamodb", dynamoTool}}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			operatorFlow(t, st.tool(t))
		})
	}
}

// tokens runs the authorization code flow (PKCE, login, consent, exchange with
// golang.org/x/oauth2) for a user with the tool's client and secret.
func tokens(t *testing.T, s *server, clientID, secret, username, password string) *oauth2.Token {
	t.Helper()
	conf := &oauth2.Config{ClientID: clientID, ClientSecret: secret, RedirectURL: redirectURI, Scopes: []string{"openid", "email"},
		Endpoint: oauth2.Endpoint{AuthURL: s.url(httpapi.PathAuthorize), TokenURL: s.url(httpapi.PathToken), AuthStyle: oauth2.AuthStyleInParams}}
	verifier := oauth2.GenerateVerifier()
	loc := s.signIn(t, conf.AuthCodeURL("st-1", oauth2.S256ChallengeOption(verifier)), username, password)
	code := loc.Query().Get("code")
	if code == "" || loc.Query().Get("state") != "st-1" {
		t.Fatalf("no code in the redirect %s", loc.Redacted())
	}
	tok, err := conf.Exchange(context.Background(), code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("code exchange for %s: %v", username, err)
	}
	if tok.AccessToken == "" || tok.RefreshToken == "" || tok.Extra("id_token") == nil {
		t.Fatalf("token response lacks a token: %+v", tok)
	}
	return tok
}

// refresh presents a refresh token and returns the status and error code.
func refresh(t *testing.T, s *server, clientID, secret string, tok *oauth2.Token) (int, string) {
	t.Helper()
	st, body := s.postForm(t, httpapi.PathToken, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken},
		"client_id": {clientID}, "client_secret": {secret}})
	e, _ := body["error"].(string)
	return st, e
}

func operatorFlow(t *testing.T, tl *tool) {
	// A fresh store has no signing key until the server or the tool makes one.
	var rep keys.Report
	tl.okJSON(&rep, "", "keys", "rotate")
	for _, alg := range keys.Algs {
		if rep.Algs[alg].Current == "" {
			t.Fatalf("keys rotate on a fresh store made no current %s key: %+v", alg, rep)
		}
	}

	var created createdClient
	tl.okJSON(&created, "", "clients", "create", "--name", "Acme Books", "--redirect-uri", redirectURI, "--scope", "openid,email")
	clientID, oldSecret := created.Client.ClientID, created.ClientSecret
	var rotated createdClient
	tl.okJSON(&rotated, "", "clients", "rotate-secret", clientID, "--grace", "1h")
	newSecret := rotated.ClientSecret
	if newSecret == "" || newSecret == oldSecret || len(rotated.Client.Secrets) != 2 {
		t.Fatalf("rotate-secret with grace: %+v", rotated)
	}

	var alice userView
	tl.okJSON(&alice, "correct-horse-battery\n", "users", "create", "Alice", "--password-stdin", "--email", "alice@example.com",
		"--company-profile-id", "cp-1", "--company-user-id", "cu-1")
	if alice.Username != "alice" || alice.UID == "" {
		t.Fatalf("users create: %+v", alice)
	}
	csv := tempFile(t, "users.csv", "username,password,email\nbob,another-long-passphrase,bob@example.com\ncarol,short,\n")
	out, errOut, code := tl.run("", "users", "import", csv, "-o", "json")
	if code != exitPartial || !strings.Contains(out, `"created": 1`) || !strings.Contains(errOut, "import: 2/2 rows") {
		t.Fatalf("import with one bad row: exit %d, want %d\nstdout %s\nstderr %s", code, exitPartial, out, errOut)
	}

	// The client and users work in the real flow; the old secret works during its grace.
	s := tl.serve()
	aliceTok := tokens(t, s, clientID, oldSecret, "alice", "correct-horse-battery")
	bobTok := tokens(t, s, clientID, newSecret, "BOB", "another-long-passphrase")
	meta, _ := aliceTok.Extra("metadata").(map[string]any)
	if meta["uid"] != alice.UID || meta["companyProfileId"] != "cp-1" {
		t.Fatalf("alice's token metadata %v, want uid %s", meta, alice.UID)
	}
	if !s.tokenValid(aliceTok.AccessToken) || !s.tokenValid(bobTok.AccessToken) {
		t.Fatal("fresh access tokens do not validate")
	}
	s.stop()

	var grants []grantView
	tl.okJSON(&grants, "", "grants", "list", "--client", clientID)
	if len(grants) != 2 {
		t.Fatalf("grants list --client: %d grants, want 2", len(grants))
	}
	tl.okJSON(&grants, "", "grants", "list", "--user", "alice")
	if len(grants) != 1 || grants[0].UID != alice.UID {
		t.Fatalf("grants list --user alice: %+v", grants)
	}

	// Disabling the user ends her tokens at once, and only hers.
	var dis disabledResult
	tl.okJSON(&dis, "", "users", "disable", "alice")
	if len(dis.RevokedGrants) != 1 || dis.RevokedGrants[0] != grants[0].ID {
		t.Fatalf("users disable revoked %v, want %s", dis.RevokedGrants, grants[0].ID)
	}
	s = tl.serve()
	if s.tokenValid(aliceTok.AccessToken) {
		t.Error("the disabled user's access token still validates")
	}
	if st, e := refresh(t, s, clientID, newSecret, aliceTok); st != http.StatusBadRequest || e != "invalid_grant" {
		t.Errorf("refresh of the disabled user's token: %d %s, want 400 invalid_grant", st, e)
	}
	if !s.tokenValid(bobTok.AccessToken) {
		t.Error("disabling alice ended bob's token")
	}
	s.stop()

	// Disabling the client ends every token it holds, and it can no longer authenticate.
	tl.okJSON(&dis, "", "clients", "disable", clientID)
	if len(dis.RevokedGrants) != 1 {
		t.Fatalf("clients disable revoked %v, want bob's grant", dis.RevokedGrants)
	}
	s = tl.serve()
	if s.tokenValid(bobTok.AccessToken) {
		t.Error("the disabled client's access token still validates")
	}
	if st, e := refresh(t, s, clientID, newSecret, bobTok); st != http.StatusUnauthorized || e != "invalid_client" {
		t.Errorf("refresh by the disabled client: %d %s, want 401 invalid_client", st, e)
	}
	s.stop()

	// Enabled again, both work for new authorizations; revoked tokens stay revoked.
	tl.ok("", "clients", "enable", clientID)
	tl.ok("", "users", "enable", "alice")
	s = tl.serve()
	fresh := tokens(t, s, clientID, newSecret, "alice", "correct-horse-battery")
	if !s.tokenValid(fresh.AccessToken) {
		t.Error("a token issued after enabling does not validate")
	}
	if s.tokenValid(aliceTok.AccessToken) || s.tokenValid(bobTok.AccessToken) {
		t.Error("enabling brought a revoked token back")
	}
	s.stop()
}

// TestOperatorFlow_RotatedSecretWithoutGraceFails proves a rotation without grace locks the
// old secret out of the token endpoint at once, and the new one works in the flow.
func TestOperatorFlow_RotatedSecretWithoutGraceFails(t *testing.T) {
	tl := embeddedTool(t)
	tl.ok("", "keys", "rotate")
	var c createdClient
	tl.okJSON(&c, "", "clients", "create", "--id", "acme", "--name", "Acme", "--redirect-uri", redirectURI, "--scope", "openid email")
	var r createdClient
	tl.okJSON(&r, "", "clients", "rotate-secret", "acme")
	tl.ok("correct-horse-battery", "users", "create", "dana", "--password-stdin")
	s := tl.serve()
	tok := tokens(t, s, "acme", r.ClientSecret, "dana", "correct-horse-battery")
	if st, e := refresh(t, s, "acme", c.ClientSecret, tok); st != http.StatusUnauthorized || e != "invalid_client" {
		t.Errorf("refresh with the rotated-away secret: %d %s, want 401 invalid_client", st, e)
	}
	if st, e := refresh(t, s, "acme", r.ClientSecret, tok); st != http.StatusOK {
		t.Errorf("refresh with the new secret: %d %s, want 200", st, e)
	}
	s.stop()
}
