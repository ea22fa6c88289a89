package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/seed"
)

// registerAlgClient seeds a client whose id_tokens are signed with alg and returns its
// golang.org/x/oauth2 configuration.
func (e *env) registerAlgClient(t *testing.T, alg string) *oauth2.Config {
	t.Helper()
	id, secret := "client-"+strings.ToLower(alg), "secret-"+strings.ToLower(alg)+"-0123456789abcdef0123"
	f := &seed.File{Clients: []seed.Client{{ClientID: id, ClientSecret: secret, Name: alg + " App",
		RedirectURIs: []string{redirectURI}, Scopes: []string{"openid", "email"}, IDTokenSignedResponseAlg: alg}}}
	if err := f.CheckIDTokenAlgs(e.app.Config.IDTokenAlgs); err != nil {
		t.Fatal(err)
	}
	if _, err := seed.Load(context.Background(), e.app.Store, f, cheapHasher, time.Now()); err != nil {
		t.Fatal(err)
	}
	return &oauth2.Config{ClientID: id, ClientSecret: secret, RedirectURL: redirectURI, Scopes: []string{"openid", "email"},
		Endpoint: oauth2.Endpoint{AuthURL: e.url(httpapi.PathAuthorize), TokenURL: e.url(httpapi.PathToken)}}
}

// jwtHeader decodes the protected header of a compact JWS.
func jwtHeader(t *testing.T, raw string) map[string]any {
	t.Helper()
	seg, _, _ := strings.Cut(raw, ".")
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]any
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestFlow_PS256AndES256ClientsVerifyWithGoOIDC: a client registered for PS256 or ES256 gets
// id_tokens of that algorithm, signed by that algorithm's current key, which go-oidc verifies
// through discovery and the JWKS, allowing only that algorithm; the id_token of a refresh
// keeps the algorithm; a verifier that allows only RS256 refuses them.
func TestFlow_PS256AndES256ClientsVerifyWithGoOIDC(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	p, err := oidc.NewProvider(ctx, e.app.Config.Issuer)
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	var meta struct {
		Algs []string `json:"id_token_signing_alg_values_supported"`
	}
	if err := p.Claims(&meta); err != nil || strings.Join(meta.Algs, ",") != "RS256,PS256,ES256" {
		t.Fatalf("discovery lists %v (%v), want RS256,PS256,ES256", meta.Algs, err)
	}
	set, err := e.app.Store.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, alg := range []string{keys.PS256, keys.ES256} {
		t.Run(alg, func(t *testing.T) {
			conf := e.registerAlgClient(t, alg)
			verifier := p.Verifier(&oidc.Config{ClientID: conf.ClientID, SupportedSigningAlgs: []string{alg}})
			pkce := oauth2.GenerateVerifier()
			loc := e.authorize(t, conf.AuthCodeURL("st", oauth2.S256ChallengeOption(pkce), oidc.Nonce("n-"+alg)))
			tok, err := conf.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(pkce))
			if err != nil {
				t.Fatalf("exchange: %v", err)
			}
			raw, _ := tok.Extra("id_token").(string)
			idt, err := verifier.Verify(ctx, raw)
			if err != nil {
				t.Fatalf("go-oidc refuses the %s id_token: %v", alg, err)
			}
			if idt.Nonce != "n-"+alg || idt.Subject != "uid-alice" || idt.Audience[0] != conf.ClientID {
				t.Fatalf("nonce %q sub %q aud %v", idt.Nonce, idt.Subject, idt.Audience)
			}
			if err := idt.VerifyAccessToken(tok.AccessToken); err != nil {
				t.Fatalf("at_hash: %v", err)
			}
			cur, _ := set.Current(alg)
			if h := jwtHeader(t, raw); h["alg"] != alg || h["kid"] != cur.Kid {
				t.Fatalf("header %v, want alg %s kid %s (the current %s key)", h, alg, cur.Kid, alg)
			}
			rsOnly := p.Verifier(&oidc.Config{ClientID: conf.ClientID, SupportedSigningAlgs: []string{keys.RS256}})
			if _, err := rsOnly.Verify(ctx, raw); err == nil {
				t.Fatalf("a verifier allowing only RS256 accepted a %s id_token", alg)
			}

			refreshed, err := conf.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
			if err != nil {
				t.Fatalf("refresh: %v", err)
			}
			raw2, _ := refreshed.Extra("id_token").(string)
			if _, err := verifier.Verify(ctx, raw2); err != nil || jwtHeader(t, raw2)["alg"] != alg {
				t.Fatalf("refreshed id_token: alg %v, %v", jwtHeader(t, raw2)["alg"], err)
			}
		})
	}
}

// TestJWKS_RegistryRecordsWithoutAlgStillVerify: a registry written before keys had an
// algorithm (RS256 records without alg) is published with alg RS256, and an RS256 client's
// id_token verifies with go-oidc through that JWKS.
func TestJWKS_RegistryRecordsWithoutAlgStillVerify(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var old []string
	if err := e.app.Store.UpdateKeys(ctx, func(s oauth.KeySet) (oauth.KeySet, error) {
		for i, k := range s.Keys {
			if k.Algorithm() == keys.RS256 {
				s.Keys[i].Alg = ""
				old = append(old, k.Kid)
			}
		}
		return s, nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(old) != 2 {
		t.Fatalf("%d RS256 records, want a current and a next", len(old))
	}
	resp, err := e.srv.Client().Get(e.url(httpapi.PathJWKS))
	if err != nil {
		t.Fatal(err)
	}
	var jwks struct {
		Keys []map[string]string `json:"keys"`
	}
	err = json.NewDecoder(resp.Body).Decode(&jwks)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	published := map[string]map[string]string{}
	for _, k := range jwks.Keys {
		published[k["kid"]] = k
	}
	for _, kid := range old {
		if k := published[kid]; k["alg"] != "RS256" || k["kty"] != "RSA" || k["n"] == "" {
			t.Fatalf("old record %s published as %v, want an RS256 RSA key", kid, k)
		}
	}
	verifier := e.verifier(t)
	code := e.code(t, nil)
	st, body := e.exchange(t, code, nil)
	if st != 200 {
		t.Fatalf("exchange %d %v", st, body)
	}
	raw, _ := body["id_token"].(string)
	if _, err := verifier.Verify(ctx, raw); err != nil {
		t.Fatalf("go-oidc refuses an id_token of an old RS256 record: %v", err)
	}
	if h := jwtHeader(t, raw); h["alg"] != "RS256" || h["kid"] != old[0] && h["kid"] != old[1] {
		t.Fatalf("header %v, want RS256 with an old record's kid %v", h, old)
	}
}
