package oauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// private_key_jwt (RFC 7523 2.2 and 3, OIDC Core 9): the client authenticates with a JWT it
// signs with a private key whose public half it registered (Client.JWKS), instead of a secret.
// Nothing the server stores can authenticate the client.

// AuthMethodPrivateKeyJWT is the token_endpoint_auth_method of such a client.
const AuthMethodPrivateKeyJWT = "private_key_jwt"

// AssertionTypeJWTBearer is the only client_assertion_type accepted (RFC 7523 2.2).
const AssertionTypeJWTBearer = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// AssertionAlgs are the algorithms a client assertion may be signed with
// (token_endpoint_auth_signing_alg_values_supported); a fapi2 client may not use RS256.
var AssertionAlgs = []string{"PS256", "ES256", "RS256"}

var assertionJOSEAlgs = []jose.SignatureAlgorithm{jose.PS256, jose.ES256, jose.RS256}

const (
	// MaxAssertionLifetime bounds exp - now: an assertion is made for one request.
	MaxAssertionLifetime = 5 * time.Minute
	// assertionSkew is the clock difference tolerated on iat, nbf and exp.
	assertionSkew = 30 * time.Second
	// maxAssertion bounds what is parsed.
	maxAssertion = 8 << 10
)

// UsesPrivateKeyJWT reports whether the client authenticates with private_key_jwt.
func (c *Client) UsesPrivateKeyJWT() bool {
	return c.TokenEndpointAuthMethod == AuthMethodPrivateKeyJWT
}

// ValidTokenEndpointAuthMethod checks a client's registration of its authentication method:
// "" (a secret, or the certificate when one is registered), private_key_jwt with a valid JWKS,
// or tls_client_auth / self_signed_tls_client_auth with a registered certificate.
func (c *Client) ValidTokenEndpointAuthMethod() error {
	switch c.TokenEndpointAuthMethod {
	case "", AuthMethodSecretBasic, AuthMethodSecretPost:
		if len(c.JWKS) > 0 || c.JWKSURI != "" {
			return errors.New("jwks and jwks_uri are only for a client that authenticates with private_key_jwt")
		}
		return nil
	case AuthMethodPrivateKeyJWT:
		if c.UsesMTLS() {
			return errors.New("a private_key_jwt client registers keys, not a certificate")
		}
		if c.JWKSURI != "" {
			// RFC 7591 2: "The jwks_uri and jwks parameters MUST NOT both be present".
			if len(c.JWKS) > 0 {
				return errors.New("give the client's keys as jwks or as jwks_uri, not both (RFC 7591 2)")
			}
			return ValidJWKSURI(c.JWKSURI)
		}
		return ValidClientJWKS(c.JWKS)
	case AuthMethodTLSClient, AuthMethodSelfSigned:
		if !c.UsesMTLS() {
			return fmt.Errorf("%s needs the client's certificate (subject DN or thumbprint)", c.TokenEndpointAuthMethod)
		}
		return nil
	}
	return fmt.Errorf("unknown token_endpoint_auth_method %q (use %s, %s or %s)", c.TokenEndpointAuthMethod,
		AuthMethodPrivateKeyJWT, AuthMethodTLSClient, AuthMethodSecretBasic)
}

// ValidClientJWKS checks a client's public keys: a JWK Set of at most 10 public keys, each
// with a unique kid, RSA of at least 2048 bits or EC P-256, for signing.
func ValidClientJWKS(raw json.RawMessage) error {
	if len(raw) == 0 {
		return errors.New("a private_key_jwt client needs its public keys (jwks or jwks_uri)")
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(raw, &set); err != nil {
		return fmt.Errorf("jwks is not a JWK Set: %v", err)
	}
	if len(set.Keys) == 0 || len(set.Keys) > 10 {
		return errors.New("jwks must hold 1 to 10 keys")
	}
	kids := map[string]bool{}
	for _, k := range set.Keys {
		if !k.IsPublic() {
			return fmt.Errorf("jwks key %q is a private key: register only the public half", k.KeyID)
		}
		if k.KeyID == "" || kids[k.KeyID] {
			return errors.New("every jwks key needs a kid of its own")
		}
		kids[k.KeyID] = true
		if k.Use != "" && k.Use != "sig" {
			return fmt.Errorf("jwks key %q is not for signing (use %q)", k.KeyID, k.Use)
		}
		switch pub := k.Key.(type) {
		case *rsa.PublicKey:
			if pub.N.BitLen() < 2048 {
				return fmt.Errorf("jwks key %q: RSA keys need at least 2048 bits", k.KeyID)
			}
		case *ecdsa.PublicKey:
			if pub.Curve != elliptic.P256() {
				return fmt.Errorf("jwks key %q: EC keys must be P-256", k.KeyID)
			}
		default:
			return fmt.Errorf("jwks key %q: only RSA and EC P-256 keys are accepted", k.KeyID)
		}
	}
	return nil
}

// AssertionClientID reads the client an assertion names (its sub, else its iss) without
// verifying it, so the client whose keys verify it can be loaded; "" when it is unreadable.
// It decodes the payload segment only: the assertion is parsed as a JWS, and verified, once,
// by the client's authentication (verifyAssertion), which refuses it whatever is read here.
func AssertionClientID(assertion string) string {
	if len(assertion) > maxAssertion {
		return ""
	}
	_, rest, ok := strings.Cut(assertion, ".")
	payload, _, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return ""
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return ""
	}
	var c struct{ Iss, Sub string }
	if json.Unmarshal(raw, &c) != nil {
		return ""
	}
	if c.Sub != "" {
		return c.Sub
	}
	return c.Iss
}

