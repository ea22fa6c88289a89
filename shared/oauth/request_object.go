package oauth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Signed request objects (JAR, RFC 9101) at the PAR endpoint: FAPI 2.0 Message Signing (Final)
// 5.3, signed authorization requests. The client sends its authorization request as the claims
// of a JWT it signs, in the request parameter of its pushed authorization request (RFC 9126 3),
// so the server holds a signed record of what the client asked for (non-repudiation, NR1 of
// Message Signing 5.2; NR2 follows, as the authorization endpoint then takes only the
// request_uri). The authorization endpoint itself keeps refusing request objects
// (validateAuthorize): by value they would travel through the browser, and PAR is the one way in.

// RequestObjectAlgs are the algorithms a request object may be signed with
// (request_object_signing_alg_values_supported): the ones FAPI 2.0 Security Profile (Final)
// 5.4.1 allows for keys a client can register here (RSA for PS256, EC P-256 for ES256;
// ValidClientJWKS accepts no Ed25519 key, so no EdDSA).
var RequestObjectAlgs = []string{"PS256", "ES256"}

var requestObjectJOSEAlgs = []jose.SignatureAlgorithm{jose.PS256, jose.ES256}

// RequestObjectType is the typ of a request object (RFC 9101 10.8, explicit typing; FAPI 2.0
// Message Signing (Final) 5.3.1-5 has the server accept it).
const RequestObjectType = "oauth-authz-req+jwt"

const (
	// MaxRequestObjectAge bounds how far in the past a request object's nbf may be: FAPI 2.0
	// Message Signing (Final) 5.3.1-3, "no longer than 60 minutes in the past".
	MaxRequestObjectAge = 60 * time.Minute
	// MaxRequestObjectLifetime bounds exp - nbf: FAPI 2.0 Message Signing (Final) 5.3.1-4,
	// "a lifetime of no longer than 60 minutes after the nbf claim".
	MaxRequestObjectLifetime = 60 * time.Minute
	// RequestObjectClockSkew is how far in the future nbf may be, for clients whose clocks run
	// ahead: FAPI 2.0 Security Profile (Final) 5.3.2.1 has the server accept JWTs whose nbf is
	// up to 10 seconds in the future (as DPoPClockSkew does for a proof's iat).
	RequestObjectClockSkew = 10 * time.Second
	// MaxRequestObjectBytes bounds the request parameter before anything is parsed. The
	// parameters it carries are kept as the pushed request, under the same per-parameter
	// limits and MaxAuthRequestBytes as any other (limits.go); the object itself is not kept.
	MaxRequestObjectBytes = MaxAuthRequestBytes
)

// ErrCodeInvalidRequestObject is the error of a request object that cannot be used (OIDC Core
// 3.1.2.6, RFC 9101 6.2 and 6.3).
const ErrCodeInvalidRequestObject = "invalid_request_object"

// InvalidRequestObject is invalid_request_object: the request object is malformed, not signed
// by the client, or fails a check of its claims.
func InvalidRequestObject(format string, args ...any) *Error {
	return newError(ErrCodeInvalidRequestObject, 400, format, args...)
}

// ValidRequestObjectSetting checks a client's require_signed_request_object at registration: a
// client that must sign its requests needs registered keys to verify them with, which here is
// a private_key_jwt client's.
func (c *Client) ValidRequestObjectSetting() error {
	if c.RequireSignedRequestObject && !c.UsesPrivateKeyJWT() {
		return errors.New("require_signed_request_object needs the client's public keys: register it with private_key_jwt and its jwks")
	}
	return nil
}

// requestObjectClaims are the claims of a request object this server checks; the others are
// the authorization request's parameters (requestObjectParams).
type requestObjectClaims struct {
	Iss      string          `json:"iss"`
	Aud      json.RawMessage `json:"aud"`
	ClientID *string         `json:"client_id"`
	Exp      *float64        `json:"exp"`
	Nbf      *float64        `json:"nbf"`
}

