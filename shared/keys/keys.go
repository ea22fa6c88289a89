// Package keys signs id_tokens with the current key of the signing-key registry and publishes
// the registry's keys as a JWKS. It is the domain side of the key port: the private halves live
// in a Backend (AWS KMS in production, PEM files locally), the public halves and the key states
// live in the registry (oauth.KeyStore), and the Rotator moves keys through their states.
package keys

import (
	"cmp"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"time"

	"github.com/acmebank/authserver/shared/keys/keypolicy"
	"github.com/acmebank/authserver/shared/oauth"
)

// The JWS algorithms the service signs id_tokens with (keypolicy: RFC 7518 3.1).
const (
	RS256 = keypolicy.RS256
	PS256 = keypolicy.PS256
	ES256 = keypolicy.ES256
)

// Algs are the supported algorithms, in the order the JWKS and discovery list them.
var Algs = keypolicy.Algs

// Supported reports whether alg is one of Algs.
func Supported(alg string) bool { return keypolicy.Supported(alg) }

// KeyBits is the size of every RSA signing key: RSA 2048 is what KMS offers as RSA_2048 and what
// every OIDC client verifies.
const KeyBits = 2048

// ErrUnknownKey is a Sign or PublicKey call for a key the backend does not have, or has
// scheduled for deletion. It is permanent: retrying will not help.
var ErrUnknownKey = errors.New("signing key not found or scheduled for deletion")

// ErrUnsupportedAlg is keypolicy.ErrUnsupportedAlg.
var ErrUnsupportedAlg = keypolicy.ErrUnsupportedAlg

// Backend holds the private halves of the signing keys. Every key is one key pair named by an
// opaque ref; a ref never changes which key it names (no aliases, no versions), so a signature
// made with a ref always verifies with the public key returned for that ref, and the kid
// derived from that public key is stable for the key's whole life. Which algorithm a key
// serves is recorded in the registry (oauth.SigningKey.Alg): RS256 and PS256 keys are both RSA
// 2048 keys, but the Rotator never uses one key for two algorithms.
//
// Implementations must be safe for concurrent use. Failures worth retrying (throttling,
// timeouts, 5xx) are wrapped with oauth.ErrTransient; a ref the backend does not know, or that
// is scheduled for deletion, is ErrUnknownKey; an algorithm outside Algs is ErrUnsupportedAlg.
type Backend interface {
	// CreateKey makes a new key pair for alg and returns its ref and public key
	// (*rsa.PublicKey for RS256/PS256, *ecdsa.PublicKey P-256 for ES256).
	CreateKey(ctx context.Context, alg string) (ref string, pub crypto.PublicKey, err error)
	// Sign signs a SHA-256 digest with alg and returns the JWS signature value (RFC 7518 3.3-3.5:
	// for ES256 the 64-byte R||S, not DER).
	Sign(ctx context.Context, ref, alg string, digest []byte) ([]byte, error)
	// PublicKey returns the public half of ref.
	PublicKey(ctx context.Context, ref string) (crypto.PublicKey, error)
	// ScheduleDeletion makes the key unusable and destroys it (at once for a file, after the
	// pending window for KMS). Scheduling a key that is already gone or pending is not an error,
	// so a rotation that crashed midway can be run again.
	ScheduleDeletion(ctx context.Context, ref string) error
}

// CheckKey reports whether pub is a key alg can use: an RSA key of at least KeyBits bits with
// an odd exponent for RS256 and PS256, a P-256 key for ES256.
func CheckKey(alg string, pub crypto.PublicKey) error {
	switch alg {
	case RS256, PS256:
		k, ok := pub.(*rsa.PublicKey)
		if !ok || k == nil {
			return fmt.Errorf("%s needs an RSA key, got %T", alg, pub)
		}
		if k.N == nil || k.N.BitLen() < KeyBits || k.E < 3 || k.E%2 == 0 {
			return fmt.Errorf("%s needs an RSA key of at least %d bits with an odd exponent", alg, KeyBits)
		}
		return nil
	case ES256:
		k, ok := pub.(*ecdsa.PublicKey)
		if !ok || k == nil || k.Curve != elliptic.P256() {
			return fmt.Errorf("ES256 needs a P-256 ECDSA key, got %T", pub)
		}
		return nil
	}
	return fmt.Errorf("%w %q", ErrUnsupportedAlg, alg)
}

