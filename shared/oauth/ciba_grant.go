package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// What package ciba (the backchannel authentication endpoint and the device's decision) needs
// of the token domain: the auth_req_id, the authorization_details check the authorization
// endpoint makes, the grant an approval issues (as Approve builds it), and the verification of
// a signed authentication request (CIBA Core 7.1.1) with the client's registered keys.

// CIBA Core 13's error codes of the backchannel authentication endpoint that OAuth has not.
const (
	ErrCodeInvalidBindingMessage = "invalid_binding_message"
	ErrCodeExpiredLoginHintToken = "expired_login_hint_token"
)

// InvalidBindingMessage is invalid_binding_message (CIBA Core 13): the binding_message is too
// long, not printable text, or carries markup.
func InvalidBindingMessage(format string, args ...any) *Error {
	return newError(ErrCodeInvalidBindingMessage, http.StatusBadRequest, format, args...)
}

// ExpiredLoginHintToken is expired_login_hint_token (CIBA Core 13).
func ExpiredLoginHintToken(format string, args ...any) *Error {
	return newError(ErrCodeExpiredLoginHintToken, http.StatusBadRequest, format, args...)
}

// NewAuthReqID returns a new auth_req_id (CIBA Core 7.3): 256 random bits after
// PrefixAuthReqID and this deployment's home, so the poll and the decision reach the request's
// home wherever they land.
func (s *Service) NewAuthReqID() string { return NewSecret(s.homePrefix(PrefixAuthReqID)) }