// verifyRequestObject verifies the signed request object raw of the authenticated client c and
// returns the authorization request's parameters it carries, which are then the request's only
// parameters (RFC 9101 6.3; FAPI 2.0 Message Signing (Final) 5.3.2-1 has the client send them
// all in the object). The rules, each an invalid_request_object with its reason:
//   - a compact JWS (an encrypted object, RFC 9101 6.1, is not supported; alg none is refused,
//     FAPI 2.0 Message Signing 5.3.1-1 requires signed objects) of RequestObjectAlgs;
//   - typ, when present, RequestObjectType (RFC 9101 10.8: a JWT of another kind the client
//     signed, such as a client assertion, cannot be passed off as a request);
//   - signed by a key the client registered (clientKeys: RFC 9101 6.2);
//   - iss the client_id (RFC 9101 4, 10.2) and a client_id claim that is the authenticated
//     client's (RFC 9101 5 and 10.7: the two client ids must match);
//   - aud the issuer, or an array containing it (FAPI 2.0 Message Signing (Final) 5.3.1-2);
//   - nbf present, at most MaxRequestObjectAge in the past and RequestObjectClockSkew in the
//     future (5.3.1-3); exp present, in the future and at most MaxRequestObjectLifetime after
//     nbf (5.3.1-4);
//   - no request or request_uri claim (RFC 9101 4), and the parameters this server reads given
//     as strings (max_age may be a number, OIDC Core 6.1).
//
// The jti is not recorded: the object arrives only in a client-authenticated PAR request
// (RFC 9126 2.1), whose client assertion and DPoP proof are one-time already, so a replayed
// object can come only from the client that signed it, and gets a request_uri of its own as a
// new push would. Neither RFC 9101 nor FAPI 2.0 Message Signing asks for replay detection of
// request objects, and recording one would cost every signed push a conditional write.
func (s *Service) verifyRequestObject(ctx context.Context, c *Client, raw string) (url.Values, error) {
	if len(raw) > MaxRequestObjectBytes {
		return nil, InvalidRequestObject("the request object may be at most %d bytes", MaxRequestObjectBytes)
	}
	switch strings.Count(raw, ".") {
	case 2:
	case 4:
		return nil, InvalidRequestObject("encrypted request objects are not supported: send a signed one (JWS)")
	default:
		return nil, InvalidRequestObject("the request object is not a compact JWS")
	}
	if !c.UsesPrivateKeyJWT() {
		return nil, InvalidRequestObject("this client registered no keys to verify a request object with (private_key_jwt and jwks)")
	}
	jws, err := jose.ParseSigned(raw, requestObjectJOSEAlgs)
	if err != nil || len(jws.Signatures) != 1 {
		if headerAlg(raw) == "none" {
			return nil, InvalidRequestObject("unsigned request objects (alg none) are refused: sign it with PS256 or ES256")
		}
		return nil, InvalidRequestObject("the request object must be a compact JWS signed with %s", strings.Join(RequestObjectAlgs, " or "))
	}
	h := jws.Signatures[0].Protected
	if typ, ok := h.ExtraHeaders[jose.HeaderType].(string); h.ExtraHeaders[jose.HeaderType] != nil && (!ok || !isRequestObjectType(typ)) {
		return nil, InvalidRequestObject("the request object's typ must be %s", RequestObjectType)
	}
	payload, err := s.verifyClientJWS(ctx, c, jws)
	if errors.Is(err, errNotSignedByClient) {
		return nil, InvalidRequestObject("the request object is not signed by a key the client registered")
	}
	if err != nil {
		return nil, InvalidRequestObject("%s", err.Error())
	}
	var cl requestObjectClaims
	var all map[string]json.RawMessage
	if json.Unmarshal(payload, &cl) != nil || json.Unmarshal(payload, &all) != nil {
		return nil, InvalidRequestObject("the request object's claims are not a JSON object of the right types")
	}
	now := s.now()
	switch {
	case cl.Iss != c.ID:
		return nil, InvalidRequestObject("the request object's iss must be the client_id")
	case cl.ClientID == nil || *cl.ClientID != c.ID:
		return nil, InvalidRequestObject("the request object's client_id claim must be the authenticated client's client_id")
	case !s.requestObjectForUs(cl.Aud):
		return nil, InvalidRequestObject("the request object's aud must be the issuer %s", s.Issuer)
	case cl.Nbf == nil:
		return nil, InvalidRequestObject("the request object needs an nbf (FAPI 2.0 Message Signing)")
	case cl.Exp == nil:
		return nil, InvalidRequestObject("the request object needs an exp (FAPI 2.0 Message Signing)")
	}
	if problem := signedRequestWindow(*cl.Nbf, *cl.Exp, now); problem != "" {
		return nil, InvalidRequestObject("the request object %s", problem)
	}
	v, problem := signedRequestParams(all, authorizeParamNames, "max_age")
	if problem != "" {
		return nil, InvalidRequestObject("a request object %s", problem)
	}
	return v, nil
}

