package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/oauth2"

	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/logout"
	"github.com/acmebank/authserver/shared/oauth"
)

// postLogoutURI is the acceptance client's registered post_logout_redirect_uri in these tests.
const postLogoutURI = "http://127.0.0.1:4499/signed-out"

// receiver is a client's back-channel logout endpoint: an https server (its certificate
// trusted by the sender the test gives the service) that records every POST and answers with
// status (200 unless set).
type receiver struct {
	srv      *httptest.Server
	status   atomic.Int32
	hang     atomic.Bool
	attempts atomic.Int32
	mu       sync.Mutex
	tokens   []string
	bad      []string // what was wrong with a request, if anything
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{}
	rc.status.Store(http.StatusOK)
	stop := make(chan struct{})
	rc.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.attempts.Add(1)
		body, _ := io.ReadAll(r.Body)
		if rc.hang.Load() {
			select {
			case <-r.Context().Done():
			case <-stop:
			}
			return
		}
		v, err := url.ParseQuery(string(body))
		rc.mu.Lock()
		switch {
		case r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" || err != nil || len(v) != 1:
			rc.bad = append(rc.bad, fmt.Sprintf("%s %s %q", r.Method, r.Header.Get("Content-Type"), body))
		default:
			rc.tokens = append(rc.tokens, v.Get("logout_token"))
		}
		rc.mu.Unlock()
		w.WriteHeader(int(rc.status.Load()))
	}))
	t.Cleanup(rc.srv.Close)
	t.Cleanup(func() { close(stop) }) // runs first: a hanging answer ends before the server closes
	return rc
}

func (rc *receiver) received() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.bad) > 0 {
		panic(fmt.Sprintf("the receiver got malformed requests: %v", rc.bad))
	}
	return append([]string(nil), rc.tokens...)
}

func (rc *receiver) roots() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(rc.srv.Certificate())
	return p
}

