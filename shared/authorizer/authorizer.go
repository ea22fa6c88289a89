// Package authorizer decides whether a request may reach a protected route of the bank API:
// it reads the bearer token (RFC 6750), validates it with one store read, checks that the
// token is bound to the presented client certificate when it is bound at all (RFC 8705),
// enforces the route's scopes, and hands the identity of the user on. The API Gateway Lambda
// authorizer and the local server run this same logic.
package authorizer

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"log/slog"
	"strings"

	"github.com/acmebank/authserver/shared/oauth"
)

// TokenValidator is what the authorizer needs of the token domain: one read that validates an
// access token and its certificate or DPoP binding (oauth.Service implements it; a DPoP proof
// adds, after the read, the one write that records its jti).
type TokenValidator interface {
	ValidatePresented(ctx context.Context, p oauth.Presentation) (oauth.Token, error)
}

var _ TokenValidator = (*oauth.Service)(nil)

// Authorizer is the decision logic, free of any transport.
type Authorizer struct {
	Tokens TokenValidator
	Routes Routes
	Log    *slog.Logger
	// Origins are the public origins the bank API is served under (AUTH_BASE_URL, the connect
	// host): a DPoP proof's htu names one of them with the route's path.
	Origins []string
	// ClientRoutes are the route keys that accept a token without a user (client_credentials,
	// oauth.Grant.HasNoUser) besides users' tokens (AUTH_CLIENT_TOKEN_ROUTES); none by default.
	// On every other route such a token is refused as insufficient_scope.
	ClientRoutes ClientRoutes
}

// New returns an authorizer over tokens with the route table routes.
func New(tokens TokenValidator, routes Routes, log *slog.Logger) *Authorizer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Authorizer{Tokens: tokens, Routes: routes, Log: log}
}

// Request is what one decision looks at, whichever transport it came by.
type Request struct {
	// RouteKey is the route as API Gateway names it: "GET /invoicing/invoices/{invoiceId}".
	RouteKey string
	// Authorization is the raw Authorization header value.
	Authorization string
	// CertThumbprint is the base64url SHA-256 of the mutual-TLS client certificate, or empty.
	CertThumbprint string
	// DPoPProofs are the request's DPoP headers (RFC 9449 7: one is expected with the DPoP
	// scheme); Method and URL what its proof must name (htm, htu). URL is the URL the client
	// called, or empty: the proof may then name the route's path under any of Origins.
	DPoPProofs []string
	Method     string
	Path       string
	URL        string
	// PathParameters are the route's path parameters ({invoiceId}), each checked by
	// CheckPathParameter before anything else.
	PathParameters map[string]string
}

// dpop is the proof of req for the token domain.
func (a *Authorizer) dpop(req Request) oauth.DPoPRequest {
	d := oauth.DPoPRequest{Method: req.Method, Repeated: len(req.DPoPProofs) > 1}
	if len(req.DPoPProofs) == 1 {
		d.Proof = req.DPoPProofs[0]
	}
	if req.URL != "" {
		d.URLs = append(d.URLs, req.URL)
	}
	for _, o := range a.Origins {
		d.URLs = append(d.URLs, o+req.Path)
	}
	return d
}

// Identity is what an accepted request hands to the backend. For a client-only token (on a
// route of ClientRoutes) UID and the company fields are empty: only ClientID and Scopes.
type Identity struct {
	UID              string       `json:"uid"`
	CompanyProfileID string       `json:"companyProfileId"`
	CompanyUserID    string       `json:"companyUserId"`
	ClientID         string       `json:"client_id"`
	Scopes           oauth.Scopes `json:"-"`
	// Payment is, for a payment grant's token (accepted once), its authorization_details as
	// base64url (no padding) of their JSON, at most MaxPaymentHeader bytes: the backend
	// receives it in X-Auth-Payment. Empty for any other token.
	Payment string `json:"payment,omitempty"`
}

// MaxPaymentHeader bounds Identity.Payment. An HTTP API allows 10240 bytes for the request
// line and every header value together (API Gateway's "Quotas for configuring and running an
// HTTP API", not adjustable), and the authorizer's context becomes headers of the
// integration's request: 4096 leaves room for the rest. A payment whose details encode longer
// is refused before its grant is consumed.
const MaxPaymentHeader = 4096

// paymentHeader is the X-Auth-Payment value of a payment token's details.
func paymentHeader(details []byte) string {
	return base64.RawURLEncoding.EncodeToString(details)
}

