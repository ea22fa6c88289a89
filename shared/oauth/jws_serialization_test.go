package oauth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/acmebank/authserver/shared/oauth"
)

// jsonSerialized signs claims with key as a JWS in the JSON serialization (RFC 7515 7.2), the
// protected header holding alg, typ when not empty, kid when not empty, and the public key
// when embed.
func jsonSerialized(t *testing.T, alg jose.SignatureAlgorithm, key any, kid, typ string, embed bool, claims map[string]any) string {
	t.Helper()
	opts := &jose.SignerOptions{EmbedJWK: embed}
	if typ != "" {
		opts = opts.WithType(jose.ContentType(typ))
	}
	var k any = key
	if kid != "" {
		k = jose.JSONWebKey{Key: key, KeyID: kid}
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: k}, opts)
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	return jws.FullSerialize()
}

// TestCheckDPoP_ProofInJSONSerializationIsRefused: a DPoP proof is a JWT (RFC 9449 4.2), so a
// proof sent as a JWS in the JSON serialization, however well signed, is invalid_dpop_proof
// and its jti is not recorded: the same proof made compact is accepted afterwards.
func TestCheckDPoP_ProofInJSONSerializationIsRefused(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := dpopService(t, now)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	claims := map[string]any{"jti": "j-json", "htm": "POST", "htu": tokenURL, "iat": now.Unix()}
	req := oauth.DPoPRequest{Method: "POST", URLs: []string{tokenURL}}
	req.Proof = jsonSerialized(t, jose.ES256, key, "", "dpop+jwt", true, claims)
	if _, err := s.CheckDPoP(context.Background(), req); oauth.AsError(err).Code != oauth.ErrCodeInvalidDPoPProof {
		t.Fatalf("a proof in the JSON serialization: %v, want invalid_dpop_proof", err)
	}
	req.Proof = signProof(t, jose.ES256, key, claims)
	if _, err := s.CheckDPoP(context.Background(), req); err != nil {
		t.Fatalf("the same proof, compact, after the refusal: %v", err)
	}
}

// TestPrivateKeyJWT_AssertionInJSONSerializationIsRefused: a client assertion is a JWT (RFC
// 7523 2.2), so one sent as a JWS in the JSON serialization is invalid_client, while the
// adapter still reads the client it names; nothing is recorded, and the same claims made
// compact authenticate afterwards.
func TestPrivateKeyJWT_AssertionInJSONSerializationIsRefused(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	k := newClientKey(t, "k1", jose.ES256)
	s := pkjwtService(t, oauth.Client{ID: "tpp", TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT, JWKS: jwksOf(t, k)}, now)
	claims := assertionClaims("tpp", now)
	a := jsonSerialized(t, k.alg, k.key, k.kid, "", false, claims)
	if err := authenticate(s, "tpp", a); oauth.AsError(err).Code != oauth.ErrCodeInvalidClient {
		t.Fatalf("an assertion in the JSON serialization: %v, want invalid_client", err)
	}
	if err := authenticate(s, "tpp", k.sign(t, claims)); err != nil {
		t.Fatalf("the same claims, compact, after the refusal: %v", err)
	}
}

// TestAssertionClientID_ReadsTheClientTheAssertionNames: the adapter learns whose keys to
// verify an assertion with from its payload alone (sub, else iss); anything it cannot read
// names no client.
func TestAssertionClientID_ReadsTheClientTheAssertionNames(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	k := newClientKey(t, "k1", jose.ES256)
	issOnly := assertionClaims("tpp", now)
	delete(issOnly, "sub")
	for name, tc := range map[string]struct{ assertion, want string }{
		"sub":                   {k.sign(t, assertionClaims("tpp", now)), "tpp"},
		"iss without a sub":     {k.sign(t, issOnly), "tpp"},
		"two segments":          {"eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ0cHAifQ", ""},
		"payload not base64url": {"eyJhbGciOiJFUzI1NiJ9.{\"sub\":\"tpp\"}.c2ln", ""},
		"payload not JSON":      {"eyJhbGciOiJFUzI1NiJ9.bm90IGpzb24.c2ln", ""},
		"empty":                 {"", ""},
		"too long":              {k.sign(t, map[string]any{"sub": "tpp", "pad": string(make([]byte, 9<<10))}), ""},
	} {
		if got := oauth.AssertionClientID(tc.assertion); got != tc.want {
			t.Errorf("%s: AssertionClientID = %q, want %q", name, got, tc.want)
		}
	}
}