// withLogout serves the handlers again with a sender that trusts rc's certificate (o varies
// it; loopback allowed unless o says otherwise through strict), and registers on the
// acceptance client postLogoutURI and rc as its backchannel_logout_uri; change edits the
// client further.
func (e *env) withLogout(t *testing.T, rc *receiver, o logout.SenderOptions, strict bool, change func(*oauth.Client)) {
	t.Helper()
	o.RootCAs, o.AllowPrivate = rc.roots(), !strict
	e.app.LogoutSender = logout.NewSender(o)
	e.serve()
	err := e.app.Store.UpdateClient(context.Background(), clientID, func(c oauth.Client) (oauth.Client, error) {
		c.PostLogoutRedirectURIs = []string{postLogoutURI}
		c.BackchannelLogoutURI = rc.srv.URL + "/backchannel"
		if change != nil {
			change(&c)
		}
		return c, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// signIn signs user in with b through x/oauth2 and returns the token response and its
// verified id_token's sub and sid.
func (e *env) signIn(t *testing.T, b *browser, user, pass string) (tok *oauth2.Token, sub, sid string) {
	t.Helper()
	tok = e.grantThrough(t, b, e.oauth2Config(oidc.ScopeOpenID, "email"), user, pass)
	raw, _ := tok.Extra("id_token").(string)
	idt, err := e.verifier(t).Verify(context.Background(), raw)
	if err != nil {
		t.Fatalf("verify id_token: %v", err)
	}
	var c struct {
		SID string `json:"sid"`
	}
	if err := idt.Claims(&c); err != nil || c.SID == "" {
		t.Fatalf("id_token sid %q (%v)", c.SID, err)
	}
	return tok, idt.Subject, c.SID
}

func logoutURL(e *env, v url.Values) string { return e.url(httpapi.PathLogout) + "?" + v.Encode() }

// confirm opens the logout request u in b, expects the confirmation page and confirms it;
// it returns the answer to the confirmation.
func (e *env) confirmLogout(t *testing.T, b *browser, u string) *http.Response {
	t.Helper()
	if resp := b.open(u); resp.StatusCode != http.StatusOK || !strings.Contains(b.last, `value="logout"`) || b.form.Get("csrf_token") == "" {
		t.Fatalf("logout request answered %d, want the confirmation page: %.400s", resp.StatusCode, b.last)
	}
	return b.submit(e.url(httpapi.PathLogout), url.Values{"action": {"logout"}})
}

// signedIn reports whether b's session still spares it the login page.
func (e *env) signedIn(t *testing.T, b *browser) bool {
	t.Helper()
	b.open(e.authorizeURL(nil))
	return !strings.Contains(b.last, `type="password"`)
}

// logoutClaims verifies a logout token against the service's JWKS (go-oidc's remote key set,
// as a client would) and returns its header and claims.
func (e *env) logoutClaims(t *testing.T, raw string) (map[string]any, map[string]any) {
	t.Helper()
	ks := oidc.NewRemoteKeySet(context.Background(), e.url(httpapi.PathJWKS))
	payload, err := ks.VerifySignature(context.Background(), raw)
	if err != nil {
		t.Fatalf("the logout token does not verify against the JWKS: %v", err)
	}
	var hdr, claims map[string]any
	h, _ := base64.RawURLEncoding.DecodeString(strings.Split(raw, ".")[0])
	if json.Unmarshal(h, &hdr) != nil || json.Unmarshal(payload, &claims) != nil {
		t.Fatalf("logout token %q", raw)
	}
	return hdr, claims
}

// checkLogoutToken checks every claim of a logout token for the client, sub and sid
// (Back-Channel Logout 1.0 2.4, 2.6).
func (e *env) checkLogoutToken(t *testing.T, raw, client, sub, sid string) {
	t.Helper()
	hdr, c := e.logoutClaims(t, raw)
	if hdr["typ"] != "logout+jwt" || hdr["kid"] == nil {
		t.Errorf("logout token header %v", hdr)
	}
	iat, _ := c["iat"].(float64)
	exp, _ := c["exp"].(float64)
	now := float64(e.clock.Now().Unix())
	events, _ := c["events"].(map[string]any)
	ev, isObj := events["http://schemas.openid.net/event/backchannel-logout"].(map[string]any)
	if c["iss"] != e.app.Config.Issuer || c["aud"] != client || c["sub"] != sub || c["sid"] != sid ||
		iat < now-5 || iat > now+5 || exp <= iat || exp-iat > 120 || c["jti"] == nil || c["jti"] == "" ||
		len(events) != 1 || !isObj || len(ev) != 0 {
		t.Errorf("logout token claims %v (want iss %s, aud %s, sub %s, sid %s)", c, e.app.Config.Issuer, client, sub, sid)
	}
	if _, has := c["nonce"]; has {
		t.Errorf("logout token carries a nonce: %v", c)
	}
}

// TestLogout_DiscoveryAdvertisesEndSessionAndBackChannelLogout: discovery names the
// end-session endpoint and back-channel logout with sid, as go-oidc reads it.
func TestLogout_DiscoveryAdvertisesEndSessionAndBackChannelLogout(t *testing.T) {
	e := newEnv(t)
	p, err := oidc.NewProvider(context.Background(), e.app.Config.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		EndSession  string `json:"end_session_endpoint"`
		Backchannel *bool  `json:"backchannel_logout_supported"`
		Session     *bool  `json:"backchannel_logout_session_supported"`
	}
	if err := p.Claims(&doc); err != nil || doc.EndSession != e.url(httpapi.PathLogout) || doc.Backchannel == nil || !*doc.Backchannel || doc.Session == nil || !*doc.Session {
		t.Fatalf("discovery %+v (%v)", doc, err)
	}
}

// TestLogout_EndsTheSessionRedirectsWithStateAndTellsTheClient: with x/oauth2 and go-oidc,
// alice signs in; the client sends her to the end-session endpoint with her id_token as hint,
// its registered post_logout_redirect_uri and a state; she confirms; the browser goes back
// there with the state, the session is gone (authorize asks for the login again), the client's
// back-channel receiver got one logout token that verifies against the JWKS with every claim
// right, and the grant survives (the client did not ask logout to revoke it). Both stores.
func TestLogout_EndsTheSessionRedirectsWithStateAndTellsTheClient(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		rc := newReceiver(t)
		e.withLogout(t, rc, logout.SenderOptions{}, false, nil)
		b := newBrowser(t)
		tok, sub, sid := e.signIn(t, b, username, password)
		cookie := e.secCookie(b, "sid")
		resp := e.confirmLogout(t, b, logoutURL(e, url.Values{"id_token_hint": {tok.Extra("id_token").(string)},
			"post_logout_redirect_uri": {postLogoutURI}, "state": {"st-logout"}}))
		if resp.StatusCode != http.StatusSeeOther || b.landed != postLogoutURI+"?state=st-logout" {
			t.Fatalf("confirmation answered %d to %q, want 303 to %s?state=st-logout", resp.StatusCode, b.landed, postLogoutURI)
		}
		if e.secCookie(b, "sid") != "" {
			t.Error("the session cookie is still set")
		}
		if _, err := e.app.Store.GetSession(context.Background(), oauth.HashToken(cookie), e.clock.Now()); !errors.Is(err, oauth.ErrNotFound) {
			t.Errorf("the session is still stored (%v): its cookie, kept elsewhere, would sign in", err)
		}
		if e.signedIn(t, b) {
			t.Fatal("after logout, the authorization endpoint did not ask for the login")
		}
		got := rc.received()
		if len(got) != 1 {
			t.Fatalf("the receiver got %d logout tokens, want 1", len(got))
		}
		e.checkLogoutToken(t, got[0], clientID, sub, sid)
		if !e.tokenValid(tok.AccessToken) {
			t.Error("the grant ended with the session, though the client did not ask so")
		}
		if strings.Contains(e.logs.String(), got[0]) || strings.Contains(e.logs.String(), tok.Extra("id_token").(string)) {
			t.Error("a logout token or the id_token hint reached the logs")
		}
		if !strings.Contains(e.logs.String(), `"backchannel_logout_sent"`) || !strings.Contains(e.logs.String(), `"session_logout"`) {
			t.Error("no audit of the logout and its delivery")
		}
	})
}

// TestLogout_RevokesOnlyThatSessionsGrantsOfClientsThatAskIt: a client with
// logout_revokes_grants loses the grants given in the session that ends, and only those: its
// grant from alice's other browser's session, and another client's grant in the same session,
// stay live.
func TestLogout_RevokesOnlyThatSessionsGrantsOfClientsThatAskIt(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		rc := newReceiver(t)
		e.withLogout(t, rc, logout.SenderOptions{}, false, func(c *oauth.Client) { c.LogoutRevokesGrants = true })
		b, elsewhere := newBrowser(t), newBrowser(t)
		tok, _, sid := e.signIn(t, b, username, password)
		otherConf := &oauth2.Config{ClientID: otherID, ClientSecret: otherSecret, RedirectURL: otherURI, Scopes: []string{"openid"},
			Endpoint: oauth2.Endpoint{AuthURL: e.url(httpapi.PathAuthorize), TokenURL: e.url(httpapi.PathToken)}}
		b.open(otherConf.AuthCodeURL("st-o"))
		otherTok, err := otherConf.Exchange(context.Background(), b.decide(e, "allow").Query().Get("code"))
		if err != nil {
			t.Fatal(err)
		}
		kept, _, sid2 := e.signIn(t, elsewhere, username, password)
		if sid2 == sid {
			t.Fatal("two browsers share a session id")
		}
		if resp := e.confirmLogout(t, b, logoutURL(e, url.Values{"client_id": {clientID}})); resp.StatusCode != http.StatusOK || !strings.Contains(b.last, "signed out") {
			t.Fatalf("a logout without a post_logout_redirect_uri answered %d: %.300s", resp.StatusCode, b.last)
		}
		if e.tokenValid(tok.AccessToken) {
			t.Error("the session's grant of a client with logout_revokes_grants survived")
		}
		if !e.tokenValid(kept.AccessToken) || !e.signedIn(t, elsewhere) {
			t.Error("the logout ended the other browser's session or its grant")
		}
		if !e.tokenValid(otherTok.AccessToken) {
			t.Error("the logout revoked the grant of a client that did not ask it")
		}
	})
}

