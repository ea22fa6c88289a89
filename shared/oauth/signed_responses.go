package oauth

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Signed responses: JARM (JWT Secured Authorization Response Mode for OAuth 2.0, Final) for the
// authorization endpoint and JWT introspection responses (RFC 9701), the two FAPI 2.0 Message
// Signing (Final) asks of an authorization server besides signed request objects. Both are
// signed with the id_token keys (IDTokenSigner), in the algorithm the client registered.

// Response modes of the authorization endpoint (OAuth 2.0 Multiple Response Type Encoding
// Practices 2.1; JARM 2.3). For response_type=code, "jwt" means "query.jwt" (JARM 2.3.4): a
// single response parameter in the redirect URI's query. form_post.jwt and fragment.jwt are
// refused: a code never travels in a fragment or an auto-posted form here.
const (
	ResponseModeQuery    = "query"
	ResponseModeJWT      = "jwt"
	ResponseModeQueryJWT = "query.jwt"
)

// ResponseModes are the response modes the authorization endpoint accepts, as discovery's
// response_modes_supported lists them.
var ResponseModes = []string{ResponseModeQuery, ResponseModeJWT, ResponseModeQueryJWT}

// JARMLifetime is how long a JARM response JWT is valid (its exp): JARM 2.1 recommends at most
// 10 minutes; the browser delivers the response within seconds of the redirect.
const JARMLifetime = 5 * time.Minute

// validResponseMode reports whether mode is one the authorization endpoint accepts ("" is
// query).
func validResponseMode(mode string) bool { return mode == "" || slices.Contains(ResponseModes, mode) }

// isJARM reports whether a (valid) response mode asks for a signed authorization response.
func isJARM(mode string) bool { return mode == ResponseModeJWT || mode == ResponseModeQueryJWT }

// FAPI2ResponseAlgs are the algorithms a FAPI 2.0 client's signed responses (JARM, RFC 9701)
// may use: FAPI 2.0 Security Profile (Final) 5.4 allows PS256, ES256 and EdDSA; the keys offer
// PS256 and ES256.
var FAPI2ResponseAlgs = []string{"PS256", "ES256"}

// signedResponseAlg is the algorithm of a signed response whose client metadata is set: set
// itself, else the client's id_token algorithm, which is RS256 (the default of JARM 3 and
// RFC 9701 6) unless the client chose another. So a FAPI 2.0 client never gets RS256 (FAPI 2.0
// Security Profile (Final) 5.4; CheckProfile holds its id_token to PS256 or ES256), and the
// default is always an algorithm the deployment keeps keys for (checked at registration).
func (c *Client) signedResponseAlg(set string) string {
	switch {
	case set != "":
		return set
	case c.IDTokenSignedResponseAlg != "":
		return c.IDTokenSignedResponseAlg
	}
	return DefaultIDTokenAlg
}

// AuthorizationResponseAlg is the algorithm of the client's JARM responses
// (authorization_signed_response_alg, JARM 3, or its default).
func (c *Client) AuthorizationResponseAlg() string {
	return c.signedResponseAlg(c.AuthorizationSignedResponseAlg)
}

// IntrospectionResponseAlg is the algorithm of the client's JWT introspection responses
// (introspection_signed_response_alg, RFC 9701 6, or its default).
func (c *Client) IntrospectionResponseAlg() string {
	return c.signedResponseAlg(c.IntrospectionSignedResponseAlg)
}

// authorizationResponse is the one place an authorization response for a client's redirect
// URI is made, success or error: params (code and state, or error, error_description and
// state) go in the query with the issuer (RFC 9207 2), or, when the request asked for a JWT
// response mode, are signed into the one response parameter (JARM 2.1, 2.3.1; FAPI 2.0
// Message Signing (Final) 5.4): a JWT with iss, aud (the client_id), exp and iat besides
// them, signed with the id_token keys in the client's AuthorizationResponseAlg. A failure to
// sign is an *Error (503 when the key service may recover).
func (s *Service) authorizationResponse(ctx context.Context, c *Client, redirectURI, mode string, params url.Values) (*Redirect, error) {
	if !isJARM(mode) {
		params.Set("iss", s.Issuer)
		return &Redirect{URI: redirectURI, Params: params}, nil
	}
	if s.Signer == nil {
		return nil, ServerError(fmt.Errorf("a JARM response was asked of a service without a signer"))
	}
	now := s.now()
	claims := jwt.MapClaims{"iss": s.Issuer, "aud": c.ID, "iat": now.Unix(), "exp": now.Add(JARMLifetime).Unix()}
	for k := range params {
		claims[k] = params.Get(k)
	}
	j, err := s.Signer.SignJWT(ctx, c.AuthorizationResponseAlg(), claims)
	if err != nil {
		return nil, AsError(fmt.Errorf("sign the authorization response: %w", err))
	}
	return &Redirect{URI: redirectURI, Params: url.Values{"response": {j}}}, nil
}

// ErrNoSignedResponses answers a request for a signed response that this deployment of the
// endpoint cannot sign (its function has no key backend): 406, the content negotiation's
// failure (RFC 9110 15.5.7), with an RFC 6749 error body; nothing is written.
var ErrNoSignedResponses = &Error{Code: ErrCodeInvalidRequest, Description: "signed responses are not available at this endpoint", Status: 406}

// SignIntrospection signs an introspection response for the client that asked (RFC 9701 5):
// a JWT with typ token-introspection+jwt, iss, aud (the client_id), iat, and the response
// itself as the token_introspection claim, signed with the id_token keys in the client's
// IntrospectionResponseAlg. The token's own claims stay inside token_introspection, so the
// JWT cannot pass for an access token (RFC 9701 5, 8.1).
func (s *Service) SignIntrospection(ctx context.Context, c *Client, response any) (string, error) {
	if s.Signer == nil {
		return "", ErrNoSignedResponses
	}
	claims := jwt.MapClaims{"iss": s.Issuer, "aud": c.ID, "iat": s.now().Unix(), "token_introspection": response}
	j, err := s.Signer.SignJWTWithType(ctx, c.IntrospectionResponseAlg(), JWTTypeIntrospection, claims)
	if err != nil {
		return "", AsError(fmt.Errorf("sign the introspection response: %w", err))
	}
	return j, nil
}
