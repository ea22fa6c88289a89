package oauth_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/acmebank/authserver/shared/oauth"
)

const testIssuer = "https://auth.bank.example/v2/authentication/oauth2"

// clientKey is one of a private_key_jwt client's keys.
type clientKey struct {
	kid string
	alg jose.SignatureAlgorithm
	key crypto.Signer
}

func newClientKey(tb testing.TB, kid string, alg jose.SignatureAlgorithm) clientKey {
	tb.Helper()
	var k crypto.Signer
	var err error
	if alg == jose.ES256 {
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	} else {
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return clientKey{kid: kid, alg: alg, key: k}
}

func jwksOf(tb testing.TB, keys ...clientKey) json.RawMessage {
	tb.Helper()
	var set jose.JSONWebKeySet
	for _, k := range keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.key.Public(), KeyID: k.kid, Use: "sig", Algorithm: string(k.alg)})
	}
	b, err := json.Marshal(set)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// sign makes a client assertion with k and claims, kid in the header.
func (k clientKey) sign(tb testing.TB, claims map[string]any) string {
	tb.Helper()
	return k.signJWS(tb, "", claims)
}

// signJWS signs claims with k as a compact JWS, kid in the header, and typ unless it is "".
func (k clientKey) signJWS(tb testing.TB, typ string, claims map[string]any) string {
	tb.Helper()
	opts := &jose.SignerOptions{}
	if typ != "" {
		opts = opts.WithType(jose.ContentType(typ))
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: jose.JSONWebKey{Key: k.key, KeyID: k.kid}}, opts)
	if err != nil {
		tb.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := s.Sign(payload)
	if err != nil {
		tb.Fatal(err)
	}
	out, _ := jws.CompactSerialize()
	return out
}

func assertionClaims(clientID string, now time.Time) map[string]any {
	return map[string]any{"iss": clientID, "sub": clientID, "aud": testIssuer, "jti": oauth.NewID("j_"),
		"iat": now.Unix(), "exp": now.Add(time.Minute).Unix()}
}

// pkjwtService is a Service with one private_key_jwt client and a real replay store.
func pkjwtService(tb testing.TB, c oauth.Client, now time.Time) *oauth.Service {
	tb.Helper()
	s := dpopService(tb, now)
	c.CreatedAt, c.UpdatedAt = now, now
	if err := s.Clients.CreateClient(context.Background(), c); err != nil {
		tb.Fatal(err)
	}
	s.Issuer = testIssuer
	s.Origins = []string{"https://auth.bank.example", "https://connect.bank.example"}
	return s
}

// withNewJTI gives claims a jti of their own.
func withNewJTI(claims map[string]any) map[string]any {
	claims["jti"] = oauth.NewID("j_")
	return claims
}

func authenticate(s *oauth.Service, id, assertion string) error {
	_, err := s.AuthenticateClient(context.Background(), oauth.ClientCredentials{ID: id, Assertion: assertion, AssertionType: oauth.AssertionTypeJWTBearer})
	return err
}

