package keys

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/golang-jwt/jwt/v5"
)

// SigningMethod is RS256 for golang-jwt/jwt/v5 with the private key held by a Backend, so the
// same code path assembles an id_token whether KMS or a local file holds the key. It is not
// registered in jwt's global table: parsing RS256 tokens keeps using jwt.SigningMethodRS256.
type SigningMethod struct {
	backend Backend
}

// NewSigningMethod returns the RS256 method that signs through b.
func NewSigningMethod(b Backend) *SigningMethod { return &SigningMethod{backend: b} }

// KeyRef is the "key" handed to SigningMethod.Sign (jwt.Token.SignedString): which backend
// key to use, and the request's context, because jwt's Sign has no context parameter of its own
// and a KMS call must stop when the request does.
type KeyRef struct {
	Ctx context.Context
	Ref string
}

// Alg is "RS256".
func (m *SigningMethod) Alg() string { return Alg }

// Sign hashes the JWS signing input with SHA-256 and has the backend sign the digest: one
// backend call per signature.
func (m *SigningMethod) Sign(signingString string, key any) ([]byte, error) {
	k, ok := key.(KeyRef)
	if !ok || k.Ref == "" {
		return nil, fmt.Errorf("rs256 backend signing: key must be a keys.KeyRef, got %T", key)
	}
	ctx := k.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	digest := sha256.Sum256([]byte(signingString))
	sig, err := m.backend.Sign(ctx, k.Ref, digest[:])
	if err != nil {
		return nil, err
	}
	if len(sig) == 0 {
		return nil, errors.New("rs256 backend signing: empty signature")
	}
	return sig, nil
}

// Verify checks an RS256 signature with an *rsa.PublicKey, exactly as jwt.SigningMethodRS256.
func (m *SigningMethod) Verify(signingString string, sig []byte, key any) error {
	return jwt.SigningMethodRS256.Verify(signingString, sig, key)
}