// Context is the identity as the authorizer's simple response passes it to the integration
// ($context.authorizer.uid and so on in the template's request parameter mappings).
func (id Identity) Context() map[string]any {
	return map[string]any{
		"uid":              id.UID,
		"companyProfileId": id.CompanyProfileID,
		"companyUserId":    id.CompanyUserID,
		"client_id":        id.ClientID,
		"scope":            id.Scopes.String(),
		"payment":          id.Payment,
	}
}

// ErrNoToken is a request with no bearer credentials at all: no Authorization header, or
// another scheme. RFC 6750 3.1 wants such an answer to carry no error code, so it is told
// apart from a token that is there and wrong.
var ErrNoToken = &oauth.Error{Code: oauth.ErrCodeInvalidToken, Description: "the request carries no bearer access token", Status: 401}

// maxTokenLength bounds what is hashed and looked up; our tokens are 46 characters.
const maxTokenLength = 1024

// AccessToken extracts the token of an Authorization header in the Bearer (RFC 6750 2.1) or
// the DPoP scheme (RFC 9449 7.1), and reports which; the rules of BearerToken apply to both.
func AccessToken(authorization string) (token string, dpop bool, err error) {
	scheme, rest, _ := strings.Cut(strings.TrimSpace(authorization), " ")
	if strings.EqualFold(scheme, oauth.TokenTypeDPoP) {
		token, err = BearerToken("Bearer " + rest)
		if err == ErrNoToken {
			err = oauth.InvalidRequest("the DPoP credentials are empty")
		}
		return token, true, err
	}
	token, err = BearerToken(authorization)
	return token, false, err
}

// BearerToken extracts the token of an Authorization header (RFC 6750 2.1): the scheme is
// case-insensitive, then one or more spaces, then a b64token. No header, or another scheme, is
// ErrNoToken; a Bearer header that is empty, has more than one token or characters outside
// b64token is invalid_request.
func BearerToken(authorization string) (string, error) {
	h := strings.TrimSpace(authorization)
	if h == "" {
		return "", ErrNoToken
	}
	scheme, rest, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", ErrNoToken
	}
	token := strings.TrimLeft(rest, " ")
	if token == "" {
		return "", oauth.InvalidRequest("the Bearer credentials are empty")
	}
	if len(token) > maxTokenLength || !isB64Token(token) {
		return "", oauth.InvalidRequest("the Bearer credentials are malformed")
	}
	return token, nil
}

// isB64Token checks RFC 6750's b64token: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isB64Token(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9',
			c == '-', c == '.', c == '_', c == '~', c == '+', c == '/':
		default:
			return false
		}
	}
	return true
}

// Authorize decides on one request: the identity when its path parameters are acceptable
// (CheckPathParameter), the token is valid, bound to the presented certificate if bound at
// all, and holds every scope the route needs; otherwise an *oauth.Error: ErrNoToken,
// invalid_request (malformed header, a path parameter refused), invalid_token (unknown,
// expired, revoked, refresh token, wrong or missing certificate), insufficient_scope, or a
// 5xx when the store failed.
func (a *Authorizer) Authorize(ctx context.Context, req Request) (Identity, error) {
	for _, v := range req.PathParameters {
		if err := CheckPathParameter(v); err != nil {
			return Identity{}, err
		}
	}
	token, dpop, err := AccessToken(req.Authorization)
	if err != nil {
		return Identity{}, err
	}
	// The route's scopes are checked inside the validation, before a DPoP proof's jti is
	// recorded: a request this route refuses writes nothing.
	var refused error
	allow := func(t oauth.Token) error {
		required, ok := a.Routes.Required(req.RouteKey)
		if !ok {
			a.Log.ErrorContext(ctx, "route has no entry in the scope table; denied", slog.String("route", req.RouteKey))
			refused = oauth.InsufficientScope("this route accepts no access token")
		} else if t.Grant.HasNoUser() && !a.ClientRoutes[req.RouteKey] {
			refused = oauth.InsufficientScope("this route needs a user's access token: it does not accept client-only tokens")
		} else if !t.Scopes.Contains(required) {
			refused = &ScopeError{Err: oauth.InsufficientScope("the access token lacks a scope this route needs"), Required: required}
		} else if t.Grant.IsPayment() && len(paymentHeader(t.Details())) > MaxPaymentHeader {
			a.Log.ErrorContext(ctx, "payment details exceed the header bound; refused", slog.String("grant_id", t.Grant.ID))
			refused = oauth.InvalidToken("the payment's authorization_details are too large to pass to the bank API")
		}
		return refused
	}
	// Spend: a payment grant's token is accepted here once (oauth payment.go).
	t, err := a.Tokens.ValidatePresented(ctx, oauth.Presentation{Token: token, DPoP: dpop, CertThumbprint: req.CertThumbprint,
		Proof: a.dpop(req), Allow: allow, Spend: true})
	if refused != nil {
		return Identity{}, refused
	}
	if err != nil {
		return Identity{}, DPoPAware(err, dpop)
	}
	g := t.Grant
	id := Identity{UID: g.UID, CompanyProfileID: g.CompanyProfileID, CompanyUserID: g.CompanyUserID, ClientID: g.ClientID, Scopes: t.Scopes}
	if g.IsPayment() {
		id.Payment = paymentHeader(t.Details())
	}
	return id, nil
}

