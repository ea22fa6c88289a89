package oauth

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// AuthorizeParams are the parameters of an authorization request (RFC 6749 4.1.1, RFC 7636,
// OIDC Core 3.1.2.1), each given at most once.
type AuthorizeParams struct {
	ClientID            string
	RedirectURI         string
	ResponseType        string
	Scope               string
	State               string
	Nonce               string
	CodeChallenge       string
	CodeChallengeMethod string
	Prompt              string
	UILocales           string
	MaxAge              string
	// Request and RequestURI are OIDC request objects (by value, by reference), and
	// ResponseMode the OAuth response mode: read only to refuse what is not supported.
	Request      string
	RequestURI   string
	ResponseMode string
	// DPoPJKT is the thumbprint of the DPoP key the code is to be bound to (RFC 9449 10): the
	// dpop_jkt parameter, or the key of the proof a pushed request came with.
	DPoPJKT string
	// ACRValues are the authentication context classes the client asks for, space-separated
	// (OIDC Core 3.1.2.1); ACRStrong asks for strong customer authentication.
	ACRValues string
	// AuthorizationDetails is the RFC 9396 authorization_details: a JSON array, as the query
	// or form carries it (a request object's claim is turned into the same JSON text).
	AuthorizationDetails string
	// GrantManagementAction and GrantID are Grant Management's grant_management_action and
	// grant_id (grantmanagement.go).
	GrantManagementAction string
	GrantID               string
}

// authorizeParamNames are the parameters that may not be repeated (RFC 6749 3.1).
var authorizeParamNames = []string{"client_id", "redirect_uri", "response_type", "scope", "state", "nonce",
	"code_challenge", "code_challenge_method", "prompt", "ui_locales", "max_age", "request", "request_uri", "response_mode", "dpop_jkt", "acr_values", "authorization_details",
	"grant_management_action", "grant_id"}

// AuthorizeError is a failed authorization request. With Redirect set it goes back to the
// client's (registered) redirect URI as RFC 6749 4.1.2.1 says; without, the client or its
// redirect URI could not be trusted and the user sees an error page.
type AuthorizeError struct {
	Err      *Error
	Redirect *Redirect
	// BadRedirectURI marks an error page caused by the redirect URI (missing, or not
	// registered) rather than by the client.
	BadRedirectURI bool
}

func (e *AuthorizeError) Error() string { return e.Err.Error() }

func (e *AuthorizeError) Unwrap() error { return e.Err }

// Redirect is a response to the client's redirect URI.
type Redirect struct {
	URI    string
	Params url.Values
}