// TestLogout_BadRequestsNeverRedirectAndChangeNothing: an unknown client, an unregistered
// post_logout_redirect_uri, a hint from another issuer, a forged hint, a hint of another
// client, a post_logout_redirect_uri with no client, repeated or oversized parameters: each
// gets an error page (never a redirect), writes nothing, and the session stays.
func TestLogout_BadRequestsNeverRedirectAndChangeNothing(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t)
	e.withLogout(t, rc, logout.SenderOptions{}, false, nil)
	b := newBrowser(t)
	tok, _, _ := e.signIn(t, b, username, password)
	hint := tok.Extra("id_token").(string)
	parts := strings.Split(hint, ".")
	claims, _ := base64.RawURLEncoding.DecodeString(parts[1])
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(claims), `"sub":"`, `"sub":"x`, 1))) + "." + parts[2]
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	foreign, _ := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"iss": "https://evil.example", "sub": "uid-alice", "aud": clientID,
		"exp": time.Now().Add(time.Hour).Unix()}).SignedString(key)
	// Our key's kid, someone else's key: the kid does not make it ours.
	var hdr map[string]any
	h, _ := base64.RawURLEncoding.DecodeString(parts[0])
	_ = json.Unmarshal(h, &hdr)
	spoof := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"iss": e.app.Config.Issuer, "sub": "uid-alice", "aud": clientID})
	spoof.Header["kid"] = hdr["kid"]
	spoofed, _ := spoof.SignedString(key)
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"iss": e.app.Config.Issuer, "sub": "uid-alice", "aud": clientID}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	for _, c := range []struct {
		name  string
		query string
	}{
		{"unknown client", url.Values{"client_id": {"nobody"}, "post_logout_redirect_uri": {postLogoutURI}}.Encode()},
		{"unregistered post_logout_redirect_uri", url.Values{"client_id": {clientID}, "post_logout_redirect_uri": {"https://evil.example/cb"}}.Encode()},
		{"redirect_uri is not a post_logout_redirect_uri", url.Values{"client_id": {clientID}, "post_logout_redirect_uri": {redirectURI}}.Encode()},
		{"prefix of a registered URI", url.Values{"client_id": {clientID}, "post_logout_redirect_uri": {postLogoutURI + "/x"}}.Encode()},
		{"post_logout_redirect_uri without a client", url.Values{"post_logout_redirect_uri": {postLogoutURI}}.Encode()},
		{"hint from another issuer", url.Values{"id_token_hint": {foreign}, "post_logout_redirect_uri": {postLogoutURI}}.Encode()},
		{"hint signed by another key under our kid", url.Values{"id_token_hint": {spoofed}, "post_logout_redirect_uri": {postLogoutURI}}.Encode()},
		{"unsigned hint", url.Values{"id_token_hint": {none}, "post_logout_redirect_uri": {postLogoutURI}}.Encode()},
		{"tampered hint", url.Values{"id_token_hint": {tampered}, "post_logout_redirect_uri": {postLogoutURI}}.Encode()},
		{"hint of another client", url.Values{"id_token_hint": {hint}, "client_id": {otherID}, "post_logout_redirect_uri": {otherURI}}.Encode()},
		{"garbage hint", url.Values{"id_token_hint": {"a.b.c"}}.Encode()},
		{"repeated parameter", "client_id=" + clientID + "&client_id=" + otherID},
		{"oversized state", url.Values{"client_id": {clientID}, "state": {strings.Repeat("s", 5000)}}.Encode()},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := e.writes.count()
			resp := b.open(e.url(httpapi.PathLogout) + "?" + c.query)
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" || strings.Contains(b.last, `value="logout"`) {
				t.Fatalf("answered %d (Location %q), want a 400 error page: %.300s", resp.StatusCode, resp.Header.Get("Location"), b.last)
			}
			if n := e.writes.count(); n != before {
				t.Fatalf("a refused logout request wrote %v", e.writes.list()[before:])
			}
		})
	}
	if !e.signedIn(t, b) || len(rc.received()) != 0 {
		t.Fatal("a refused logout request ended the session or told the client")
	}
	// An expired hint is still a hint (RP-Initiated Logout 1.0 2).
	e.clock.Advance(2 * e.app.Service.Lifetimes.IDToken)
	if resp := b.open(logoutURL(e, url.Values{"id_token_hint": {hint}, "post_logout_redirect_uri": {postLogoutURI}})); resp.StatusCode != http.StatusOK || !strings.Contains(b.last, `value="logout"`) {
		t.Fatalf("an expired hint of ours answered %d: %.300s", resp.StatusCode, b.last)
	}
}

