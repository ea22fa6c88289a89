package oauth

import (
	"context"

	"github.com/golang-jwt/jwt/v5"
)

// IDTokenSigner signs the JWTs the server issues with the current key of an algorithm (the
// client's id_token_signed_response_alg, authorization_signed_response_alg or
// introspection_signed_response_alg: "RS256", "PS256" or "ES256"; "" is DefaultIDTokenAlg), its
// kid in the header. The keys package implements it over local key files or AWS KMS.
type IDTokenSigner interface {
	// SignJWT signs an id_token (header typ "JWT").
	SignJWT(ctx context.Context, alg string, claims jwt.MapClaims) (string, error)
	// SignJWTWithType signs a JWT whose header typ is typ (RFC 7515 4.1.9), so that a JWT
	// of one kind cannot be taken for another (RFC 8725 3.11): "token-introspection+jwt"
	// (RFC 9701 5), later "logout+jwt"; "" is "JWT", as SignJWT.
	SignJWTWithType(ctx context.Context, alg, typ string, claims jwt.MapClaims) (string, error)
}

// Values of the JWS typ header (IDTokenSigner.SignJWTWithType).
const (
	// JWTTypeIntrospection is the typ of a JWT introspection response (RFC 9701 5).
	JWTTypeIntrospection = "token-introspection+jwt"
)
