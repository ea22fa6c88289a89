package e2e

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"golang.org/x/oauth2"

	"github.com/acmebank/authserver/shared/app"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
)

// Consent management (issue 29 item 5), end to end on both stores with golang.org/x/oauth2:
// remembered consent, and the customer's Connected apps page.

// grantThrough signs user in with browser b on conf's authorization request (with opts),
// allows it, and exchanges the code: the client's tokens.
func (e *env) grantThrough(t *testing.T, b *browser, conf *oauth2.Config, user, pass string, opts ...oauth2.AuthCodeOption) *oauth2.Token {
	t.Helper()
	pkce := oauth2.GenerateVerifier()
	resp := b.open(conf.AuthCodeURL("st", append(opts, oauth2.S256ChallengeOption(pkce))...))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("authorize answered %d: %.300s", resp.StatusCode, b.last)
	}
	b.login(e, user, pass)
	code := b.decide(e, "allow").Query().Get("code")
	tok, err := conf.Exchange(context.Background(), code, oauth2.VerifierOption(pkce))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	return tok
}

// TestRememberedConsent_SecondAuthorizationSkipsConsentAndPromptConsentShowsIt: alice allows
// the app once (openid email and an account_information); its next authorization request in
// the same browser, for as much or less, comes straight back with a code that exchanges, with
// no consent page; with prompt=consent the consent page is shown; a request for more (a
// scope not granted) shows it too.
func TestRememberedConsent_SecondAuthorizationSkipsConsentAndPromptConsentShowsIt(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		ctx := context.Background()
		conf := e.oauth2Config("openid", "email")
		details := oauth2.SetAuthURLParam("authorization_details", "["+rarAccounts+"]")
		b := newBrowser(t)
		e.grantThrough(t, b, conf, username, password, details)

		pkce := oauth2.GenerateVerifier()
		resp := b.open(conf.AuthCodeURL("again", details, oauth2.S256ChallengeOption(pkce)))
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("the second authorization answered %d, want 303 to the client: %.300s", resp.StatusCode, b.last)
		}
		loc, err := url.Parse(resp.Header.Get("Location"))
		if err != nil || loc.Query().Get("code") == "" || loc.Query().Get("state") != "again" {
			t.Fatalf("the second authorization went to %q, want the client with a code", resp.Header.Get("Location"))
		}
		tok, err := conf.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(pkce))
		if err != nil {
			t.Fatalf("exchange of the remembered consent's code: %v", err)
		}
		if !e.tokenValid(tok.AccessToken) {
			t.Fatal("the remembered consent's access token is refused")
		}
		if !strings.Contains(e.logs.String(), `"consent_remembered"`) {
			t.Error("the remembered consent was not audited")
		}

		// In a new browser the sign-in itself leads back to the client, and keeps its session.
		fresh := newBrowser(t)
		fresh.open(conf.AuthCodeURL("fresh", oauth2.S256ChallengeOption(pkce)))
		if resp := fresh.login(e, username, password); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(fresh.landed, redirectURI) {
			t.Fatalf("a sign-in with a remembered consent answered %d to %q, want 303 to the client", resp.StatusCode, fresh.landed)
		}
		if e.secCookie(fresh, "sid") == "" || len(e.appsPage(t, fresh)) == 0 {
			t.Fatal("the sign-in that skipped the consent page left the browser without its session")
		}

		resp = b.open(conf.AuthCodeURL("prompted", oauth2.SetAuthURLParam("prompt", "consent"), oauth2.S256ChallengeOption(pkce)))
		if resp.StatusCode != http.StatusOK || !onConsent(b) {
			t.Fatalf("prompt=consent answered %d without the consent page: %.300s", resp.StatusCode, b.last)
		}
		resp = b.open(e.oauth2Config("openid", "email", "profile").AuthCodeURL("more", oauth2.S256ChallengeOption(pkce)))
		if resp.StatusCode != http.StatusOK || !onConsent(b) {
			t.Fatalf("a request for a scope not granted answered %d without the consent page", resp.StatusCode)
		}
	})
}

var grantIDRe = regexp.MustCompile(`name="grant_id" value="([^"]+)"`)