// TestPrivateKeyJWT_AcceptsAGoodAssertionAndRefusesEveryFlaw: an assertion signed by a
// registered key with iss = sub = client_id, aud the issuer or an endpoint, a near exp and a
// new jti authenticates; each flaw is invalid_client and records nothing, so the good
// assertion sent after the flawed ones (same jti) still works.
func TestPrivateKeyJWT_AcceptsAGoodAssertionAndRefusesEveryFlaw(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	es, ps := newClientKey(t, "es-1", jose.ES256), newClientKey(t, "ps-1", jose.PS256)
	stranger := newClientKey(t, "es-1", jose.ES256) // same kid, another key
	c := oauth.Client{ID: "tpp", TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT, JWKS: jwksOf(t, es, ps)}
	s := pkjwtService(t, c, now)
	good := assertionClaims("tpp", now)
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for x, y := range good {
			m[x] = y
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for name, a := range map[string]string{
		"another key with the registered kid": stranger.sign(t, good),
		"iss another client":                  es.sign(t, with("iss", "other")),
		"sub another client":                  es.sign(t, with("sub", "other")),
		"aud another server":                  es.sign(t, with("aud", "https://evil.example/token")),
		"aud missing":                         es.sign(t, with("aud", nil)),
		"exp missing":                         es.sign(t, with("exp", nil)),
		"expired":                             es.sign(t, with("exp", now.Add(-time.Minute).Unix())),
		"exp an hour away":                    es.sign(t, with("exp", now.Add(time.Hour).Unix())),
		"nbf in the future":                   es.sign(t, with("nbf", now.Add(time.Minute).Unix())),
		"jti missing":                         es.sign(t, with("jti", nil)),
		"not a JWS":                           "a.b.c",
	} {
		if err := authenticate(s, "tpp", a); oauth.AsError(err).Code != oauth.ErrCodeInvalidClient {
			t.Errorf("%s: %v, want invalid_client", name, err)
		}
	}
	for _, aud := range []any{testIssuer, testIssuer + "/token", "https://connect.bank.example/v2/authentication/oauth2/par", []string{"x", testIssuer}} {
		if err := authenticate(s, "tpp", ps.sign(t, withNewJTI(with("aud", aud)))); err != nil {
			t.Errorf("aud %v: %v", aud, err)
		}
	}
	if err := authenticate(s, "tpp", es.sign(t, good)); err != nil {
		t.Fatalf("the good assertion after the flawed ones with its jti: %v", err)
	}
	if err := authenticate(s, "tpp", es.sign(t, good)); oauth.AsError(err).Code != oauth.ErrCodeInvalidClient {
		t.Fatalf("the same jti again: %v, want invalid_client", err)
	}
	// A secret, or nothing, is not enough for a private_key_jwt client.
	for name, cred := range map[string]oauth.ClientCredentials{
		"a secret":               {ID: "tpp", Secret: "tpp-secret-0123456789abcdef0123456789"},
		"no credentials":         {ID: "tpp"},
		"another assertion type": {ID: "tpp", Assertion: es.sign(t, assertionClaims("tpp", now)), AssertionType: "urn:ietf:params:oauth:client-assertion-type:saml2-bearer"},
	} {
		if _, err := s.AuthenticateClient(context.Background(), cred); oauth.AsError(err).Code != oauth.ErrCodeInvalidClient {
			t.Errorf("%s: %v, want invalid_client", name, err)
		}
	}
}

// TestPrivateKeyJWT_RacingUsesOfOneAssertionOneWins: the same assertion sent by 50 requests at
// once authenticates exactly one of them.
func TestPrivateKeyJWT_RacingUsesOfOneAssertionOneWins(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	k := newClientKey(t, "k1", jose.ES256)
	s := pkjwtService(t, oauth.Client{ID: "tpp", TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT, JWKS: jwksOf(t, k)}, now)
	a := k.sign(t, assertionClaims("tpp", now))
	const racers = 50
	errs := make([]error, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() { errs[i] = authenticate(s, "tpp", a) })
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case oauth.AsError(err).Code != oauth.ErrCodeInvalidClient:
			t.Fatalf("a racer got %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d of %d racing uses of one assertion authenticated, want 1", ok, racers)
	}
}

// TestPrivateKeyJWT_FAPI2ClientMayNotUseRS256: RS256 assertions are refused of a fapi2 client.
func TestPrivateKeyJWT_FAPI2ClientMayNotUseRS256(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	rs, ps := newClientKey(t, "rs", jose.RS256), newClientKey(t, "ps", jose.PS256)
	c := oauth.Client{ID: "tpp", TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT, JWKS: jwksOf(t, rs, ps), Profile: oauth.ProfileFAPI2}
	s := pkjwtService(t, c, now)
	if err := authenticate(s, "tpp", rs.sign(t, assertionClaims("tpp", now))); oauth.AsError(err).Code != oauth.ErrCodeInvalidClient {
		t.Fatalf("RS256 from a fapi2 client: %v, want invalid_client", err)
	}
	if err := authenticate(s, "tpp", ps.sign(t, assertionClaims("tpp", now))); err != nil {
		t.Fatalf("PS256 from a fapi2 client: %v", err)
	}
}