// TestLogout_ConfirmationNeedsTheSessionsCSRFToken: the confirmation posted with no token or
// another session's token is refused with 403, writes nothing, and the session stays; one from
// a browser without a session (cross-site, or a second click) is answered as signed out and
// ends nothing.
func TestLogout_ConfirmationNeedsTheSessionsCSRFToken(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t)
	e.withLogout(t, rc, logout.SenderOptions{}, false, nil)
	e.addUser(t, "uid-bob", "bob", "bob-password-123456", cheapHasher)
	alice, bob, stranger := newBrowser(t), newBrowser(t), newBrowser(t)
	e.signIn(t, alice, username, password)
	e.signIn(t, bob, "bob", "bob-password-123456")
	bob.open(logoutURL(e, url.Values{"client_id": {clientID}}))
	bobsToken := bob.form.Get("csrf_token")
	for _, c := range []struct {
		name  string
		b     *browser
		token string
	}{
		{"no token", alice, ""},
		{"another session's token", alice, bobsToken},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := e.writes.count()
			resp, err := c.b.client.PostForm(e.url(httpapi.PathLogout), url.Values{"action": {"logout"}, "csrf_token": {c.token}, "client_id": {clientID}})
			if err != nil {
				t.Fatal(err)
			}
			c.b.read(resp)
			if resp.StatusCode != http.StatusForbidden || e.writes.count() != before {
				t.Fatalf("answered %d and wrote %v, want 403 and nothing", resp.StatusCode, e.writes.list()[before:])
			}
		})
	}
	// A browser without a session cookie is signed out already: whatever token it sends, it
	// gets the signed-out answer and ends nothing.
	before := e.writes.count()
	resp, err := stranger.client.PostForm(e.url(httpapi.PathLogout), url.Values{"action": {"logout"}, "csrf_token": {bobsToken}, "client_id": {clientID}})
	if err != nil {
		t.Fatal(err)
	}
	stranger.read(resp)
	if resp.StatusCode != http.StatusOK || e.writes.count() != before {
		t.Fatalf("a browser without the session: answered %d and wrote %v, want the signed-out page and nothing", resp.StatusCode, e.writes.list()[before:])
	}
	if !e.signedIn(t, alice) || !e.signedIn(t, bob) || len(rc.received()) != 0 {
		t.Fatal("a refused confirmation ended a session or told the client")
	}
}

