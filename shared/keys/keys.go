// Package keys signs id_tokens with the current key of the signing-key registry and publishes
// the registry's keys as a JWKS. It is the domain side of the key port: the private halves live
// in a Backend (AWS KMS in production, PEM files locally), the public halves and the key states
// live in the registry (oauth.KeyStore), and the Rotator moves keys through their states.
package keys

import (
	"context"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// KeyBits is the size of every signing key: RSA 2048 is what KMS offers as RSA_2048 and what
// every OIDC client verifies.
const KeyBits = 2048

// Alg is the one JWS algorithm the service signs with (RSASSA-PKCS1-v1_5 with SHA-256).
const Alg = "RS256"

// ErrUnknownKey is a Sign or PublicKey call for a key the backend does not have, or has
// scheduled for deletion. It is permanent: retrying will not help.
var ErrUnknownKey = errors.New("signing key not found or scheduled for deletion")

// Backend holds the private halves of the signing keys. Every key is a single RSA 2048 key pair
// named by an opaque ref; a ref never changes which key it names (no aliases, no versions), so a
// signature made with a ref always verifies with the public key returned for that ref, and the
// kid derived from that public key is stable for the key's whole life.
//
// Implementations must be safe for concurrent use. Failures worth retrying (throttling,
// timeouts, 5xx) are wrapped with oauth.ErrTransient; a ref the backend does not know, or that
// is scheduled for deletion, is ErrUnknownKey.
type Backend interface {
	// CreateKey makes a new key pair and returns its ref and public key.
	CreateKey(ctx context.Context) (ref string, pub *rsa.PublicKey, err error)
	// Sign signs a SHA-256 digest (32 bytes) with RSASSA-PKCS1-v1_5 and returns the signature.
	Sign(ctx context.Context, ref string, digest []byte) ([]byte, error)
	// PublicKey returns the public half of ref.
	PublicKey(ctx context.Context, ref string) (*rsa.PublicKey, error)
	// ScheduleDeletion makes the key unusable and destroys it (at once for a file, after the
	// pending window for KMS). Scheduling a key that is already gone or pending is not an error,
	// so a rotation that crashed midway can be run again.
	ScheduleDeletion(ctx context.Context, ref string) error
}

// Thumbprint returns the RFC 7638 JWK thumbprint of an RSA public key (SHA-256, base64url):
// the kid, so that a kid names exactly one key and anyone can recompute it.
func Thumbprint(pub *rsa.PublicKey) string {
	n, e := encodeKey(pub)
	// RFC 7638 3.2: the required members in lexicographic order, no whitespace.
	canonical := `{"e":"` + e + `","kty":"RSA","n":"` + n + `"}`
	sum := sha256.Sum256([]byte(canonical))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// encodeKey returns the JWK n and e members of pub (base64url of the big-endian unsigned
// integers, no leading zeros, RFC 7518 6.3.1).
func encodeKey(pub *rsa.PublicKey) (n, e string) {
	eb := big.NewInt(int64(pub.E)).Bytes()
	return base64.RawURLEncoding.EncodeToString(pub.N.Bytes()), base64.RawURLEncoding.EncodeToString(eb)
}

// NewSigningKey is the registry record of a freshly created key: its kid, ref and public
// members, in state next (the Rotator decides when it signs).
func NewSigningKey(ref string, pub *rsa.PublicKey, now time.Time) oauth.SigningKey {
	n, e := encodeKey(pub)
	return oauth.SigningKey{Kid: Thumbprint(pub), Ref: ref, State: oauth.KeyNext, N: n, E: e, CreatedAt: now.UTC()}
}

// PublicKey decodes the public key of a registry record, so a verifier (or the Signer's
// check of its own signatures) needs no backend call.
func PublicKey(k oauth.SigningKey) (*rsa.PublicKey, error) {
	nb, err := base64.RawURLEncoding.DecodeString(k.N)
	if err != nil || len(nb) == 0 {
		return nil, fmt.Errorf("key %s: bad modulus", k.Kid)
	}
	eb, err := base64.RawURLEncoding.DecodeString(k.E)
	if err != nil || len(eb) == 0 || len(eb) > 4 {
		return nil, fmt.Errorf("key %s: bad exponent", k.Kid)
	}
	e := new(big.Int).SetBytes(eb)
	pub := &rsa.PublicKey{N: new(big.Int).SetBytes(nb), E: int(e.Int64())}
	if pub.N.BitLen() < KeyBits || pub.E < 3 || pub.E%2 == 0 {
		return nil, fmt.Errorf("key %s: not an RSA key of at least %d bits", k.Kid, KeyBits)
	}
	return pub, nil
}

// JWK is the public JSON Web Key of a registry record, as the JWKS publishes it
// (RFC 7517 4, RFC 7518 6.3.1).
func JWK(k oauth.SigningKey) map[string]any {
	return map[string]any{"kty": "RSA", "use": "sig", "alg": Alg, "kid": k.Kid, "n": k.N, "e": k.E}
}

// PublicJWKS returns the JWKS document of the published keys of set (next, current and
// retired; never deleted ones) and a strong ETag for it. The current key comes first, for
// clients that wrongly take the first key, then next, then retired keys newest first. The
// output is deterministic, so the ETag changes only when the published keys do.
func PublicJWKS(set oauth.KeySet) (body []byte, etag string) {
	pub := set.Published()
	rank := map[string]int{oauth.KeyCurrent: 0, oauth.KeyNext: 1, oauth.KeyRetired: 2}
	slices.SortStableFunc(pub, func(a, b oauth.SigningKey) int {
		if d := rank[a.State] - rank[b.State]; d != 0 {
			return d
		}
		return b.CreatedAt.Compare(a.CreatedAt)
	})
	doc := struct {
		Keys []map[string]any `json:"keys"`
	}{Keys: make([]map[string]any, 0, len(pub))}
	for _, k := range pub {
		doc.Keys = append(doc.Keys, JWK(k))
	}
	body, err := json.Marshal(doc)
	if err != nil { // maps of strings always marshal
		panic(fmt.Sprintf("marshal jwks: %v", err))
	}
	sum := sha256.Sum256(body)
	return body, `"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`
}