// Thumbprint returns the RFC 7638 JWK thumbprint (SHA-256, base64url) of an RSA or P-256 public
// key: the kid, so that a kid names exactly one key and anyone can recompute it.
func Thumbprint(pub crypto.PublicKey) (string, error) {
	var canonical string
	// RFC 7638 3.2: the required members in lexicographic order, no whitespace.
	switch k := pub.(type) {
	case *rsa.PublicKey:
		n, e := encodeRSA(k)
		canonical = `{"e":"` + e + `","kty":"RSA","n":"` + n + `"}`
	case *ecdsa.PublicKey:
		x, y, err := encodeEC(k)
		if err != nil {
			return "", err
		}
		canonical = `{"crv":"P-256","kty":"EC","x":"` + x + `","y":"` + y + `"}`
	default:
		return "", fmt.Errorf("thumbprint of a %T: %w", pub, ErrUnsupportedAlg)
	}
	sum := sha256.Sum256([]byte(canonical))
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// encodeRSA returns the JWK n and e members of pub (base64url of the big-endian unsigned
// integers, no leading zeros, RFC 7518 6.3.1).
func encodeRSA(pub *rsa.PublicKey) (n, e string) {
	eb := big.NewInt(int64(pub.E)).Bytes()
	return base64.RawURLEncoding.EncodeToString(pub.N.Bytes()), base64.RawURLEncoding.EncodeToString(eb)
}

// encodeEC returns the JWK x and y members of a P-256 key: each coordinate as 32 bytes,
// zero-padded (RFC 7518 6.2.1.2), taken from the key's uncompressed point encoding.
func encodeEC(pub *ecdsa.PublicKey) (x, y string, err error) {
	if pub.Curve != elliptic.P256() {
		return "", "", fmt.Errorf("EC key on %v, want P-256: %w", pub.Curve.Params().Name, ErrUnsupportedAlg)
	}
	ecdhKey, err := pub.ECDH()
	if err != nil {
		return "", "", fmt.Errorf("EC key: %w", err)
	}
	point := ecdhKey.Bytes() // 0x04 || X || Y
	return base64.RawURLEncoding.EncodeToString(point[1:33]), base64.RawURLEncoding.EncodeToString(point[33:65]), nil
}

// NewSigningKey is the registry record of a freshly created key for alg: its kid, ref, alg and
// public members, in state next (the Rotator decides when it signs).
func NewSigningKey(ref, alg string, pub crypto.PublicKey, now time.Time) (oauth.SigningKey, error) {
	if err := CheckKey(alg, pub); err != nil {
		return oauth.SigningKey{}, err
	}
	kid, err := Thumbprint(pub)
	if err != nil {
		return oauth.SigningKey{}, err
	}
	k := oauth.SigningKey{Kid: kid, Ref: ref, Alg: alg, State: oauth.KeyNext, CreatedAt: now.UTC()}
	switch pk := pub.(type) {
	case *rsa.PublicKey:
		k.N, k.E = encodeRSA(pk)
	case *ecdsa.PublicKey:
		k.Crv = "P-256"
		if k.X, k.Y, err = encodeEC(pk); err != nil {
			return oauth.SigningKey{}, err
		}
	}
	return k, nil
}

// PublicKey decodes the public key of a registry record (RSA for RS256 and PS256 records, P-256
// for ES256 ones), so a verifier (or the Signer's check of its own signatures) needs no backend
// call.
func PublicKey(k oauth.SigningKey) (crypto.PublicKey, error) {
	alg := k.Algorithm()
	var pub crypto.PublicKey
	switch alg {
	case RS256, PS256:
		nb, err := base64.RawURLEncoding.DecodeString(k.N)
		if err != nil || len(nb) == 0 {
			return nil, fmt.Errorf("key %s: bad modulus", k.Kid)
		}
		eb, err := base64.RawURLEncoding.DecodeString(k.E)
		if err != nil || len(eb) == 0 || len(eb) > 4 {
			return nil, fmt.Errorf("key %s: bad exponent", k.Kid)
		}
		e := new(big.Int).SetBytes(eb)
		pub = &rsa.PublicKey{N: new(big.Int).SetBytes(nb), E: int(e.Int64())}
	case ES256:
		xb, errX := base64.RawURLEncoding.DecodeString(k.X)
		yb, errY := base64.RawURLEncoding.DecodeString(k.Y)
		if k.Crv != "P-256" || errX != nil || errY != nil || len(xb) != 32 || len(yb) != 32 {
			return nil, fmt.Errorf("key %s: bad P-256 members", k.Kid)
		}
		// ecdsa.ParseUncompressedPublicKey checks that the point is on the curve.
		ek, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, xb...), yb...))
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", k.Kid, err)
		}
		pub = ek
	default:
		return nil, fmt.Errorf("key %s: %w %q", k.Kid, ErrUnsupportedAlg, alg)
	}
	if err := CheckKey(alg, pub); err != nil {
		return nil, fmt.Errorf("key %s: %w", k.Kid, err)
	}
	return pub, nil
}

// JWK is the public JSON Web Key of a registry record, as the JWKS publishes it, with its alg
// (RFC 7517 4, RFC 7518 6.2.1 and 6.3.1).
func JWK(k oauth.SigningKey) map[string]any {
	alg := k.Algorithm()
	if alg == ES256 {
		return map[string]any{"kty": "EC", "use": "sig", "alg": alg, "kid": k.Kid, "crv": k.Crv, "x": k.X, "y": k.Y}
	}
	return map[string]any{"kty": "RSA", "use": "sig", "alg": alg, "kid": k.Kid, "n": k.N, "e": k.E}
}

// PublicJWKS returns the JWKS document of the published keys of set (next, current and
// retired; never deleted ones) of every algorithm, and a strong ETag for it. The current keys
// come first (RS256's first of all, for clients that wrongly take the first key), then next,
// then retired keys newest first; within a state, algorithms in the order of Algs. The output
// is deterministic, so the ETag changes only when the published keys do.
func PublicJWKS(set oauth.KeySet) (body []byte, etag string) {
	pub := set.Published()
	rank := map[string]int{oauth.KeyCurrent: 0, oauth.KeyNext: 1, oauth.KeyRetired: 2}
	slices.SortStableFunc(pub, func(a, b oauth.SigningKey) int {
		return cmp.Or(cmp.Compare(rank[a.State], rank[b.State]),
			cmp.Compare(slices.Index(Algs, a.Algorithm()), slices.Index(Algs, b.Algorithm())),
			b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(a.Kid, b.Kid))
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