// BackchannelAuthorizationDetails validates a CIBA request's authorization_details exactly as
// the authorization endpoint does (the client's types, the deployment's schemas, rar.MaxBytes)
// and returns them compacted; empty raw is none.
func (s *Service) BackchannelAuthorizationDetails(c *Client, raw string) (json.RawMessage, error) {
	d, err := s.authorizationDetails(c, raw)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// AuditLogger is where the token domain's security events go (Audit, or Log without one):
// the use cases over it (package ciba) write theirs there too, with WriteAudit.
func (s *Service) AuditLogger() *slog.Logger { return s.auditLog() }

// BackchannelGrant is the grant an approval of r by u issues, built as Approve builds a code's
// grant: the request's scopes and authorization_details, the user's claims those scopes
// release, the device's authentication (amr, auth_time), the payment evidence, the grant's
// lifetime. A request holding a payment is approved only with evidence over its details
// (checkPaymentLink): otherwise an error wrapping ErrPaymentNotLinked, and nothing is built.
func (s *Service) BackchannelGrant(r *BackchannelRequest, u *User, amr []string, authTime time.Time, evidence *PaymentEvidence) (*Grant, error) {
	if err := checkPaymentLink(r.AuthorizationDetails, evidence); err != nil {
		return nil, err
	}
	now := s.now()
	return &Grant{
		ID: NewID(PrefixGrant), ClientID: r.ClientID, UID: u.UID, Scopes: r.Scopes,
		CompanyProfileID: u.CompanyProfileID, CompanyUserID: u.CompanyUserID,
		AuthTime: authTime, AMR: slices.Clone(amr), Claims: u.Claims.Only(r.Scopes),
		AuthorizationDetails: r.AuthorizationDetails, PaymentEvidence: evidence,
		CreatedAt: now, ExpiresAt: now.Add(s.Lifetimes.Grant),
	}, nil
}

// backchannelParamNames are the parameters a signed authentication request may carry (CIBA
// Core 7.1); the others (iss, aud, exp, iat, nbf, jti and unknown ones) are not parameters.
var backchannelParamNames = []string{
	"scope", "client_notification_token", "acr_values", "login_hint_token", "id_token_hint",
	"login_hint", "binding_message", "user_code", "requested_expiry", "authorization_details",
}

// backchannelRequestClaims are the claims of a signed authentication request checked here.
type backchannelRequestClaims struct {
	Iss string          `json:"iss"`
	Aud json.RawMessage `json:"aud"`
	Exp *float64        `json:"exp"`
	Iat *float64        `json:"iat"`
	Nbf *float64        `json:"nbf"`
	JTI string          `json:"jti"`
}

// VerifyBackchannelRequest verifies a signed authentication request (CIBA Core 7.1.1, the
// request parameter) of the authenticated client c and returns its parameters, which are then
// the request's only ones, and its jti as a one-time value for the caller to record once the
// request has passed every other check (Record). Each failure is invalid_request (CIBA Core 13
// has no invalid_request_object): signed with the client's registered alg
// (backchannel_authentication_request_signing_alg) or else PS256 or ES256, by a key the client
// registered; iss the client_id; aud the issuer; exp, iat, nbf and jti present; nbf at most
// 60 minutes old and exp at most 60 minutes after it (FAPI-CIBA 5.2.2), exp in the future;
// no request claim inside.
func (s *Service) VerifyBackchannelRequest(ctx context.Context, c *Client, raw string) (url.Values, OneTime, error) {
	bad := func(format string, a ...any) (url.Values, OneTime, error) {
		return nil, OneTime{}, InvalidRequest("the signed authentication request "+format, a...)
	}
	if len(raw) > MaxRequestObjectBytes {
		return bad("may be at most %d bytes", MaxRequestObjectBytes)
	}
	if strings.Count(raw, ".") != 2 {
		return bad("must be a compact JWS (encrypted requests are not supported)")
	}
	if !c.UsesPrivateKeyJWT() {
		return bad("cannot be verified: the client registered no keys (private_key_jwt and jwks)")
	}
	algs := requestObjectJOSEAlgs
	if a := c.BackchannelAuthenticationRequestSigningAlg; a != "" {
		algs = []jose.SignatureAlgorithm{jose.SignatureAlgorithm(a)}
	}
	jws, err := jose.ParseSigned(raw, algs)
	if err != nil || len(jws.Signatures) != 1 {
		if headerAlg(raw) == "none" {
			return bad("must be signed (alg none is refused)")
		}
		return bad("must be a JWS signed with %s", algNames(algs))
	}
	payload, err := s.verifyClientJWS(ctx, c, jws)
	if errors.Is(err, errNotSignedByClient) {
		return bad("is not signed by a key the client registered")
	}
	if err != nil {
		return nil, OneTime{}, InvalidRequest("%s", err.Error())
	}
	var cl backchannelRequestClaims
	var all map[string]json.RawMessage
	if json.Unmarshal(payload, &cl) != nil || json.Unmarshal(payload, &all) != nil {
		return bad("has claims that are not a JSON object of the right types")
	}
	now := s.now()
	switch {
	case cl.Iss != c.ID:
		return bad("must have iss the client_id")
	case !s.requestObjectForUs(cl.Aud):
		return bad("must have aud the issuer %s", s.Issuer)
	case cl.Exp == nil || cl.Iat == nil || cl.Nbf == nil || cl.JTI == "":
		return bad("must carry exp, iat, nbf and jti (CIBA Core 7.1.1)")
	case len(cl.JTI) > 256:
		return bad("has a jti longer than 256 characters")
	}
	if problem := signedRequestWindow(*cl.Nbf, *cl.Exp, now); problem != "" {
		return bad("%s", problem)
	}
	v, problem := signedRequestParams(all, backchannelParamNames, "requested_expiry")
	if problem != "" {
		return bad("%s", problem)
	}
	exp := time.Unix(int64(*cl.Exp), 0)
	once := OneTime{
		key:     "bc_request:" + c.ID + ":" + cl.JTI,
		expires: exp.Add(RequestObjectClockSkew),
		reused:  InvalidRequest("the signed authentication request was already used (its jti is not new)"),
	}
	return v, once, nil
}

func algNames(algs []jose.SignatureAlgorithm) string {
	names := make([]string, len(algs))
	for i, a := range algs {
		names[i] = string(a)
	}
	return strings.Join(names, " or ")
}

// ValidBackchannelSettings checks a client's CIBA registration (CIBA Core 4): the delivery
// mode poll or ping ("" is poll; push is not offered); a ping client's
// backchannel_client_notification_endpoint, an absolute https URL without user information
// or fragment (the rules of backchannel_logout_uri; where it resolves to is checked when it is
// called), and no endpoint for a poll client; a request signing alg of RequestObjectAlgs, which
// needs the client's keys (private_key_jwt).
func (c *Client) ValidBackchannelSettings() error {
	switch c.BackchannelTokenDeliveryMode {
	case "", CIBAModePoll:
		if c.BackchannelClientNotificationEndpoint != "" {
			return errors.New("backchannel_client_notification_endpoint is only for the ping delivery mode")
		}
	case CIBAModePing:
		if c.BackchannelClientNotificationEndpoint == "" {
			return errors.New("the ping delivery mode needs a backchannel_client_notification_endpoint")
		}
		if err := ValidBackchannelLogoutURI(c.BackchannelClientNotificationEndpoint); err != nil {
			return errors.New(strings.Replace(err.Error(), "backchannel_logout_uri", "backchannel_client_notification_endpoint", 1))
		}
	default:
		return errors.New("backchannel_token_delivery_mode must be poll or ping (push is not offered)")
	}
	if a := c.BackchannelAuthenticationRequestSigningAlg; a != "" {
		if !slices.Contains(RequestObjectAlgs, a) {
			return errors.New("backchannel_authentication_request_signing_alg must be PS256 or ES256")
		}
		if !c.UsesPrivateKeyJWT() {
			return errors.New("backchannel_authentication_request_signing_alg needs the client's public keys: register it with private_key_jwt and its jwks")
		}
	}
	return nil
}