// appsPage opens the Connected apps page in b and returns the grant ids it lists.
func (e *env) appsPage(t *testing.T, b *browser) []string {
	t.Helper()
	resp := b.open(e.url(httpapi.PathApps))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the apps page answered %d: %.300s", resp.StatusCode, b.last)
	}
	var ids []string
	for _, m := range grantIDRe.FindAllStringSubmatch(b.last, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// withdraw posts the apps page's withdraw form of grant id from b, with csrf.
func (e *env) withdraw(t *testing.T, b *browser, id, csrf string) *http.Response {
	t.Helper()
	resp, err := b.client.PostForm(e.url(httpapi.PathApps), url.Values{"action": {"withdraw"}, "grant_id": {id}, "csrf_token": {csrf}})
	if err != nil {
		t.Fatal(err)
	}
	b.read(resp)
	return resp
}

// TestConnectedApps_EachUserSeesAndWithdrawsTheirOwnGrantsOnly: alice and bob each allowed the
// app; a stranger has no session. Alice's page lists her grant (the app's name, the scopes,
// the details in words, dates) and not bob's. Alice withdrawing bob's grant, a withdrawal
// with another session's CSRF token or none, and the stranger's are refused (403) and write
// nothing; bob's token still works. Alice withdrawing her own (50 racing posts, each 303)
// ends it at once: the bank API's authorizer and introspection refuse its access token, the
// refresh is invalid_grant, the audit log names the reason "customer", and her page no longer
// lists it.
func TestConnectedApps_EachUserSeesAndWithdrawsTheirOwnGrantsOnly(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		ctx := context.Background()
		e.mountAPI(t, app.APIOptions{})
		e.addUser(t, "uid-bob", "bob", "bob-password-123456", cheapHasher)
		conf := e.oauth2Config("openid", "email")
		details := oauth2.SetAuthURLParam("authorization_details", "["+rarAccounts+"]")
		alice, bob, stranger := newBrowser(t), newBrowser(t), newBrowser(t)
		aliceTok := e.grantThrough(t, alice, conf, username, password, details)
		bobTok := e.grantThrough(t, bob, conf, "bob", "bob-password-123456")

		aliceIDs := e.appsPage(t, alice)
		aliceCSRF := alice.form.Get("csrf_token")
		if len(aliceIDs) != 1 || aliceCSRF == "" {
			t.Fatalf("alice's page lists %v (csrf %q), want her one grant", aliceIDs, aliceCSRF)
		}
		for _, want := range []string{"Acceptance App", "See your email address", "Access to your account information", "DE02 •••• •••• 8603", "Last used"} {
			if !strings.Contains(alice.last, want) {
				t.Errorf("alice's page does not show %q", want)
			}
		}
		bobIDs := e.appsPage(t, bob)
		bobCSRF := bob.form.Get("csrf_token")
		if len(bobIDs) != 1 || bobIDs[0] == aliceIDs[0] {
			t.Fatalf("bob's page lists %v, want his own one grant", bobIDs)
		}
		if resp := stranger.open(e.url(httpapi.PathApps)); resp.StatusCode != http.StatusOK || !strings.Contains(stranger.last, "Sign in to see your connected apps") || grantIDRe.MatchString(stranger.last) {
			t.Fatalf("the page without a session answered %d: %.300s", resp.StatusCode, stranger.last)
		}

		before := e.writes.count()
		for _, c := range []struct {
			name   string
			b      *browser
			id     string
			csrf   string
			status int
		}{
			{"alice withdraws bob's grant", alice, bobIDs[0], aliceCSRF, http.StatusForbidden},
			{"alice withdraws an unknown grant", alice, oauth.NewID(oauth.PrefixGrant), aliceCSRF, http.StatusForbidden},
			{"alice with bob's CSRF token", alice, aliceIDs[0], bobCSRF, http.StatusForbidden},
			{"alice without a CSRF token", alice, aliceIDs[0], "", http.StatusForbidden},
			{"bob withdraws alice's grant", bob, aliceIDs[0], bobCSRF, http.StatusForbidden},
			{"the stranger withdraws alice's grant", stranger, aliceIDs[0], aliceCSRF, http.StatusForbidden},
			{"alice without a grant id", alice, "", aliceCSRF, http.StatusBadRequest},
		} {
			if resp := e.withdraw(t, c.b, c.id, c.csrf); resp.StatusCode != c.status {
				t.Errorf("%s: %d, want %d", c.name, resp.StatusCode, c.status)
			}
		}
		if n := e.writes.count(); n != before {
			t.Fatalf("refused withdrawals wrote %d times: %v", n-before, e.writes.list()[before:])
		}
		if !e.tokenValid(aliceTok.AccessToken) || !e.tokenValid(bobTok.AccessToken) {
			t.Fatal("a refused withdrawal ended a token")
		}

		var wg sync.WaitGroup
		statuses := make([]int, 50)
		for i := range statuses {
			wg.Go(func() {
				resp, err := alice.client.PostForm(e.url(httpapi.PathApps), url.Values{"action": {"withdraw"}, "grant_id": {aliceIDs[0]}, "csrf_token": {aliceCSRF}})
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				statuses[i] = resp.StatusCode
				if loc := resp.Header.Get("Location"); resp.StatusCode == http.StatusSeeOther && (!strings.HasPrefix(loc, httpapi.PathApps+"?") || !strings.Contains(loc, "withdrawn=")) {
					t.Errorf("a withdrawal sent the browser to %q", loc)
				}
			})
		}
		wg.Wait()
		for i, st := range statuses {
			if st != http.StatusSeeOther {
				t.Fatalf("racing withdrawal %d answered %d, want 303", i, st)
			}
		}
		api := apiCall(t, http.DefaultClient, http.MethodGet, e.url("/v2/bank/accounts"), "Bearer "+aliceTok.AccessToken, nil)
		if api.status != http.StatusUnauthorized {
			t.Fatalf("the bank API answered %d to the withdrawn grant's token, want 401", api.status)
		}
		if st, got, _ := e.post(t, httpapi.PathIntrospect, url.Values{"token": {aliceTok.AccessToken}}, true, false); st != http.StatusOK || got["active"] != false {
			t.Fatalf("introspection of the withdrawn grant's token: %d %v", st, got)
		}
		if _, err := conf.TokenSource(ctx, &oauth2.Token{RefreshToken: aliceTok.RefreshToken}).Token(); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
			t.Fatalf("the withdrawn grant's refresh: %v, want invalid_grant", err)
		}
		if !e.tokenValid(bobTok.AccessToken) {
			t.Fatal("alice's withdrawal ended bob's token")
		}
		if !strings.Contains(e.logs.String(), `"reason":"customer"`) {
			t.Error("the withdrawal is not in the audit log with reason customer")
		}
		if ids := e.appsPage(t, alice); len(ids) != 0 {
			t.Fatalf("alice's page still lists %v after the withdrawal", ids)
		}
	})
}
