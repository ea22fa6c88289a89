package e2e

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/acmebank/authserver/shared/admin"
	"github.com/acmebank/authserver/shared/app"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
)

// ccVars let the bank API's accounts route take client-only tokens with the transfers scope;
// the invoices route asks for the same scope but takes users' tokens only.
var ccVars = map[string]string{
	config.EnvRouteScopes:       `{"GET /v2/bank/accounts":["bank:transfers:write"],"GET /invoicing/invoices":["bank:transfers:write"]}`,
	config.EnvClientTokenRoutes: "GET /v2/bank/accounts",
}

// ccClient registers a secret client for client_credentials with scopes, as authctl does.
func (e *env) ccClient(t *testing.T, scopes ...string) (id, secret string) {
	t.Helper()
	c, secret, err := admin.New(e.app.Store, cheapHasher, e.clock, e.app.Audit).CreateClient(context.Background(), admin.ClientSpec{
		Name: "Machine", RedirectURIs: []string{redirectURI}, Scopes: scopes,
		GrantTypes: []string{oauth.GrantTypeClientCredentials},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c.ID, secret
}

// ccConfig is golang.org/x/oauth2's client_credentials client for the env's token endpoint.
func (e *env) ccConfig(id, secret string, scopes ...string) *clientcredentials.Config {
	return &clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: e.url(httpapi.PathToken),
		Scopes: scopes, AuthStyle: oauth2.AuthStyleInHeader}
}

// retrieveError is the OAuth error code of a refused x/oauth2 token request ("" for none).
func retrieveError(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	return ""
}

// TestClientCredentials_StandardClientGetsAClientOnlyToken: golang.org/x/oauth2's
// clientcredentials client gets an access token for a client registered for the grant, with
// the scope asked for or, without one, the client's registered scopes that need no user: no
// refresh token, no id_token, no metadata. The token is accepted by the bank API only on a
// route of AUTH_CLIENT_TOKEN_ROUTES (the identity has the client and no uid), refused on
// other routes and at userinfo; introspection shows it without sub or metadata; revocation
// ends it. On both stores.
func TestClientCredentials_StandardClientGetsAClientOnlyToken(t *testing.T) {
	bothStores(t, ccVars, func(t *testing.T, e *env) {
		ctx := context.Background()
		e.mountAPI(t, app.APIOptions{})
		id, secret := e.ccClient(t, "openid", "bank:transfers:write")
		tok, err := e.ccConfig(id, secret, "bank:transfers:write").Token(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if tok.AccessToken == "" || tok.RefreshToken != "" || tok.Extra("id_token") != nil || tok.Extra("metadata") != nil ||
			tok.Extra("scope") != "bank:transfers:write" || !strings.EqualFold(tok.TokenType, "Bearer") {
			t.Fatalf("token response: access %t, refresh %q, id_token %v, metadata %v, scope %v, type %s",
				tok.AccessToken != "", tok.RefreshToken, tok.Extra("id_token"), tok.Extra("metadata"), tok.Extra("scope"), tok.TokenType)
		}
		def, err := e.ccConfig(id, secret).Token(ctx)
		if err != nil || def.Extra("scope") != "bank:transfers:write" {
			t.Fatalf("without a scope: %v, scope %v; want the registered scopes that need no user", err, def.Extra("scope"))
		}

		logs := e.logs.String()
		if n := strings.Count(logs, `"event":"client_credentials_issued"`); n != 2 {
			t.Errorf("%d client_credentials_issued audit records, want 2", n)
		}
		if strings.Contains(logs, tok.AccessToken) || strings.Contains(logs, secret) {
			t.Error("the logs hold the access token or the client secret")
		}

		// The authorizer function, as API Gateway calls it: its route (GET /v2/bank/accounts)
		// accepts the token; the same token is refused when no route accepts client-only tokens.
		az, err := e.app.Authorizer()
		if err != nil {
			t.Fatal(err)
		}
		ev, err := az.HandleEvent(ctx, authorizerEvent(t, "authorizer.json", tok.AccessToken))
		if err != nil || !ev.IsAuthorized || ev.Context["client_id"] != id || ev.Context["uid"] != "" {
			t.Errorf("authorizer function: %v %+v, want authorized with the client and no uid", err, ev)
		}
		az.ClientRoutes = nil
		if ev, err := az.HandleEvent(ctx, authorizerEvent(t, "authorizer.json", tok.AccessToken)); err != nil || ev.IsAuthorized {
			t.Errorf("authorizer function without client token routes: %v %+v, want refused", err, ev)
		}

		r := apiCall(t, http.DefaultClient, http.MethodGet, e.url("/v2/bank/accounts"), "Bearer "+tok.AccessToken, nil)
		if r.status != http.StatusOK || r.json["client_id"] != id || r.json["uid"] != "" || r.json["companyProfileId"] != "" {
			t.Errorf("allowed route: %d %s, want 200 with the client and no uid", r.status, r.raw)
		}
		r = apiCall(t, http.DefaultClient, http.MethodGet, e.url("/invoicing/invoices"), "Bearer "+tok.AccessToken, nil)
		if r.status != http.StatusForbidden || !strings.Contains(r.header.Get("WWW-Authenticate"), `error="insufficient_scope"`) {
			t.Errorf("route without client-only tokens: %d %q, want 403 insufficient_scope", r.status, r.header.Get("WWW-Authenticate"))
		}
		r = apiCall(t, http.DefaultClient, http.MethodGet, e.url(httpapi.PathUserinfo), "Bearer "+tok.AccessToken, nil)
		if r.status != http.StatusForbidden {
			t.Errorf("userinfo with a client-only token: %d %s, want 403", r.status, r.raw)
		}

		in := e.apiIntrospect(t, http.DefaultClient, e.srv.URL, id, secret, tok.AccessToken)
		if in.json["active"] != true || in.json["client_id"] != id || in.json["scope"] != "bank:transfers:write" {
			t.Errorf("introspection: %s", in.raw)
		}
		if _, ok := in.json["sub"]; ok {
			t.Errorf("introspection names a sub for a token without a user: %s", in.raw)
		}
		if _, ok := in.json["metadata"]; ok {
			t.Errorf("introspection has user metadata for a token without a user: %s", in.raw)
		}

		grants, err := e.app.Store.ListGrants(ctx, oauth.GrantFilter{ClientID: id}, e.clock.Now())
		if err != nil || len(grants) != 2 || !grants[0].Grant.ClientOnly || grants[0].Grant.UID != "" {
			t.Fatalf("the client's grants: %v %+v, want its two client-only grants", err, grants)
		}
		users, err := e.app.Store.ListGrants(ctx, oauth.GrantFilter{UID: e.uidOf(t, username)}, e.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range users {
			if g.Grant.ClientID == id {
				t.Errorf("a user's grants list the client-only grant %s", g.Grant.ID)
			}
		}

		rv := apiCall(t, http.DefaultClient, http.MethodPost, e.url(httpapi.PathRevoke), "",
			url.Values{"token": {tok.AccessToken}, "client_id": {id}, "client_secret": {secret}})
		if rv.status != http.StatusOK {
			t.Fatalf("revocation: %d %s", rv.status, rv.raw)
		}
		if in := e.apiIntrospect(t, http.DefaultClient, e.srv.URL, id, secret, tok.AccessToken); in.json["active"] != false {
			t.Errorf("introspection after revocation: %s", in.raw)
		}
		if r := apiCall(t, http.DefaultClient, http.MethodGet, e.url("/v2/bank/accounts"), "Bearer "+tok.AccessToken, nil); r.status != http.StatusUnauthorized {
			t.Errorf("revoked token at the bank API: %d, want 401", r.status)
		}
		if r := apiCall(t, http.DefaultClient, http.MethodGet, e.url("/v2/bank/accounts"), "Bearer "+def.AccessToken, nil); r.status != http.StatusOK {
			t.Errorf("revoking one token ended another grant's: %d", r.status)
		}
	})
}

// TestClientCredentials_RefusedRequestsWriteNothing: a client not registered for the grant
// gets unauthorized_client, openid (or another scope that needs a user) invalid_scope, a scope
// beyond the client's invalid_scope, a client with no scope a token without a user may carry
// invalid_scope without a scope parameter, and authorization_details
// invalid_authorization_details; each refusal writes nothing. On both stores.
func TestClientCredentials_RefusedRequestsWriteNothing(t *testing.T) {
	bothStores(t, ccVars, func(t *testing.T, e *env) {
		ctx := context.Background()
		id, secret := e.ccClient(t, "openid", "email", "bank:transfers:write")
		userOnly, userOnlySecret := e.ccClient(t, "openid")
		tests := []struct {
			name, code string
			conf       *clientcredentials.Config
		}{
			{"client not registered for the grant", "unauthorized_client", e.ccConfig(clientID, clientSecret, "bank:transfers:write")},
			{"openid", "invalid_scope", e.ccConfig(id, secret, "openid")},
			{"openid beside a client scope", "invalid_scope", e.ccConfig(id, secret, "bank:transfers:write", "openid")},
			{"a claims scope", "invalid_scope", e.ccConfig(id, secret, "email")},
			{"offline_access", "invalid_scope", e.ccConfig(id, secret, "offline_access")},
			{"a scope beyond the client's", "invalid_scope", e.ccConfig(userOnly, userOnlySecret, "bank:transfers:write")},
			{"an unknown scope", "invalid_scope", e.ccConfig(id, secret, "accounts:read")},
			{"no scope and none the client may carry without a user", "invalid_scope", e.ccConfig(userOnly, userOnlySecret)},
		}
		details := e.ccConfig(id, secret, "bank:transfers:write")
		details.EndpointParams = url.Values{"authorization_details": {"[" + rarAccounts + "]"}}
		tests = append(tests, struct {
			name, code string
			conf       *clientcredentials.Config
		}{"authorization_details", "invalid_authorization_details", details})
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				before := e.writes.count()
				tok, err := tc.conf.Token(ctx)
				if got := retrieveError(err); got != tc.code {
					t.Fatalf("got %v (%v), want %s", got, tok, tc.code)
				}
				if n := e.writes.count(); n != before {
					t.Errorf("the refused request wrote %v", e.writes.list()[before:])
				}
			})
		}
		if list, err := e.app.Store.ListGrants(ctx, oauth.GrantFilter{ClientID: id}, e.clock.Now()); err != nil || len(list) != 0 {
			t.Errorf("grants after refused requests: %v %v", list, err)
		}
	})
}