// DPoPError is a refusal of a request that presented its token with the DPoP scheme, or whose
// DPoP proof failed: its challenge is in the DPoP scheme (RFC 9449 7.1), and a bad proof is
// 401 at a resource, where the token endpoint answers it with 400.
type DPoPError struct {
	Err *oauth.Error
}

func (e *DPoPError) Error() string { return e.Err.Error() }

// Unwrap exposes the protocol error, so oauth.AsError and errors.As see it.
func (e *DPoPError) Unwrap() error { return e.Err }

// DPoPAware marks the errors of a DPoP presentation, and every DPoP proof error, as
// DPoPError.
func DPoPAware(err error, dpop bool) error {
	e := oauth.AsError(err)
	if e.Code == oauth.ErrCodeInvalidDPoPProof {
		e = &oauth.Error{Code: e.Code, Description: e.Description, Status: 401, Cause: e.Cause}
		return &DPoPError{Err: e}
	}
	if dpop && e.Status < 500 {
		return &DPoPError{Err: e}
	}
	return e
}

// ScopeError is insufficient_scope with the scopes the route needs, which RFC 6750 3.1 lets
// the challenge name.
type ScopeError struct {
	Err      *oauth.Error
	Required oauth.Scopes
}

func (e *ScopeError) Error() string { return e.Err.Error() }

// Unwrap exposes the protocol error, so oauth.AsError and errors.As see it.
func (e *ScopeError) Unwrap() error { return e.Err }

// Realm is the protection space named in our bearer challenges.
const Realm = "acmebank"

// Challenge is the WWW-Authenticate value (RFC 6750 3, RFC 9449 7.1) answering err: no error
// code when the request carried no token (both schemes offered then), error and
// error_description otherwise, in the scheme the token came with, and the needed scopes on
// insufficient_scope. Failures of the server itself get no challenge (empty string).
func Challenge(err error) string {
	if err == ErrNoToken {
		return `Bearer realm="` + Realm + `", DPoP algs="` + strings.Join(oauth.DPoPAlgs, " ") + `"`
	}
	e := oauth.AsError(err)
	switch e.Code {
	case oauth.ErrCodeInvalidToken, oauth.ErrCodeInvalidRequest, oauth.ErrCodeInsufficientScope, oauth.ErrCodeInvalidDPoPProof:
	default:
		return ""
	}
	scheme := `Bearer realm="` + Realm + `"`
	var de *DPoPError
	if errors.As(err, &de) {
		scheme = `DPoP algs="` + strings.Join(oauth.DPoPAlgs, " ") + `"`
	}
	// Descriptions are already limited to RFC 6749's characters (no quote, no backslash).
	c := scheme + `, error="` + e.Code + `", error_description="` + e.Description + `"`
	var se *ScopeError
	if errors.As(err, &se) && len(se.Required) > 0 {
		c += `, scope="` + se.Required.String() + `"`
	}
	return c
}

// CertThumbprintPEM is the RFC 8705 x5t#S256 of a PEM certificate as API Gateway passes it
// in requestContext.authentication.clientCert.clientCertPem. API Gateway has verified the
// certificate against the truststore, and only the exact DER bytes a token was bound to can
// match its binding, so the DER is hashed without being parsed again (that would double the
// authorizer's CPU per bound request). No PEM certificate block gives "", and a bound token is
// refused.
func CertThumbprintPEM(certPEM string) string {
	if certPEM == "" {
		return ""
	}
	block, _ := pem.Decode([]byte(certPEM))
	if block == nil || block.Type != "CERTIFICATE" || len(block.Bytes) == 0 {
		return ""
	}
	sum := sha256.Sum256(block.Bytes)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}