// String renders the redirect URL: the registered URI with the response parameters added to
// its query (RFC 6749 3.1.2: a registered query is kept).
func (r *Redirect) String() string {
	u, err := url.Parse(r.URI)
	if err != nil {
		return r.URI // registered URIs are validated absolute URLs; not reached
	}
	q := u.Query()
	for k, vs := range r.Params {
		for _, v := range vs {
			q.Add(k, v)
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// ParseAuthorizeParams reads the request's parameters from a query or form, refusing repeated
// ones. Repetition of client_id or redirect_uri cannot be answered by redirect.
func ParseAuthorizeParams(v url.Values) (AuthorizeParams, []string) {
	var repeated []string
	for _, n := range authorizeParamNames {
		if len(v[n]) > 1 {
			repeated = append(repeated, n)
		}
	}
	return AuthorizeParams{
		ClientID: v.Get("client_id"), RedirectURI: v.Get("redirect_uri"), ResponseType: v.Get("response_type"),
		Scope: v.Get("scope"), State: v.Get("state"), Nonce: v.Get("nonce"), CodeChallenge: v.Get("code_challenge"),
		CodeChallengeMethod: v.Get("code_challenge_method"), Prompt: v.Get("prompt"), UILocales: v.Get("ui_locales"),
		MaxAge: v.Get("max_age"), Request: v.Get("request"), RequestURI: v.Get("request_uri"), ResponseMode: v.Get("response_mode"),
		DPoPJKT: v.Get("dpop_jkt"), ACRValues: v.Get("acr_values"), AuthorizationDetails: v.Get("authorization_details"),
		GrantManagementAction: v.Get("grant_management_action"), GrantID: v.Get("grant_id"),
	}, repeated
}

// ValidateAuthorize checks an authorization request sent through the browser and returns the
// client and the pending request to store. Errors are *AuthorizeError.
func (s *Service) ValidateAuthorize(ctx context.Context, p AuthorizeParams, repeated []string) (*Client, *AuthRequest, error) {
	return s.validateAuthorize(ctx, p, repeated, viaBrowser)
}

// requestRoute is how an authorization request reached us.
type requestRoute int

const (
	viaBrowser     requestRoute = iota // the authorization endpoint's query
	pushedByClient                     // PAR (RFC 9126): pushed by its authenticated client
)

// validateAuthorize checks an authorization request, sent through the browser or pushed
// (RFC 9126) by its authenticated client.
func (s *Service) validateAuthorize(ctx context.Context, p AuthorizeParams, repeated []string, route requestRoute) (*Client, *AuthRequest, error) {
	pushed := route == pushedByClient
	for _, n := range repeated {
		if n == "client_id" || n == "redirect_uri" {
			return nil, nil, &AuthorizeError{Err: InvalidRequest("the %s parameter is repeated", n), BadRedirectURI: n == "redirect_uri"}
		}
	}
	if p.ClientID == "" {
		return nil, nil, &AuthorizeError{Err: InvalidRequest("the client_id parameter is required")}
	}
	// Parameters over their limits (limits.go) are refused before anything is read or kept; a
	// client_id or redirect_uri over its limit cannot be trusted with a redirect.
	long, tooLong := p.tooLong()
	if tooLong && (long.Name == "client_id" || long.Name == "redirect_uri") {
		return nil, nil, &AuthorizeError{Err: tooLongError(long), BadRedirectURI: long.Name == "redirect_uri"}
	}
	c, err := s.Clients.GetClient(ctx, p.ClientID)
	if errors.Is(err, ErrNotFound) {
		return nil, nil, &AuthorizeError{Err: InvalidRequest("unknown client")}
	}
	if err != nil {
		return nil, nil, &AuthorizeError{Err: AsError(err)}
	}
	redirect := p.RedirectURI
	if redirect == "" && c.IsFAPI2() {
		// FAPI 2.0 5.3.2.2: the redirect_uri is required, even of a client with one.
		return nil, nil, &AuthorizeError{Err: InvalidRequest("the redirect_uri parameter is required of this client (FAPI 2.0)"), BadRedirectURI: true}
	}
	if redirect == "" {
		if len(c.RedirectURIs) != 1 {
			return nil, nil, &AuthorizeError{Err: InvalidRequest("the redirect_uri parameter is required"), BadRedirectURI: true}
		}
		redirect = c.RedirectURIs[0]
	} else if !c.HasRedirectURI(redirect) {
		return nil, nil, &AuthorizeError{Err: InvalidRequest("the redirect_uri is not registered for this client"), BadRedirectURI: true}
	}
	// From here on errors go back to the client's registered redirect URI, signed (JARM) when
	// the request asked for a JWT response mode (JARM 2.1: error responses too), unless the
	// response_mode itself is what is wrong with it.
	mode := p.ResponseMode
	if !validResponseMode(mode) || slices.Contains(repeated, "response_mode") || (tooLong && long.Name == "response_mode") || s.Signer == nil || pushed {
		mode = "" // a refused push is answered in JSON (RFC 9126 2.3): nothing to sign
	}
	fail := func(e *Error) (*Client, *AuthRequest, error) {
		params := url.Values{"error": {e.Code}, "error_description": {e.Description}}
		if p.State != "" && !(tooLong && long.Name == "state") { // an overlong state is not echoed
			params.Set("state", p.State)
		}
		to, err := s.authorizationResponse(ctx, &c, redirect, mode, params)
		if err != nil { // the signature failed: the user sees the error page
			return nil, nil, &AuthorizeError{Err: AsError(err)}
		}
		return nil, nil, &AuthorizeError{Err: e, Redirect: to}
	}
	if len(repeated) > 0 {
		return fail(InvalidRequest("the %s parameter is repeated", repeated[0]))
	}
	if tooLong {
		return fail(tooLongError(long))
	}
	if c.Disabled {
		return fail(UnauthorizedClient("the client is disabled"))
	}
	if !c.AllowsGrantType(GrantTypeAuthorizationCode) {
		// RFC 6749 4.1.2.1: its code could never be exchanged (its grant_types, RFC 7591 2).
		return fail(UnauthorizedClient("this client is not registered for the authorization_code grant"))
	}
	if !pushed && s.RequiresPAR(&c) {
		return fail(InvalidRequest("authorization requests of this client must be pushed (PAR, RFC 9126): send client_id and request_uri"))
	}
	if p.ResponseType == "" && c.IsFAPI2() {
		return fail(InvalidRequest("the response_type parameter is required of this client: response_type=code (FAPI 2.0)"))
	}
	switch p.ResponseType {
	case "", "code":
	default:
		return fail(UnsupportedResponseType("only response_type=code is supported"))
	}
	// Request objects would carry parameters this check never sees: refused, not ignored
	// (OIDC Core 3.1.2.6); a request_uri is accepted only as the name of a request pushed to
	// this server (PAR, RFC 9126), which the authorize endpoint opens before this check
	// (OpenPushedRequest). So is a response mode that would put the code elsewhere than the
	// query.
	switch {
	case p.Request != "":
		return fail(&Error{Code: ErrCodeRequestNotSupported, Description: "request objects are not supported", Status: 400})
	case p.RequestURI != "":
		return fail(&Error{Code: ErrCodeRequestURINotSupported, Description: "request_uri is not supported", Status: 400})
	case !validResponseMode(p.ResponseMode):
		return fail(InvalidRequest("response_mode must be query, or jwt or query.jwt for a signed response (JARM)"))
	case isJARM(p.ResponseMode) && s.Signer == nil:
		return fail(InvalidRequest("signed authorization responses (JARM) are not available here"))
	}
	scopes := ParseScopes(p.Scope)
	if err := scopes.ValidateFor(&c); err != nil {
		return fail(err)
	}
	switch {
	case (c.RequirePKCE || c.IsFAPI2()) && p.CodeChallenge == "":
		return fail(InvalidRequest("this client must send a code_challenge (PKCE, S256)"))
	case p.CodeChallengeMethod != "" && p.CodeChallenge == "":
		return fail(InvalidRequest("code_challenge_method without code_challenge"))
	case p.CodeChallenge != "" && p.CodeChallengeMethod != "S256":
		return fail(InvalidRequest("code_challenge_method must be S256"))
	case p.CodeChallenge != "" && !validPKCEValue(p.CodeChallenge):
		return fail(InvalidRequest("code_challenge is malformed"))
	}
	var maxAge int64 = -1
	if p.MaxAge != "" {
		n, err := strconv.ParseInt(p.MaxAge, 10, 64)
		if err != nil || n < 0 {
			return fail(InvalidRequest("max_age must be a non-negative integer"))
		}
		maxAge = n
	}
	for _, pr := range strings.Fields(p.Prompt) {
		switch pr {
		case "login", "consent", "none", "select_account":
		default:
			return fail(InvalidRequest("unsupported prompt value"))
		}
	}
	if p.DPoPJKT != "" && !validThumbprint(p.DPoPJKT) {
		return fail(InvalidRequest("dpop_jkt must be a base64url SHA-256 JWK thumbprint"))
	}
	details, derr := s.authorizationDetails(&c, p.AuthorizationDetails)
	if derr != nil {
		return fail(derr)
	}
	if gerr := s.checkGrantManagement(ctx, &c, p, details); gerr != nil {
		return fail(gerr)
	}
	now := s.now()
	req := &AuthRequest{
		ID: NewID(PrefixRequest), ClientID: c.ID, RedirectURI: p.RedirectURI, Scopes: scopes, State: p.State,
		Nonce: p.Nonce, CodeChallenge: p.CodeChallenge, CodeChallengeMethod: p.CodeChallengeMethod,
		Prompt: p.Prompt, UILocales: p.UILocales, MaxAge: maxAge, DPoPJKT: p.DPoPJKT, ACRValues: p.ACRValues,
		CreatedAt: now, ExpiresAt: now.Add(s.Lifetimes.Request), ResponseMode: p.ResponseMode,
		AuthorizationDetails: details, GrantManagementAction: p.GrantManagementAction, GrantID: p.GrantID,
	}
	if err := checkAuthRequestSize(req); err != nil {
		return fail(err)
	}
	return &c, req, nil
}

// RedirectURIOf is where a request's answer goes: the URI it named, or the client's only one.
func RedirectURIOf(r *AuthRequest, c *Client) string {
	if r.RedirectURI != "" {
		return r.RedirectURI
	}
	if len(c.RedirectURIs) == 1 {
		return c.RedirectURIs[0]
	}
	return ""
}

// HasPrompt reports whether the request's prompt parameter lists value.
func (r *AuthRequest) HasPrompt(value string) bool {
	for _, p := range strings.Fields(r.Prompt) {
		if p == value {
			return true
		}
	}
	return false
}

// SessionSatisfies reports whether a signed-in session may answer the request without a new
// login: no prompt=login, and within max_age when one was given.
func (r *AuthRequest) SessionSatisfies(sess *Session, now time.Time) bool {
	if sess == nil || r.HasPrompt("login") {
		return false
	}
	if r.MaxAge >= 0 && now.Sub(sess.AuthTime) > time.Duration(r.MaxAge)*time.Second {
		return false
	}
	return true
}

// errorRedirect answers the request with an error at the client's redirect URI, in the
// request's response mode.
func (s *Service) errorRedirect(ctx context.Context, r *AuthRequest, c *Client, e *Error) (*Redirect, error) {
	params := url.Values{"error": {e.Code}, "error_description": {e.Description}}
	if r.State != "" {
		params.Set("state", r.State)
	}
	return s.authorizationResponse(ctx, c, RedirectURIOf(r, c), r.ResponseMode, params)
}

// Deny answers the request with access_denied: the user refused.
// A pushed request's request_uri is spent by the decision (spendPushed): ErrRequestURIUsed when
// another decision spent it first. The response is signed (JARM) before anything is spent.
func (s *Service) Deny(ctx context.Context, r *AuthRequest, c *Client) (*Redirect, error) {
	to, err := s.errorRedirect(ctx, r, c, AccessDenied("the user denied the request"))
	if err != nil {
		return nil, err
	}
	if err := s.spendPushed(ctx, r); err != nil {
		return nil, err
	}
	s.audit(ctx, "consent_denied", &Grant{ClientID: c.ID})
	return to, nil
}

// LoginRequiredRedirect answers prompt=none when the user must interact.
func (s *Service) LoginRequiredRedirect(ctx context.Context, r *AuthRequest, c *Client, code string) (*Redirect, error) {
	return s.errorRedirect(ctx, r, c, &Error{Code: code, Description: "user interaction is required", Status: 400})
}

// Approve issues a code for the request to the signed-in user and returns the redirect that
// carries it with the state (RFC 6749 4.1.2) and the issuer (RFC 9207). A pushed request's
// request_uri is spent first (spendPushed): of two decisions on one request_uri at most one
// issues a code; the other gets ErrRequestURIUsed. A JARM response is signed before anything
// is written, so a failed signature spends nothing.
func (s *Service) Approve(ctx context.Context, r *AuthRequest, c *Client, u *User, sess *Session) (*Redirect, error) {
	if err := checkPaymentLink(r.AuthorizationDetails, r.PaymentEvidence); err != nil {
		// A payment is approved only with the evidence of the customer's step over its
		// details (dynamic_linking.go); the sign-in never asks otherwise.
		return nil, err
	}
	now := s.now()
	g, rw, gerr := s.rewrite(ctx, r, u, Grant{
		ID: NewID(PrefixGrant), ClientID: c.ID, UID: u.UID, Scopes: r.Scopes,
		CompanyProfileID: u.CompanyProfileID, CompanyUserID: u.CompanyUserID,
		AuthTime: sess.AuthTime, AMR: sess.AMR, SID: sess.SID, Nonce: r.Nonce, Claims: u.Claims.Only(r.Scopes), DPoPJKT: r.DPoPJKT,
		AuthorizationDetails: r.AuthorizationDetails, CreatedAt: now, ExpiresAt: now.Add(s.Lifetimes.Grant),
		PaymentEvidence: r.PaymentEvidence,
	})
	if gerr != nil {
		// The grant a merge or replace names is gone, or is not this user's: the decision is
		// answered with the error, and spends the pushed request as a denial does.
		to, err := s.errorRedirect(ctx, r, c, gerr)
		if err != nil {
			return nil, err
		}
		if err := s.spendPushed(ctx, r); err != nil {
			return nil, err
		}
		return to, nil
	}
	code := NewSecret(s.homePrefix(PrefixCode))
	params := url.Values{"code": {code}}
	if r.State != "" {
		params.Set("state", r.State)
	}
	to, err := s.authorizationResponse(ctx, c, RedirectURIOf(r, c), r.ResponseMode, params)
	if err != nil {
		return nil, err
	}
	if err := s.spendPushed(ctx, r); err != nil {
		return nil, err
	}
	err = s.Grants.CreateCode(ctx, Code{
		Hash: HashToken(code), Grant: g, RedirectURI: r.RedirectURI, CodeChallenge: r.CodeChallenge,
		ExpiresAt: now.Add(c.CodeLifetime(s.Lifetimes.Code)), Rewrite: rw,
	})
	if err != nil {
		return nil, AsError(err)
	}
	s.audit(ctx, "consent_granted", &g, slog.String("scope", r.Scopes.String()))
	return to, nil
}
