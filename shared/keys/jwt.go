package keys

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/golang-jwt/jwt/v5"
)

// SigningMethod is RS256, PS256 or ES256 for golang-jwt/jwt/v5 with the private key held by a
// Backend, so the same code path assembles an id_token whether KMS or a local file holds the
// key. It is not registered in jwt's global table: parsing tokens keeps using jwt's own methods.
type SigningMethod struct {
	backend Backend
	alg     string
}

// NewSigningMethod returns the method that signs with alg (one of Algs) through b.
func NewSigningMethod(b Backend, alg string) *SigningMethod {
	return &SigningMethod{backend: b, alg: alg}
}

// KeyRef is the "key" handed to SigningMethod.Sign (jwt.Token.SignedString): which backend
// key to use, and the request's context, because jwt's Sign has no context parameter of its own
// and a KMS call must stop when the request does.
type KeyRef struct {
	Ctx context.Context
	Ref string
}

// Alg is the JWS algorithm, "RS256", "PS256" or "ES256".
func (m *SigningMethod) Alg() string { return m.alg }

// Sign hashes the JWS signing input with SHA-256 and has the backend sign the digest: one
// backend call per signature.
func (m *SigningMethod) Sign(signingString string, key any) ([]byte, error) {
	k, ok := key.(KeyRef)
	if !ok || k.Ref == "" {
		return nil, fmt.Errorf("%s backend signing: key must be a keys.KeyRef, got %T", m.alg, key)
	}
	ctx := k.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	digest := sha256.Sum256([]byte(signingString))
	return m.signDigest(ctx, k.Ref, digest[:])
}

// signDigest has the backend sign a SHA-256 digest of the signing input with ref: Sign for a
// caller that has the digest already (the Signer, which checks the signature over it).
func (m *SigningMethod) signDigest(ctx context.Context, ref string, digest []byte) ([]byte, error) {
	if !Supported(m.alg) {
		return nil, fmt.Errorf("%w %q", ErrUnsupportedAlg, m.alg)
	}
	sig, err := m.backend.Sign(ctx, ref, m.alg, digest)
	if err != nil {
		return nil, err
	}
	if len(sig) == 0 {
		return nil, fmt.Errorf("%s backend signing: empty signature", m.alg)
	}
	return sig, nil
}

// Verify checks a signature of the method's algorithm exactly as golang-jwt's own method does.
func (m *SigningMethod) Verify(signingString string, sig []byte, key any) error {
	method := jwt.GetSigningMethod(m.alg)
	if method == nil {
		return errors.New("unsupported signing algorithm " + m.alg)
	}
	return method.Verify(signingString, sig, key)
}