// TestPrivateKeyJWT_FAPI2ClientAudienceIsOnlyTheIssuerAsAString: FAPI 2.0 (Final) 5.3.2.1 —
// a fapi2 client's assertion is accepted only with aud the issuer identifier as one string; an
// array (even [issuer] or [issuer, another server]), an endpoint URL, the issuer plus "/" or a
// path is invalid_client and records nothing, so the good assertion with the same jti still
// works after them. A client without the profile keeps RFC 7523's endpoint URLs and arrays.
func TestPrivateKeyJWT_FAPI2ClientAudienceIsOnlyTheIssuerAsAString(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	ps := newClientKey(t, "ps", jose.PS256)
	s := pkjwtService(t, oauth.Client{ID: "tpp", TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT, JWKS: jwksOf(t, ps), Profile: oauth.ProfileFAPI2}, now)
	if err := s.Clients.CreateClient(context.Background(), oauth.Client{ID: "plain", TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT,
		JWKS: jwksOf(t, ps), CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	good := assertionClaims("tpp", now)
	for name, aud := range map[string]any{
		"an array of the issuer":             []string{testIssuer},
		"an array with another server":       []string{testIssuer, "https://attacker.example/"},
		"the token endpoint":                 testIssuer + "/token",
		"the PAR endpoint on the mTLS host":  "https://connect.bank.example/v2/authentication/oauth2/par",
		"the issuer plus a slash":            testIssuer + "/",
		"the issuer plus a path":             testIssuer + "/anything",
		"the issuer in another case":         "https://AUTH.bank.example/v2/authentication/oauth2",
		"the issuer as an object":            map[string]string{"aud": testIssuer},
		"another server":                     "https://attacker.example/",
		"the issuer's origin without a path": "https://auth.bank.example",
	} {
		c := map[string]any{}
		for k, v := range good {
			c[k] = v
		}
		c["aud"] = aud
		err := authenticate(s, "tpp", ps.sign(t, c))
		if e := oauth.AsError(err); e.Code != oauth.ErrCodeInvalidClient || !strings.Contains(e.Description, "as a single string") {
			t.Errorf("aud %s: %v, want invalid_client naming the issuer as a single string", name, err)
		}
	}
	if err := authenticate(s, "tpp", ps.sign(t, good)); err != nil {
		t.Fatalf("aud the issuer as a string, after the refused ones: %v", err)
	}
	for _, aud := range []any{testIssuer + "/token", []string{testIssuer, "https://attacker.example/"}} {
		c := assertionClaims("plain", now)
		c["aud"] = aud
		if err := authenticate(s, "plain", ps.sign(t, c)); err != nil {
			t.Errorf("aud %v from a client without the fapi2 profile: %v", aud, err)
		}
	}
}

// TestValidClientJWKS_RefusesPrivateWeakAndUnnamedKeys: registration takes public signing keys
// only, each with a kid, RSA of 2048 bits or more, or EC P-256.
func TestValidClientJWKS_RefusesPrivateWeakAndUnnamedKeys(t *testing.T) {
	good := newClientKey(t, "k1", jose.ES256)
	weak, _ := rsa.GenerateKey(rand.Reader, 1024)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	set := func(keys ...jose.JSONWebKey) json.RawMessage {
		b, _ := json.Marshal(jose.JSONWebKeySet{Keys: keys})
		return b
	}
	if err := oauth.ValidClientJWKS(jwksOf(t, good)); err != nil {
		t.Fatalf("a good set: %v", err)
	}
	for name, raw := range map[string]json.RawMessage{
		"empty":             nil,
		"not JSON":          json.RawMessage(`{`),
		"no keys":           json.RawMessage(`{"keys":[]}`),
		"a private key":     set(jose.JSONWebKey{Key: good.key, KeyID: "k1"}),
		"no kid":            set(jose.JSONWebKey{Key: good.key.Public()}),
		"repeated kid":      set(jose.JSONWebKey{Key: good.key.Public(), KeyID: "a"}, jose.JSONWebKey{Key: good.key.Public(), KeyID: "a"}),
		"RSA 1024":          set(jose.JSONWebKey{Key: &weak.PublicKey, KeyID: "w"}),
		"P-384":             set(jose.JSONWebKey{Key: &p384.PublicKey, KeyID: "p"}),
		"an encryption key": set(jose.JSONWebKey{Key: good.key.Public(), KeyID: "e", Use: "enc"}),
	} {
		if err := oauth.ValidClientJWKS(raw); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// BenchmarkPrivateKeyJWT is the in-process cost of one client authentication by assertion:
// parse, verify with the registered key, check the claims, record the jti (embedded store
// without fsync; in AWS one conditional PutItem, docs/scale.md).
func BenchmarkPrivateKeyJWT(b *testing.B) {
	now := time.Unix(1_800_000_000, 0)
	for _, alg := range []jose.SignatureAlgorithm{jose.ES256, jose.PS256} {
		b.Run(string(alg), func(b *testing.B) {
			k := newClientKey(b, "k1", alg)
			c := oauth.Client{ID: "tpp", TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT, JWKS: jwksOf(b, k)}
			s := pkjwtService(b, c, now)
			assertions := make([]string, 4096)
			for i := range assertions {
				claims := assertionClaims("tpp", now)
				claims["jti"] = fmt.Sprint("j", i)
				assertions[i] = k.sign(b, claims)
			}
			i := 0
			for b.Loop() {
				if i == len(assertions) {
					b.StopTimer()
					s = pkjwtService(b, c, now)
					i = 0
					b.StartTimer()
				}
				if err := authenticate(s, "tpp", assertions[i]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