// TestClientCredentials_OneAssertionAmongFiftyRacingRequestsGetsOneToken: 50 client_credentials
// requests sent at once with one private_key_jwt client assertion: the grant spends nothing,
// so the assertion's jti, recorded in the issuance's write, is what stops the replays: exactly
// one request gets a token, the others invalid_client, and one grant is stored. On both stores.
func TestClientCredentials_OneAssertionAmongFiftyRacingRequestsGetsOneToken(t *testing.T) {
	const racers = 50
	bothStores(t, nil, func(t *testing.T, e *env) {
		k := e.registerKeyedClient(t, admin.ClientSpec{GrantTypes: []string{oauth.GrantTypeClientCredentials}})
		if _, err := admin.New(e.app.Store, cheapHasher, e.clock, e.app.Audit).UpdateClient(context.Background(), k.id,
			admin.ClientChanges{AddScopes: []string{"bank:transfers:write"}}); err != nil {
			t.Fatal(err)
		}
		params := url.Values{"grant_type": {"client_credentials"}, "scope": {"bank:transfers:write"}}
		for key, v := range k.assertionParams(t, e) {
			params[key] = v
		}
		body := params.Encode()
		statuses, codes := make([]int, racers), make([]string, racers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range racers {
			wg.Go(func() {
				<-start
				req, _ := http.NewRequest(http.MethodPost, e.url(httpapi.PathToken), strings.NewReader(body))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					codes[i] = err.Error()
					return
				}
				defer resp.Body.Close()
				statuses[i] = resp.StatusCode
				if resp.StatusCode != http.StatusOK {
					b, _ := io.ReadAll(resp.Body)
					codes[i] = string(b)
				}
			})
		}
		close(start)
		wg.Wait()
		ok := 0
		for i, st := range statuses {
			switch {
			case st == http.StatusOK:
				ok++
			case st != http.StatusUnauthorized || !strings.Contains(codes[i], "invalid_client"):
				t.Errorf("request %d: %d %s, want 200 once and 401 invalid_client otherwise", i, st, codes[i])
			}
		}
		if ok != 1 {
			t.Errorf("%d requests got a token with one assertion, want exactly 1", ok)
		}
		list, err := e.app.Store.ListGrants(context.Background(), oauth.GrantFilter{ClientID: k.id}, e.clock.Now())
		if err != nil || len(list) != 1 {
			t.Errorf("grants stored: %d (%v), want 1", len(list), err)
		}
	})
}

// TestClientCredentials_ClientOnlyForItCannotStartAnAuthorization: a client registered for
// client_credentials only is refused at the authorization endpoint (unauthorized_client,
// redirected to its registered URI), and nothing is stored.
func TestClientCredentials_ClientOnlyForItCannotStartAnAuthorization(t *testing.T) {
	e := newEnv(t)
	id, _ := e.ccClient(t, "openid", "bank:transfers:write")
	q := url.Values{"client_id": {id}, "redirect_uri": {redirectURI}, "response_type": {"code"}, "scope": {"openid"},
		"state": {"st"}, "code_challenge": {oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())}, "code_challenge_method": {"S256"}}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	before := e.writes.count()
	resp, err := noRedirect.Get(e.url(httpapi.PathAuthorize) + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode/100 != 3 || loc == nil || loc.Query().Get("error") != "unauthorized_client" {
		t.Fatalf("%d %s, want a redirect with error=unauthorized_client", resp.StatusCode, resp.Header.Get("Location"))
	}
	if n := e.writes.count(); n != before {
		t.Errorf("the refused request wrote %v", e.writes.list()[before:])
	}
}
