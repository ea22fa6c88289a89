package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"

	"github.com/acmebank/authserver/shared/admin"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
)

// keyedClient is a client registered for private_key_jwt through the admin service, as
// authctl registers it, with its ES256 key.
type keyedClient struct {
	id  string
	key *ecdsa.PrivateKey
}

func (e *env) registerKeyedClient(t *testing.T, spec admin.ClientSpec) keyedClient {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Use: "sig", Algorithm: "ES256"}}})
	spec.Name, spec.RedirectURIs, spec.Scopes = "Keyed App", []string{redirectURI}, []string{"openid", "email"}
	spec.TokenEndpointAuthMethod, spec.JWKS = oauth.AuthMethodPrivateKeyJWT, jwks
	c, secret, err := admin.New(e.app.Store, cheapHasher, e.clock, e.app.Audit).CreateClient(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if secret != "" || len(c.SecretHashes) != 0 {
		t.Fatal("a private_key_jwt client was given a secret")
	}
	return keyedClient{id: c.ID, key: key}
}

// assertion is a client assertion for the issuer (RFC 7523 3), ES256, with a new jti.
func (k keyedClient) assertion(t *testing.T, e *env) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: k.key, KeyID: "k1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := e.clock.Now()
	payload, _ := json.Marshal(map[string]any{"iss": k.id, "sub": k.id, "aud": e.app.Config.Issuer, "jti": oauth.NewID("j_"),
		"iat": now.Unix(), "exp": now.Add(time.Minute).Unix()})
	jws, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := jws.CompactSerialize()
	return out
}

// assertionParams are the client authentication parameters of private_key_jwt.
func (k keyedClient) assertionParams(t *testing.T, e *env) url.Values {
	return url.Values{"client_assertion_type": {oauth.AssertionTypeJWTBearer}, "client_assertion": {k.assertion(t, e)}}
}

