package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
)

// fapiMTLSClient is a FAPI 2.0 client that authenticates with its certificate
// (tls_client_auth) and so gets certificate-bound tokens, with id_tokens signed alg.
func (m *mtlsEnv) fapiMTLSClient(t *testing.T, id, alg string) oauth.Client {
	t.Helper()
	now := time.Now()
	c := oauth.Client{
		ID: id, Name: "FAPI " + alg, RedirectURIs: []string{redirectURI}, Scopes: []string{"openid", "email"},
		CertSubjectDN: m.certA.leaf.Subject.String(), RequirePKCE: true, RequirePAR: true,
		IDTokenSignedResponseAlg: alg, Profile: oauth.ProfileFAPI2, CreatedAt: now, UpdatedAt: now,
	}
	if err := c.CheckProfile(); err != nil {
		t.Fatalf("the test's FAPI client does not meet the profile: %v", err)
	}
	if err := m.app.Store.CreateClient(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return c
}

// fapiConfig is golang.org/x/oauth2's view of a FAPI client: the authorization endpoint on
// the plain host (the browser's), the token endpoint on the mutual-TLS host, no secret.
func (m *mtlsEnv) fapiConfig(c oauth.Client) *oauth2.Config {
	return &oauth2.Config{
		ClientID: c.ID, RedirectURL: redirectURI, Scopes: []string{oidc.ScopeOpenID, "email"},
		Endpoint: oauth2.Endpoint{AuthURL: m.url(httpapi.PathAuthorize), TokenURL: m.tlsSrv.URL + httpapi.PathToken, AuthStyle: oauth2.AuthStyleInParams},
	}
}

// fapiAuthorize runs an authorization request as a FAPI 2.0 client must: it pushes the
// parameters of authURL (what x/oauth2's AuthCodeURL built) to the PAR endpoint over mutual
// TLS with its certificate (tls_client_auth), then sends the user to authorize with client_id
// and request_uri only.
func (m *mtlsEnv) fapiAuthorize(t *testing.T, authURL string) *url.URL {
	t.Helper()
	u, err := url.Parse(authURL)
	if err != nil {
		t.Fatal(err)
	}
	params := u.Query()
	r := apiCall(t, m.client(&m.certA), http.MethodPost, m.tlsSrv.URL+httpapi.PathPAR, "", params)
	uri, _ := r.json["request_uri"].(string)
	if r.status != http.StatusCreated || uri == "" {
		t.Fatalf("PAR over mutual TLS: %d %s", r.status, r.raw)
	}
	return m.authorize(t, m.url(httpapi.PathAuthorize)+"?"+url.Values{"client_id": {params.Get("client_id")}, "request_uri": {uri}}.Encode())
}

// TestFAPI_MTLSClientsGetBoundTokensAndPSOrESIDTokens: FAPI 2.0 clients registered for mutual
// TLS push their requests (PAR) and run the flow with golang.org/x/oauth2 (PKCE S256, the
// certificate as their credential)
// and go-oidc verifies their PS256 and ES256 id_tokens against the JWKS; the tokens are bound
// to the certificate, refresh keeps the binding and the refresh token, and a code lives at most 60 seconds.
func TestFAPI_MTLSClientsGetBoundTokensAndPSOrESIDTokens(t *testing.T) {
	m := newMTLSEnv(t)
	provider, err := oidc.NewProvider(context.Background(), m.app.Config.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	for _, alg := range []string{"PS256", "ES256"} {
		t.Run(alg, func(t *testing.T) {
			c := m.fapiMTLSClient(t, "fapi-mtls-"+strings.ToLower(alg), alg)
			conf := m.fapiConfig(c)
			ctx := context.WithValue(context.Background(), oauth2.HTTPClient, m.client(&m.certA))
			verifier, nonce := oauth2.GenerateVerifier(), "n-"+randomVerifier()[:12]
			loc := m.fapiAuthorize(t, conf.AuthCodeURL("st-fapi", oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce),
				oauth2.SetAuthURLParam("redirect_uri", redirectURI)))
			if loc.Query().Get("iss") != m.app.Config.Issuer {
				t.Fatalf("no iss in the authorization response: %s", loc.Redacted())
			}
			tok, err := conf.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier))
			if err != nil {
				t.Fatalf("exchange over mutual TLS: %v", err)
			}
			raw, _ := tok.Extra("id_token").(string)
			idt, err := provider.Verifier(&oidc.Config{ClientID: c.ID, SupportedSigningAlgs: []string{alg}}).Verify(ctx, raw)
			if err != nil {
				t.Fatalf("go-oidc refused the %s id_token: %v", alg, err)
			}
			if idt.Nonce != nonce {
				t.Fatalf("nonce %q, want %q", idt.Nonce, nonce)
			}
			if h := jwsHeader(t, raw); h["alg"] != alg {
				t.Fatalf("id_token alg %v, want %s", h["alg"], alg)
			}
			ri := m.apiIntrospect(t, m.client(&m.certA), m.tlsSrv.URL, c.ID, "", tok.AccessToken)
			if cnf, _ := ri.json["cnf"].(map[string]any); ri.json["active"] != true || cnf["x5t#S256"] != m.certA.thumb {
				t.Fatalf("the access token is not bound to the certificate: %s", ri.raw)
			}

			tok.Expiry = time.Now().Add(-time.Minute) // make x/oauth2 refresh
			next, err := conf.TokenSource(ctx, tok).Token()
			// FAPI 2.0 5.3.2.1: the refresh token is not rotated.
			if err != nil || next.RefreshToken != tok.RefreshToken || next.AccessToken == tok.AccessToken {
				t.Fatalf("refresh over mutual TLS: %v (kept: %v)", err, next != nil && next.RefreshToken == tok.RefreshToken)
			}
			if st := apiCall(t, m.client(&m.certB), http.MethodGet, m.tlsSrv.URL+httpapi.PathUserinfo, "Bearer "+next.AccessToken, nil).status; st != http.StatusUnauthorized {
				t.Errorf("the refreshed token with another certificate: %d", st)
			}

			// A code of this client lives 60 s whatever AUTH_CODE_TTL says (FAPI 2.0 5.3.2.1).
			if m.app.Service.Lifetimes.Code <= oauth.FAPI2CodeLifetime {
				t.Fatalf("the server's code lifetime %v does not exceed 60 s: the cap is not tested", m.app.Service.Lifetimes.Code)
			}
			verifier = oauth2.GenerateVerifier()
			loc = m.fapiAuthorize(t, conf.AuthCodeURL("st-late", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("redirect_uri", redirectURI)))
			m.clock.Advance(oauth.FAPI2CodeLifetime + time.Second)
			_, err = conf.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier))
			var re *oauth2.RetrieveError
			if !errors.As(err, &re) || re.ErrorCode != "invalid_grant" {
				t.Fatalf("a code 61 s old: %v, want invalid_grant", err)
			}
		})
	}
}

