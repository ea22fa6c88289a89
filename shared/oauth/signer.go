package oauth

import (
	"context"

	"github.com/golang-jwt/jwt/v5"
)

// IDTokenSigner signs id_tokens: RS256 with the current key, its kid in the header. The keys
// package implements it over a local key file or AWS KMS.
type IDTokenSigner interface {
	SignJWT(ctx context.Context, claims jwt.MapClaims) (string, error)
}
