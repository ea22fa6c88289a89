package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// secretSet collects every secret a run handed out or received, to look for them afterwards.
type secretSet struct {
	t    *testing.T
	vals map[string]string // value → what it is
}

func (s *secretSet) add(what, v string) {
	if v == "" {
		s.t.Fatalf("empty %s", what)
	}
	s.vals[v] = what
}

// addToken adds a token response's secrets.
func (s *secretSet) addTokens(body map[string]any) {
	for _, k := range []string{"access_token", "refresh_token", "id_token"} {
		v, _ := body[k].(string)
		s.add(k, v)
	}
}

// findIn reports every secret found in data, in its text form or, for the service's own
// base64url secrets, as the raw random bytes.
func (s *secretSet) findIn(where string, data []byte) {
	s.t.Helper()
	for v, what := range s.vals {
		if bytes.Contains(data, []byte(v)) {
			s.t.Errorf("%s holds a %s", where, what)
			continue
		}
		if _, rest, ok := strings.Cut(v, "_"); ok && len(rest) == 43 {
			if raw, err := base64.RawURLEncoding.DecodeString(rest); err == nil && bytes.Contains(data, raw) {
				s.t.Errorf("%s holds the raw bytes of a %s", where, what)
			}
		}
	}
}

// TestSecrets_NeverInLogsOrStore runs full flows with refreshes, revocations, replays, failed
// logins (a password typed into the username field among them), lockouts and wrong client
// secrets, then looks for every token, code, client secret, password, CSRF token and session
// cookie in the logs (access log included), in every item the store lists, and in the raw
// bytes and every key and value of the embedded store's file (RFC 6819 5.1.4.1.3, 5.1.6;
// RFC 9700 4.14; DESIGN.md decision 1).
func TestSecrets_NeverInLogsOrStore(t *testing.T) {
	e := newSecEnv(t, secOptions{env: map[string]string{config.EnvLoginMaxFails: "3"}})
	ctx := context.Background()
	s := &secretSet{t: t, vals: map[string]string{}}
	s.add("client secret", clientSecret)
	s.add("client secret", otherSecret)
	s.add("password", password)

	// 1. The code flow with PKCE and nonce, a browser whose cookies and CSRF token we keep.
	verifier := randomVerifier()
	s.add("PKCE verifier", verifier)
	b := newBrowser(t)
	b.open(e.authorizeURL(url.Values{"code_challenge": {oauth.S256(verifier)}, "code_challenge_method": {"S256"}, "nonce": {"n-123"}}))
	s.add("CSRF token", b.form.Get("csrf_token"))
	s.add("browser binding cookie", e.secCookie(b, "bid"))
	b.login(e, username, password)
	s.add("session cookie", e.secCookie(b, "sid"))
	loc := b.decide(e, "allow")
	code := loc.Query().Get("code")
	s.add("code", code)
	st, tok := e.exchange(t, code, url.Values{"code_verifier": {verifier}})
	if st != 200 {
		t.Fatalf("exchange %d %v", st, tok)
	}
	s.addTokens(tok)

	// 2. Refreshes in both encodings and both client authentications, then a replay of a spent
	//    refresh token, which revokes the grant.
	rt := tok["refresh_token"].(string)
	for i, enc := range []struct{ basic, asJSON bool }{{false, false}, {true, true}} {
		st, body, _ := e.post(t, httpapi.PathToken, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}}, enc.basic, enc.asJSON)
		if st != 200 {
			t.Fatalf("refresh %d: %d %v", i, st, body)
		}
		s.addTokens(body)
		rt = body["refresh_token"].(string)
	}
	if st, _ := e.secRefresh(t, tok["refresh_token"].(string)); st != 400 {
		t.Fatalf("replayed refresh token: %d", st)
	}

	// 3. A second grant: its access token revoked on one path, its refresh token on the other.
	tok2 := e.secTokens(t, url.Values{"scope": {"openid email phone profile bank:transfers.write"}})
	s.addTokens(tok2)
	if st, _, _ := e.post(t, httpapi.PathRevoke, url.Values{"token": {tok2["access_token"].(string)}}, true, false); st != 200 {
		t.Fatalf("revoke access token %d", st)
	}
	if st, _, _ := e.post(t, httpapi.PathRevokeLegacy, url.Values{"token": {tok2["refresh_token"].(string)}, "token_type_hint": {"refresh_token"}}, false, true); st != 200 {
		t.Fatalf("revoke refresh token %d", st)
	}

	// 4. A code replayed after its exchange (revokes its grant), a code given to the wrong
	//    client, a denied consent.
	code3 := e.code(t, nil)
	s.add("code", code3)
	st, tok3 := e.exchange(t, code3, nil)
	if st != 200 {
		t.Fatalf("exchange %d", st)
	}
	s.addTokens(tok3)
	e.exchange(t, code3, nil)
	code4 := e.code(t, nil)
	s.add("code", code4)
	e.post(t, httpapi.PathToken, url.Values{"grant_type": {"authorization_code"}, "code": {code4}, "redirect_uri": {redirectURI},
		"client_id": {otherID}, "client_secret": {otherSecret}}, false, false)
	live := e.secTokens(t, url.Values{"scope": {"openid email"}}) // a grant that stays live
	s.addTokens(live)
	bd := newBrowser(t)
	bd.open(e.authorizeURL(url.Values{"prompt": {"consent"}})) // the live grant would let the page be skipped
	bd.login(e, username, password)
	s.add("session cookie", e.secCookie(bd, "sid"))
	bd.decide(e, "deny")

	// 5. Wrong client secrets, by both methods.
	wrongSecret := "wrong-client-secret-0123456789abcdefXYZ"
	s.add("wrong client secret", wrongSecret)
	e.post(t, httpapi.PathToken, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {clientID}, "client_secret": {wrongSecret}}, false, false)
	req, _ := http.NewRequest(http.MethodPost, e.url(httpapi.PathRevoke), strings.NewReader("token="+rt))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(clientID, wrongSecret)
	do(t, req)

	// 6. Failed logins: wrong passwords, the password typed as username, an unknown user, and
	//    a lockout.
	for _, attempt := range []struct{ user, pass string }{
		{username, "Wr0ng-Pa55word-guess-1"}, {password, "whatever-was-typed"}, {"nobody-at-all", "Wr0ng-Pa55word-guess-2"},
		{username, "Wr0ng-Pa55word-guess-3"}, {username, "Wr0ng-Pa55word-guess-4"}, {username, password},
	} {
		s.add("password", attempt.pass)
		e.loginAttempt(t, newBrowser(t), attempt.user, attempt.pass)
	}
	logs := e.logs.String()
	for _, ev := range []string{"grant_issued", "grant_refreshed", "refresh_reuse_detected", "grant_revoked", "code_reuse_detected", "login_failed", "login_locked"} {
		if !strings.Contains(logs, `"event":"`+ev+`"`) {
			t.Errorf("the run did not log %s: the flows did not happen as planned", ev)
		}
	}

	// The logs.
	s.findIn("the logs", []byte(logs))

	// Every item the store can list.
	clients, err := e.app.Store.ListClients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	users, err := e.app.Store.ListUsers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := e.app.Store.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var grants []oauth.GrantRecord
	for _, f := range []oauth.GrantFilter{{UID: "uid-alice"}, {ClientID: clientID}, {ClientID: otherID}} {
		g, err := e.app.Store.ListGrants(ctx, f, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		grants = append(grants, g...)
	}
	if len(clients) < 2 || len(users) < 1 || len(grants) == 0 {
		t.Fatalf("listed %d clients, %d users, %d grants", len(clients), len(users), len(grants))
	}
	listed, _ := json.Marshal([]any{clients, users, keys, grants})
	s.findIn("the listed items", listed)

	// The store's file: values are plain JSON, so the raw bytes are what a reader of the file
	// would see, old copies of changed or deleted items left in its free pages included.
	if err := e.app.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(e.app.Config.DataDir, embedded.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) < 4096 {
		t.Fatalf("store file of %d bytes", len(raw))
	}
	s.findIn("the store's file", raw)
	// What is stored in their place: hashes. The hash of the live grant's access token is
	// found, which proves the walk reads the items the secrets would be in.
	sum := sha256.Sum256([]byte(live["access_token"].(string)))
	if !bytes.Contains(raw, []byte(base64.RawURLEncoding.EncodeToString(sum[:]))) {
		t.Fatal("the file does not hold the token records: the search above proves nothing")
	}
}