// TestFAPI_RefusesASecretAndAMissingCertificate: a FAPI client presenting a secret, or no
// certificate, is invalid_client, and its code is still usable afterwards (nothing spent).
func TestFAPI_RefusesASecretAndAMissingCertificate(t *testing.T) {
	m := newMTLSEnv(t)
	c := m.fapiMTLSClient(t, "fapi-mtls", "PS256")
	verifier := oauth2.GenerateVerifier()
	loc := m.fapiAuthorize(t, m.fapiConfig(c).AuthCodeURL("st", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("redirect_uri", redirectURI)))
	form := url.Values{"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")}, "redirect_uri": {redirectURI},
		"code_verifier": {verifier}, "client_id": {c.ID}}
	secret := url.Values{"client_secret": {"a-guessed-secret-0123456789abcdef-0123"}}
	for name, tc := range map[string]struct {
		client *http.Client
		extra  url.Values
	}{"a secret with the certificate": {m.client(&m.certA), secret}, "no certificate": {m.client(nil), nil}} {
		f := url.Values{}
		for k, v := range form {
			f[k] = v
		}
		for k, v := range tc.extra {
			f[k] = v
		}
		if r := apiCall(t, tc.client, http.MethodPost, m.tlsSrv.URL+httpapi.PathToken, "", f); r.status != http.StatusUnauthorized || r.json["error"] != "invalid_client" {
			t.Errorf("%s: %d %s, want 401 invalid_client", name, r.status, r.raw)
		}
	}
	if r := apiCall(t, m.client(&m.certA), http.MethodPost, m.tlsSrv.URL+httpapi.PathToken, "", form); r.status != http.StatusOK {
		t.Fatalf("the code after the refusals: %d %s", r.status, r.raw)
	}
}

// jwsHeader decodes a compact JWS's protected header.
func jwsHeader(t *testing.T, jws string) map[string]any {
	t.Helper()
	part, _, _ := strings.Cut(jws, ".")
	b, err := base64.RawURLEncoding.DecodeString(part)
	var h map[string]any
	if err != nil || json.Unmarshal(b, &h) != nil {
		t.Fatalf("malformed JWS header %q", part)
	}
	return h
}