// TestPrivateKeyJWT_PushedRequestAndExchangeWithStandardClients: a client registered with
// its public key and no secret pushes its request with a client assertion, the user signs in,
// and golang.org/x/oauth2 exchanges the code with another assertion (no secret anywhere);
// go-oidc verifies the id_token. A replayed assertion, a secret, or an assertion signed by
// another key is invalid_client, and the refused requests leave the code usable. On both stores.
func TestPrivateKeyJWT_PushedRequestAndExchangeWithStandardClients(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		k := e.registerKeyedClient(t, admin.ClientSpec{RequirePKCE: true})
		verifier := oauth2.GenerateVerifier()
		push := pushedParams(oauth2.S256ChallengeFromVerifier(verifier))
		for key, v := range k.assertionParams(t, e) {
			push[key] = v
		}
		req, _ := http.NewRequest(http.MethodPost, e.url(httpapi.PathPAR), strings.NewReader(push.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		st, body, _ := do(t, req)
		uri, _ := body["request_uri"].(string)
		if st != http.StatusCreated || uri == "" {
			t.Fatalf("PAR with private_key_jwt: %d %v", st, body)
		}
		loc := e.authorize(t, e.url(httpapi.PathAuthorize)+"?"+url.Values{"client_id": {k.id}, "request_uri": {uri}}.Encode())
		code := loc.Query().Get("code")

		token := func(params url.Values) (int, map[string]any) {
			p := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI}, "code_verifier": {verifier}}
			for key, v := range params {
				p[key] = v
			}
			req, _ := http.NewRequest(http.MethodPost, e.url(httpapi.PathToken), strings.NewReader(p.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			st, body, _ := do(t, req)
			return st, body
		}
		stranger := keyedClient{id: k.id}
		stranger.key, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		used := k.assertionParams(t, e)
		if st, _ := token(url.Values{"client_id": {"nobody"}, "client_secret": {"x"}}); st != http.StatusUnauthorized {
			t.Fatalf("unknown client: %d", st)
		}
		for name, params := range map[string]url.Values{
			"a secret":             {"client_id": {k.id}, "client_secret": {"guess-0123456789abcdef0123456789abcdef"}},
			"another key":          stranger.assertionParams(t, e),
			"no assertion type":    {"client_assertion": {k.assertion(t, e)}},
			"a replayed assertion": used,
			"client_id of another": {"client_id": {clientID}, "client_assertion_type": {oauth.AssertionTypeJWTBearer}, "client_assertion": {k.assertion(t, e)}},
		} {
			if name == "a replayed assertion" {
				// Used once by an accepted push (a token request refused for its grant_type
				// records nothing: a token request's jti is recorded with its grant's write).
				p := pushedParams(oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier()))
				for key, v := range used {
					p[key] = v
				}
				req, _ := http.NewRequest(http.MethodPost, e.url(httpapi.PathPAR), strings.NewReader(p.Encode()))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				if st, body, _ := do(t, req); st != http.StatusCreated {
					t.Fatalf("the first use of the assertion: %d %v", st, body)
				}
			}
			if st, body := token(params); st != http.StatusUnauthorized || body["error"] != "invalid_client" {
				t.Errorf("%s: %d %v, want 401 invalid_client", name, st, body)
			}
		}

		conf := &oauth2.Config{ClientID: k.id, RedirectURL: redirectURI, Scopes: []string{oidc.ScopeOpenID, "email"},
			Endpoint: oauth2.Endpoint{AuthURL: e.url(httpapi.PathAuthorize), TokenURL: e.url(httpapi.PathToken), AuthStyle: oauth2.AuthStyleInParams}}
		tok, err := conf.Exchange(context.Background(), code, oauth2.VerifierOption(verifier),
			oauth2.SetAuthURLParam("client_assertion_type", oauth.AssertionTypeJWTBearer), oauth2.SetAuthURLParam("client_assertion", k.assertion(t, e)))
		if err != nil {
			t.Fatalf("x/oauth2 exchange with private_key_jwt: %v", err)
		}
		raw, _ := tok.Extra("id_token").(string)
		p, err := oidc.NewProvider(context.Background(), e.app.Config.Issuer)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Verifier(&oidc.Config{ClientID: k.id, Now: e.clock.Now}).Verify(context.Background(), raw); err != nil {
			t.Fatalf("go-oidc: %v", err)
		}
		// Revocation authenticates the same way.
		rv := url.Values{"token": {tok.RefreshToken}}
		for key, v := range k.assertionParams(t, e) {
			rv[key] = v
		}
		req, _ = http.NewRequest(http.MethodPost, e.url(httpapi.PathRevoke), strings.NewReader(rv.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if st, _, _ := do(t, req); st != http.StatusOK || e.tokenValid(tok.AccessToken) {
			t.Fatalf("revocation with private_key_jwt: %d, access token still valid %v", st, e.tokenValid(tok.AccessToken))
		}
	})
}

// TestPrivateKeyJWT_RegistrationRefusesBadKeysAndWritesNothing: the admin service refuses a
// private_key_jwt client without keys, with a private key, or with a certificate too.
func TestPrivateKeyJWT_RegistrationRefusesBadKeysAndWritesNothing(t *testing.T) {
	e := newEnv(t)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	private, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key, KeyID: "k1"}}})
	public, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1"}}})
	before, _ := e.app.Store.ListClients(context.Background())
	for name, spec := range map[string]admin.ClientSpec{
		"no keys":             {TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT},
		"a private key":       {TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT, JWKS: private},
		"keys and a cert":     {TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT, JWKS: public, CertSubjectDN: "CN=x"},
		"keys without method": {JWKS: public},
		"an unknown method":   {TokenEndpointAuthMethod: "client_secret_jwt"},
	} {
		spec.Name, spec.RedirectURIs, spec.Scopes = "Bad", []string{redirectURI}, []string{"openid"}
		if _, _, err := admin.New(e.app.Store, cheapHasher, e.clock, e.app.Audit).CreateClient(context.Background(), spec); err == nil {
			t.Errorf("%s: registered", name)
		}
	}
	after, _ := e.app.Store.ListClients(context.Background())
	if len(after) != len(before) {
		t.Fatalf("refused registrations wrote %d clients", len(after)-len(before))
	}
}
