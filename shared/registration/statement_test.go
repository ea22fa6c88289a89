package registration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/oauth"
)

const directoryIssuer = "https://directory.example"

// directoryKey is a directory's signing key and the config that trusts it (inline JWKS).
type directoryKey struct {
	key any
	kid string
	alg jose.SignatureAlgorithm
}

func newDirectoryKey(t *testing.T) directoryKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return directoryKey{key: k, kid: "dir-1", alg: jose.ES256}
}

func (d directoryKey) directory(t *testing.T) config.Directory {
	t.Helper()
	pub := d.key.(*ecdsa.PrivateKey).Public()
	b, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: pub, KeyID: d.kid, Algorithm: string(d.alg), Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	return config.Directory{Issuer: directoryIssuer, JWKS: b}
}

// sign signs claims with key as kid.
func sign(t *testing.T, key any, kid string, alg jose.SignatureAlgorithm, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", kid).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func validClaims(now time.Time) map[string]any {
	return map[string]any{"iss": directoryIssuer, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		"software_id": "sw-1", "client_name": "Directory App", "redirect_uris": []string{"https://tpp.example/cb"}}
}

// unsigned is a JWT with alg none: header and claims, and an empty signature.
func unsigned(claims map[string]any) string {
	h, _ := json.Marshal(map[string]string{"alg": "none", "typ": "JWT"})
	c, _ := json.Marshal(claims)
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c) + "."
}

// TestVerifyStatement_EachRuleRefusesItsStatement: a statement that breaks one rule is refused
// with RFC 7591 3.2.2's code for it, and a statement that keeps them all is accepted with its
// claims.
func TestVerifyStatement_EachRuleRefusesItsStatement(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	dk := newDirectoryKey(t)
	dirs := []config.Directory{dk.directory(t)}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	with := func(change func(map[string]any)) map[string]any {
		c := validClaims(now)
		change(c)
		return c
	}
	for _, tc := range []struct {
		name, jws, want string
	}{
		{"alg none", unsigned(validClaims(now)), oauth.ErrCodeInvalidSoftwareStatement},
		{"HS256 with the directory's key id", sign(t, []byte(strings.Repeat("k", 32)), dk.kid, jose.HS256, validClaims(now)), oauth.ErrCodeInvalidSoftwareStatement},
		{"not a JWT", "not.a.jwt", oauth.ErrCodeInvalidSoftwareStatement},
		{"untrusted issuer", sign(t, dk.key, dk.kid, dk.alg, with(func(c map[string]any) { c["iss"] = "https://evil.example" })), oauth.ErrCodeUnapprovedSoftwareStatement},
		{"no issuer", sign(t, dk.key, dk.kid, dk.alg, with(func(c map[string]any) { delete(c, "iss") })), oauth.ErrCodeUnapprovedSoftwareStatement},
		{"expired", sign(t, dk.key, dk.kid, dk.alg, with(func(c map[string]any) { c["exp"] = now.Add(-time.Second).Unix() })), oauth.ErrCodeInvalidSoftwareStatement},
		{"expiring now", sign(t, dk.key, dk.kid, dk.alg, with(func(c map[string]any) { c["exp"] = now.Unix() })), oauth.ErrCodeInvalidSoftwareStatement},
		{"no exp", sign(t, dk.key, dk.kid, dk.alg, with(func(c map[string]any) { delete(c, "exp") })), oauth.ErrCodeInvalidSoftwareStatement},
		{"nbf in the future", sign(t, dk.key, dk.kid, dk.alg, with(func(c map[string]any) { c["nbf"] = now.Add(2 * time.Minute).Unix() })), oauth.ErrCodeInvalidSoftwareStatement},
		{"iat in the future", sign(t, dk.key, dk.kid, dk.alg, with(func(c map[string]any) { c["iat"] = now.Add(2 * time.Minute).Unix() })), oauth.ErrCodeInvalidSoftwareStatement},
		{"signed by a key not in the directory's set, same kid", sign(t, other, dk.kid, dk.alg, validClaims(now)), oauth.ErrCodeInvalidSoftwareStatement},
		{"signed by a key not in the directory's set, another kid", sign(t, other, "stranger", dk.alg, validClaims(now)), oauth.ErrCodeInvalidSoftwareStatement},
		{"RS256 by a key the directory does not hold", sign(t, rsaKey, dk.kid, jose.RS256, validClaims(now)), oauth.ErrCodeInvalidSoftwareStatement},
		{"signature tampered", func() string {
			p := strings.Split(sign(t, dk.key, dk.kid, dk.alg, validClaims(now)), ".")
			c, _ := json.Marshal(with(func(c map[string]any) { c["client_name"] = "Evil" }))
			return p[0] + "." + base64.RawURLEncoding.EncodeToString(c) + "." + p[2]
		}(), oauth.ErrCodeInvalidSoftwareStatement},
		{"oversized", strings.Repeat("a", maxStatementBytes+1), oauth.ErrCodeInvalidSoftwareStatement},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := verifyStatement(context.Background(), tc.jws, dirs, inlineOrFetched(nil), now)
			if err == nil {
				t.Fatalf("accepted, want %s", tc.want)
			}
			if got := oauth.AsError(err).Code; got != tc.want {
				t.Fatalf("error %s (%v), want %s", got, err, tc.want)
			}
		})
	}
	t.Run("valid", func(t *testing.T) {
		st, err := verifyStatement(context.Background(), sign(t, dk.key, dk.kid, dk.alg, validClaims(now)), dirs, inlineOrFetched(nil), now)
		if err != nil {
			t.Fatal(err)
		}
		if st.directory.Issuer != directoryIssuer || string(st.claims["software_id"]) != `"sw-1"` {
			t.Fatalf("statement %+v", st)
		}
	})
	t.Run("iat within the clock skew", func(t *testing.T) {
		jws := sign(t, dk.key, dk.kid, dk.alg, with(func(c map[string]any) { c["iat"] = now.Add(30 * time.Second).Unix() }))
		if _, err := verifyStatement(context.Background(), jws, dirs, inlineOrFetched(nil), now); err != nil {
			t.Fatal(err)
		}
	})
}
