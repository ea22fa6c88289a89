package oauth

import (
	"context"

	"github.com/golang-jwt/jwt/v5"
)

// IDTokenSigner signs id_tokens with the current key of an algorithm (the client's
// id_token_signed_response_alg: "RS256", "PS256" or "ES256"; "" is DefaultIDTokenAlg), its kid
// in the header. The keys package implements it over local key files or AWS KMS.
type IDTokenSigner interface {
	SignJWT(ctx context.Context, alg string, claims jwt.MapClaims) (string, error)
}
