package oauth

import (
	"encoding/json"
	"fmt"
)

// Limits on what an authorization request may store. Every parameter kept with a pending
// request (sent through the browser or pushed, RFC 9126) is bounded here, and so is the encoded
// request as a whole: nobody has to authenticate before a pending request is stored, so these
// bounds times the per-address count of pending requests (httpapi.RateLimits.Pending) are what
// one address can make the server keep. Each limit is far above what a real client sends.

// ParamLimit is the longest value, in bytes, one authorization request parameter may have.
type ParamLimit struct {
	Name string
	Max  int
	get  func(*AuthorizeParams) string
}

// authorizeParamLimits are the limits of the parameters a pending request keeps (or reads to
// find its client and redirect URI): one table, which docs/api.md lists.
var authorizeParamLimits = []ParamLimit{
	{"client_id", 256, func(p *AuthorizeParams) string { return p.ClientID }},
	{"redirect_uri", 2048, func(p *AuthorizeParams) string { return p.RedirectURI }},
	{"response_type", 64, func(p *AuthorizeParams) string { return p.ResponseType }},
	{"response_mode", 64, func(p *AuthorizeParams) string { return p.ResponseMode }},
	{"scope", 2048, func(p *AuthorizeParams) string { return p.Scope }},
	{"state", 2048, func(p *AuthorizeParams) string { return p.State }},
	{"nonce", 2048, func(p *AuthorizeParams) string { return p.Nonce }},
	// RFC 7636 4.1: a challenge is 43 to 128 characters.
	{"code_challenge", 128, func(p *AuthorizeParams) string { return p.CodeChallenge }},
	{"code_challenge_method", 64, func(p *AuthorizeParams) string { return p.CodeChallengeMethod }},
	{"prompt", 128, func(p *AuthorizeParams) string { return p.Prompt }},
	{"ui_locales", 256, func(p *AuthorizeParams) string { return p.UILocales }},
	{"max_age", 20, func(p *AuthorizeParams) string { return p.MaxAge }},
	{"acr_values", 512, func(p *AuthorizeParams) string { return p.ACRValues }},
	// A SHA-256 JWK thumbprint is 43 characters.
	{"dpop_jkt", 128, func(p *AuthorizeParams) string { return p.DPoPJKT }},
	{"request_uri", 512, func(p *AuthorizeParams) string { return p.RequestURI }},
	// Grant Management's action is a word; our grant ids are short.
	{"grant_management_action", 64, func(p *AuthorizeParams) string { return p.GrantManagementAction }},
	{"grant_id", maxGrantIDBytes, func(p *AuthorizeParams) string { return p.GrantID }},
}

// MaxAuthRequestBytes bounds a pending request as it is stored (its JSON encoding, which the
// embedded store keeps): a backstop behind the per-parameter limits, with room for the few
// hundred bytes the pages add (the CSRF hash, a passkey ceremony).
const MaxAuthRequestBytes = 24 << 10

// AuthorizeParamLimits returns the per-parameter limits, in the order docs/api.md lists them.
func AuthorizeParamLimits() []ParamLimit {
	return append([]ParamLimit(nil), authorizeParamLimits...)
}

// limitOf is the limit of the named parameter (a zero limit for a name not in the table).
func limitOf(name string) ParamLimit {
	for _, l := range authorizeParamLimits {
		if l.Name == name {
			return l
		}
	}
	return ParamLimit{Name: name}
}

// tooLong returns the first parameter of p over its limit; ok is false when none is.
func (p *AuthorizeParams) tooLong() (l ParamLimit, ok bool) {
	for _, l := range authorizeParamLimits {
		if len(l.get(p)) > l.Max {
			return l, true
		}
	}
	return ParamLimit{}, false
}

// tooLongError is the invalid_request of a parameter over its limit.
func tooLongError(l ParamLimit) *Error {
	return InvalidRequest("the %s parameter may be at most %d bytes", l.Name, l.Max)
}

// checkAuthRequestSize refuses a pending request whose encoding exceeds MaxAuthRequestBytes.
func checkAuthRequestSize(r *AuthRequest) *Error {
	raw, err := json.Marshal(r)
	if err != nil {
		return ServerError(fmt.Errorf("encode the authorization request: %w", err))
	}
	if len(raw) > MaxAuthRequestBytes {
		return InvalidRequest("the authorization request may be at most %d bytes as stored", MaxAuthRequestBytes)
	}
	return nil
}