// TestLogout_NeverEndsAnotherUsersSession: alice and bob are signed in, each in a browser; a
// stranger without a session opens alice's logout request (her id_token as hint): with
// nothing to end in the stranger's browser it goes straight back, and alice stays signed in;
// bob confirms a logout carrying alice's hint: bob's session ends, alice's and her grant do
// not, and the one logout token names bob.
func TestLogout_NeverEndsAnotherUsersSession(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t)
	e.withLogout(t, rc, logout.SenderOptions{}, false, func(c *oauth.Client) { c.LogoutRevokesGrants = true })
	e.addUser(t, "uid-bob", "bob", "bob-password-123456", cheapHasher)
	alice, bob, stranger := newBrowser(t), newBrowser(t), newBrowser(t)
	aliceTok, _, _ := e.signIn(t, alice, username, password)
	bobTok, bobSub, bobSID := e.signIn(t, bob, "bob", "bob-password-123456")
	aliceLogout := logoutURL(e, url.Values{"id_token_hint": {aliceTok.Extra("id_token").(string)}, "post_logout_redirect_uri": {postLogoutURI}, "state": {"s"}})
	if resp := stranger.open(aliceLogout); resp.StatusCode != http.StatusSeeOther || stranger.landed != postLogoutURI+"?state=s" {
		t.Fatalf("a browser without a session: %d to %q", resp.StatusCode, stranger.landed)
	}
	if resp := e.confirmLogout(t, bob, aliceLogout); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("bob's confirmation answered %d", resp.StatusCode)
	}
	if !e.signedIn(t, alice) || !e.tokenValid(aliceTok.AccessToken) {
		t.Fatal("a logout ended alice's session or grant")
	}
	if e.signedIn(t, bob) || e.tokenValid(bobTok.AccessToken) {
		t.Fatal("bob's session or grant survived his logout")
	}
	got := rc.received()
	if len(got) != 1 {
		t.Fatalf("%d logout tokens, want bob's only", len(got))
	}
	e.checkLogoutToken(t, got[0], clientID, bobSub, bobSID)
}

