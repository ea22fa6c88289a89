package oauth

import "time"

// Signing-key states, in the order a key moves through them (DESIGN.md decision 6).
const (
	// KeyNext is published in the JWKS but does not sign yet, so verifiers cache it first.
	KeyNext = "next"
	// KeyCurrent signs new id_tokens; there is exactly one.
	KeyCurrent = "current"
	// KeyRetired no longer signs but stays published until every id_token it signed expired.
	KeyRetired = "retired"
	// KeyDeleted is gone from the JWKS and its key material is scheduled for deletion.
	KeyDeleted = "deleted"
)

// SigningKey is one id_token signing key in the registry: its public half (so the JWKS needs no
// call to the key service), the backend's reference to the private half, and its timestamps.
type SigningKey struct {
	// Kid is the RFC 7638 JWK thumbprint of the public key.
	Kid string `json:"kid" dynamodbav:"kid"`
	// Ref names the private key in its backend: a KMS key ARN, or a local key file name.
	Ref   string `json:"ref" dynamodbav:"ref"`
	State string `json:"state" dynamodbav:"state"`
	// N and E are the RSA public key as in a JWK (base64url, unpadded); empty for an EC key.
	N           string    `json:"n" dynamodbav:"n"`
	E           string    `json:"e" dynamodbav:"e"`
	CreatedAt   time.Time `json:"created_at" dynamodbav:"created_at"`
	ActivatedAt time.Time `json:"activated_at,omitzero" dynamodbav:"activated_at,omitempty"`
	RetiredAt   time.Time `json:"retired_at,omitzero" dynamodbav:"retired_at,omitempty"`
	DeletedAt   time.Time `json:"deleted_at,omitzero" dynamodbav:"deleted_at,omitempty"`
	// Alg is the JWS algorithm the key signs with ("RS256", "PS256", "ES256"); each algorithm
	// has its own next, current and retired keys. Records written before there was more than
	// one algorithm have none and are RS256.
	Alg string `json:"alg,omitempty" dynamodbav:"alg,omitempty"`
	// Crv, X and Y are the EC public key as in a JWK (crv "P-256", base64url coordinates);
	// empty for an RSA key.
	Crv string `json:"crv,omitempty" dynamodbav:"crv,omitempty"`
	X   string `json:"x,omitempty" dynamodbav:"x,omitempty"`
	Y   string `json:"y,omitempty" dynamodbav:"y,omitempty"`
}

// KeySet is the whole registry with the version its compare-and-swap checks.
type KeySet struct {
	Keys    []SigningKey `json:"keys" dynamodbav:"keys"`
	Version int64        `json:"version" dynamodbav:"version"`
}

// DefaultIDTokenAlg is the id_token algorithm of a client that registered none, and of the
// registry records written before keys had an algorithm.
const DefaultIDTokenAlg = "RS256"

// Algorithm returns the JWS algorithm the key signs with (DefaultIDTokenAlg for old records).
func (k SigningKey) Algorithm() string {
	if k.Alg == "" {
		return DefaultIDTokenAlg
	}
	return k.Alg
}

// Current returns the key that signs with alg, if there is one.
func (s KeySet) Current(alg string) (SigningKey, bool) {
	for _, k := range s.Keys {
		if k.State == KeyCurrent && k.Algorithm() == alg {
			return k, true
		}
	}
	return SigningKey{}, false
}

// Published returns the keys the JWKS serves: next, current and retired.
func (s KeySet) Published() []SigningKey {
	var out []SigningKey
	for _, k := range s.Keys {
		switch k.State {
		case KeyNext, KeyCurrent, KeyRetired:
			out = append(out, k)
		}
	}
	return out
}