// assertionClaims are the claims RFC 7523 3 requires, and nbf/iat when present.
type assertionClaims struct {
	Iss string          `json:"iss"`
	Sub string          `json:"sub"`
	Aud json.RawMessage `json:"aud"`
	Exp *float64        `json:"exp"`
	Nbf *float64        `json:"nbf"`
	Iat *float64        `json:"iat"`
	JTI string          `json:"jti"`
}

func (a assertionClaims) audiences() ([]string, bool) {
	var one string
	if json.Unmarshal(a.Aud, &one) == nil {
		return []string{one}, true
	}
	var many []string
	if json.Unmarshal(a.Aud, &many) == nil {
		return many, true
	}
	return nil, false
}

// verifyAssertion authenticates c by its client assertion: signed by one of its registered
// keys with an accepted algorithm, iss and sub its client_id, aud this server, exp present,
// in the future and at most MaxAssertionLifetime away; its jti is returned for the caller to
// record (until exp) once the rest of the request is checked, so an assertion or a request
// refused for another reason records nothing. Every failure
// is the same invalid_client; the reason goes into the description for the client's developer.
func (s *Service) verifyAssertion(ctx context.Context, c *Client, assertion string) (OneTime, error) {
	bad := func(why string) (OneTime, error) {
		return OneTime{}, InvalidClient("client authentication failed: %s", why)
	}
	if len(assertion) > maxAssertion {
		return bad("the client assertion is too long")
	}
	// A client assertion is a JWT (RFC 7523 2.2): the compact serialization only.
	jws, err := jose.ParseSignedCompact(assertion, assertionJOSEAlgs)
	if err != nil || len(jws.Signatures) != 1 {
		return bad("the client assertion is not a compact JWS of " + strings.Join(AssertionAlgs, ", "))
	}
	h := jws.Signatures[0].Protected
	if c.IsFAPI2() && h.Algorithm == string(jose.RS256) {
		return bad("a FAPI 2.0 client signs its assertions with PS256 or ES256")
	}
	payload, err := s.verifyClientJWS(ctx, c, jws)
	if errors.Is(err, errNotSignedByClient) {
		return bad("the client assertion is not signed by a key the client registered")
	}
	if err != nil {
		return bad(err.Error())
	}
	var cl assertionClaims
	if err := json.Unmarshal(payload, &cl); err != nil {
		return bad("the client assertion's claims are not a JSON object of the right types")
	}
	now := s.now()
	switch {
	case cl.Iss != c.ID || cl.Sub != c.ID:
		return bad("the client assertion's iss and sub must be the client_id")
	case !s.assertionForUs(c, cl.Aud):
		if c.IsFAPI2() {
			return bad("the client assertion's aud must be the issuer " + s.Issuer + ", as a single string")
		}
		return bad("the client assertion's aud must be the issuer " + s.Issuer)
	case cl.Exp == nil:
		return bad("the client assertion needs an exp")
	case cl.JTI == "" || len(cl.JTI) > maxJTI:
		return bad("the client assertion needs a jti of at most 256 characters")
	}
	exp := time.Unix(int64(*cl.Exp), 0)
	switch {
	case !now.Before(exp.Add(assertionSkew)):
		return bad("the client assertion has expired")
	case exp.After(now.Add(MaxAssertionLifetime + assertionSkew)):
		return bad("the client assertion's exp is more than 5 minutes away")
	case cl.Nbf != nil && time.Unix(int64(*cl.Nbf), 0).After(now.Add(assertionSkew)):
		return bad("the client assertion is not valid yet (nbf)")
	case cl.Iat != nil && time.Unix(int64(*cl.Iat), 0).After(now.Add(assertionSkew)):
		return bad("the client assertion's iat is in the future")
	}
	return OneTime{
		key:     "assertion:" + c.ID + ":" + cl.JTI,
		expires: exp.Add(assertionSkew),
		reused:  InvalidClient("client authentication failed: the client assertion was already used (its jti is not new)"),
	}, nil
}

// assertionForUs is the one rule on a client assertion's aud, at every endpoint that
// authenticates clients (PAR, token, introspection, revocation).
//
// A fapi2 client's assertion must carry the issuer identifier alone, as a JSON string: FAPI 2.0
// Security Profile (Final) 5.3.2.1 ("shall only accept its issuer identifier value (as defined
// in RFC 8414) as a string in the aud claim received in client authentication assertions").
// An endpoint URL, an array (even of the issuer alone) or the issuer with a path is refused:
// an assertion made for another audience could have been made for a server that replays it
// here (the audience injection attack that draft-ietf-oauth-rfc7523bis fixes).
//
// Other clients keep what RFC 7523 3 allows: a string or an array, one of whose values is the
// issuer or the URL of one of its endpoints (isOurAudience).
func (s *Service) assertionForUs(c *Client, raw json.RawMessage) bool {
	if c.IsFAPI2() {
		var aud string
		return json.Unmarshal(raw, &aud) == nil && aud == s.Issuer
	}
	auds, ok := assertionClaims{Aud: raw}.audiences()
	return ok && slices.ContainsFunc(auds, s.isOurAudience)
}

// isOurAudience is the audience rule for a client without the fapi2 profile: the issuer, or
// the URL of one of the issuer's endpoints (RFC 7523 3: the token endpoint URL) under any origin the service is
// served from.
func (s *Service) isOurAudience(aud string) bool {
	if aud == "" {
		return false
	}
	if aud == s.Issuer || strings.HasPrefix(aud, s.Issuer+"/") {
		return true
	}
	iss, err := url.Parse(s.Issuer)
	if err != nil {
		return false
	}
	for _, o := range s.Origins {
		base := o + iss.EscapedPath()
		if aud == base || strings.HasPrefix(aud, base+"/") {
			return true
		}
	}
	return false
}