// TestLogout_FailingReceiverIsRetriedUpToTheBound: a receiver that answers 503 gets the
// configured number of attempts and no more, one that never answers costs the logout no more
// than the bound; either way the customer is signed out and sent back, and the failure is
// audited without the token.
func TestLogout_FailingReceiverIsRetriedUpToTheBound(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t)
	rc.status.Store(http.StatusServiceUnavailable)
	o := logout.SenderOptions{Attempts: 3, Backoff: 20 * time.Millisecond, AttemptTimeout: 300 * time.Millisecond, Bound: time.Second}
	e.withLogout(t, rc, o, false, nil)
	b := newBrowser(t)
	e.signIn(t, b, username, password)
	if resp := e.confirmLogout(t, b, logoutURL(e, url.Values{"client_id": {clientID}, "post_logout_redirect_uri": {postLogoutURI}})); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout with a failing receiver answered %d", resp.StatusCode)
	}
	if n := rc.attempts.Load(); n != 3 {
		t.Fatalf("a receiver answering 503 got %d attempts, want 3", n)
	}
	tokens := rc.received()
	if !strings.Contains(e.logs.String(), `"backchannel_logout_failed"`) || strings.Contains(e.logs.String(), tokens[0]) {
		t.Fatal("the failure is not audited, or the audit carries the token")
	}
	if len(tokens) != 3 || tokens[0] != tokens[1] || tokens[1] != tokens[2] {
		t.Fatal("the retries did not resend the same logout token")
	}

	// Each attempt may take longer than the bound: the bound, not the attempts, ends it.
	rc.attempts.Store(0)
	rc.hang.Store(true)
	o = logout.SenderOptions{Attempts: 3, Backoff: 20 * time.Millisecond, AttemptTimeout: 3 * time.Second, Bound: time.Second}
	e.withLogout(t, rc, o, false, nil)
	e.signIn(t, b, username, password)
	start := time.Now()
	if resp := e.confirmLogout(t, b, logoutURL(e, url.Values{"client_id": {clientID}})); resp.StatusCode != http.StatusOK {
		t.Fatalf("logout with a hanging receiver answered %d", resp.StatusCode)
	}
	if took := time.Since(start); took > o.Bound+time.Second {
		t.Fatalf("a hanging receiver held the logout %v, bound %v", took, o.Bound)
	}
	if e.signedIn(t, b) {
		t.Fatal("a hanging receiver kept the session alive")
	}
}

// TestLogout_ReceiverOnAPrivateAddressIsRefusedOutsideTests: with the deployment's rule
// (private addresses refused at the dial), a backchannel_logout_uri on loopback gets no
// request at all, and the refusal is audited; the customer is signed out anyway.
func TestLogout_ReceiverOnAPrivateAddressIsRefusedOutsideTests(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t)
	e.withLogout(t, rc, logout.SenderOptions{}, true, nil)
	b := newBrowser(t)
	e.signIn(t, b, username, password)
	if resp := e.confirmLogout(t, b, logoutURL(e, url.Values{"client_id": {clientID}, "post_logout_redirect_uri": {postLogoutURI}})); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout answered %d", resp.StatusCode)
	}
	if n := rc.attempts.Load(); n != 0 {
		t.Fatalf("the receiver on loopback got %d requests", n)
	}
	if !strings.Contains(e.logs.String(), "not public") {
		t.Fatal("the refusal of a private address is not audited")
	}
	if e.signedIn(t, b) {
		t.Fatal("the session survived")
	}
}