// signedRequestWindow is what is wrong with a signed request's nbf and exp (seconds since the
// epoch) at now, "" when nothing: a request object (FAPI 2.0 Message Signing (Final) 5.3.1)
// and a signed authentication request (CIBA Core 7.1.1) are held to the same window. The text
// follows "the request object" or "the signed authentication request".
func signedRequestWindow(nbfSec, expSec float64, now time.Time) string {
	nbf, exp := time.Unix(int64(nbfSec), 0), time.Unix(int64(expSec), 0)
	switch {
	case nbf.After(now.Add(RequestObjectClockSkew)):
		return fmt.Sprintf("is not valid yet: its nbf is more than %v ahead of the server's time", RequestObjectClockSkew)
	case nbf.Before(now.Add(-MaxRequestObjectAge)):
		return "has an nbf more than 60 minutes in the past"
	case !now.Before(exp):
		return "has expired"
	case exp.Sub(nbf) > MaxRequestObjectLifetime:
		return "has an exp more than 60 minutes after its nbf"
	}
	return ""
}

// signedRequestParams turns a signed request's claims into the request's parameters: the
// ones the endpoint reads (names) must be strings, or for the one numeric parameter (max_age
// of an authorization request, requested_expiry of a CIBA one) an integer (its own check
// bounds it), and
// authorization_details is taken as its JSON text; request and request_uri may not be claims
// (RFC 9101 4). The rest (iss, aud, exp, nbf, iat, jti and unknown parameters) are not
// parameters the endpoint reads. A problem is returned as text following "a request object"
// or "the signed authentication request".
func signedRequestParams(claims map[string]json.RawMessage, names []string, numeric string) (url.Values, string) {
	v := url.Values{}
	for _, name := range []string{"request", "request_uri"} {
		if _, ok := claims[name]; ok {
			return nil, fmt.Sprintf("may not contain a %s claim", name)
		}
	}
	for _, name := range names {
		raw, ok := claims[name]
		if !ok {
			continue
		}
		if name == "authorization_details" {
			// RFC 9396 3: a JSON array in the object, where a form carries its JSON text;
			// whatever it is, the details' validation judges the text.
			v.Set(name, string(raw))
			continue
		}
		var str string
		if json.Unmarshal(raw, &str) == nil {
			v.Set(name, str)
			continue
		}
		var n int64
		if name == numeric && json.Unmarshal(raw, &n) == nil {
			v.Set(name, strconv.FormatInt(n, 10))
			continue
		}
		return nil, fmt.Sprintf("is refused: its %s claim must be a string", name)
	}
	return v, ""
}

// requestObjectForUs is the rule on a request object's aud: the issuer identifier, as a string
// or in an array (FAPI 2.0 Message Signing (Final) 5.3.1-2). Unlike a client assertion's aud
// (assertionForUs), no endpoint URL stands for the issuer here.
func (s *Service) requestObjectForUs(raw json.RawMessage) bool {
	auds, ok := assertionClaims{Aud: raw}.audiences()
	return ok && slices.Contains(auds, s.Issuer)
}

// isRequestObjectType reports whether typ names RequestObjectType: media types compare
// case-insensitively, and the application/ prefix may be left out (RFC 7515 4.1.9).
func isRequestObjectType(typ string) bool {
	typ = strings.ToLower(typ)
	return strings.TrimPrefix(typ, "application/") == RequestObjectType
}

// headerAlg reads the alg of a compact JWT's header without verifying anything ("" when it is
// unreadable), to name an unsigned object's fault.
func headerAlg(raw string) string {
	head, _, _ := strings.Cut(raw, ".")
	b, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return ""
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if json.Unmarshal(b, &h) != nil {
		return ""
	}
	return h.Alg
}