// TestLogout_FiftyRacingConfirmationsAllEndTheSession: 50 confirmations of one session's
// logout posted at once all answer with the redirect (none fails), the session is gone, the
// grant of a client with logout_revokes_grants is revoked, and the client gets exactly one
// logout token, which names that session: the session is taken once (TakeSession), and only
// the confirmation that took it tells the clients.
func TestLogout_FiftyRacingConfirmationsAllEndTheSession(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		rc := newReceiver(t)
		e.withLogout(t, rc, logout.SenderOptions{}, false, func(c *oauth.Client) { c.LogoutRevokesGrants = true })
		b := newBrowser(t)
		tok, sub, sid := e.signIn(t, b, username, password)
		b.open(logoutURL(e, url.Values{"client_id": {clientID}, "post_logout_redirect_uri": {postLogoutURI}}))
		form := url.Values{}
		for k := range b.form {
			form.Set(k, b.form.Get(k))
		}
		form.Set("action", "logout")
		const racers = 50
		codes := make([]int, racers)
		var wg sync.WaitGroup
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := b.client.PostForm(e.url(httpapi.PathLogout), form)
				if err != nil {
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				codes[i] = resp.StatusCode
			}()
		}
		wg.Wait()
		for i, c := range codes {
			if c != http.StatusSeeOther {
				t.Fatalf("racer %d answered %d, want 303", i, c)
			}
		}
		if e.signedIn(t, b) || e.tokenValid(tok.AccessToken) {
			t.Fatal("the session or its grant survived")
		}
		got := rc.received()
		if len(got) != 1 {
			t.Fatalf("%d racing confirmations delivered %d logout tokens, want 1", racers, len(got))
		}
		e.checkLogoutToken(t, got[0], clientID, sub, sid)
	})
}

var signOutCSRFRe = regexp.MustCompile(`<form method="post" action="[^"]*/logout" class="signout">\s*<input type="hidden" name="csrf_token" value="([^"]+)">`)

// TestLogout_ConnectedAppsPageSignsOut: the Connected apps page has a Sign out button, the
// end-session endpoint's confirmation; posting it ends the session and tells the client, and
// the page then says to sign in first. Its token is the session's: another browser posting it
// ends nothing.
func TestLogout_ConnectedAppsPageSignsOut(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t)
	e.withLogout(t, rc, logout.SenderOptions{}, false, nil)
	b, stranger := newBrowser(t), newBrowser(t)
	_, sub, sid := e.signIn(t, b, username, password)
	e.appsPage(t, b)
	m := signOutCSRFRe.FindStringSubmatch(b.last)
	if m == nil {
		t.Fatalf("no sign-out form on the apps page: %.600s", b.last)
	}
	post := func(br *browser) *http.Response {
		resp, err := br.client.PostForm(e.url(httpapi.PathLogout), url.Values{"action": {"logout"}, "csrf_token": {m[1]}, "ui_locales": {"en"}})
		if err != nil {
			t.Fatal(err)
		}
		br.read(resp)
		return resp
	}
	if resp := post(stranger); !e.signedIn(t, b) || len(rc.received()) != 0 {
		t.Fatalf("another browser posting the sign-out form (answered %d) ended the session or told the client", resp.StatusCode)
	}
	if resp := post(b); resp.StatusCode != http.StatusOK || !strings.Contains(b.last, "You are signed out") {
		t.Fatalf("sign out answered %d: %.300s", resp.StatusCode, b.last)
	}
	if e.signedIn(t, b) {
		t.Fatal("the session survived the sign-out button")
	}
	got := rc.received()
	if len(got) != 1 {
		t.Fatalf("%d logout tokens, want 1", len(got))
	}
	e.checkLogoutToken(t, got[0], clientID, sub, sid)
}
