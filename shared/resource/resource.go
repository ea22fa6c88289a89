// Package resource is the check of an access token presented to a resource: the token's one
// store read, its certificate or DPoP binding and the replay check of the proof's jti (in
// oauth.Service.ValidatePresented). The bank API's authorizer (shared/authorizer) and the
// UserInfo endpoint use it; it needs the grants, the replay store and a clock, nothing else.
package resource

import (
	"context"
	"fmt"
	"strings"

	"github.com/acmebank/authserver/shared/authorizer"
	"github.com/acmebank/authserver/shared/oauth"
)

// Deps are what the resource-token check needs.
type Deps struct {
	// Grants is read once per check (the token and its grant).
	Grants oauth.GrantStore
	// Replay records the jti of a DPoP proof once the token is found valid.
	Replay oauth.ReplayStore
	Clock  oauth.Clock
	// Origins are the public origins the resource is served under: a DPoP proof's htu names one
	// of them with the resource's path (UserInfo; the authorizer keeps its own, of the bank API).
	Origins []string
}

// Checker checks the access tokens presented to a resource.
type Checker struct {
	tokens *oauth.Service
}

var _ authorizer.TokenValidator = (*Checker)(nil)

// New returns the check over d, or an error naming every dependency it lacks.
func New(d Deps) (*Checker, error) {
	var missing []string
	if d.Grants == nil {
		missing = append(missing, "Grants")
	}
	if d.Replay == nil {
		missing = append(missing, "Replay")
	}
	if d.Clock == nil {
		missing = append(missing, "Clock")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("resource: missing %s", strings.Join(missing, ", "))
	}
	return &Checker{tokens: &oauth.Service{Grants: d.Grants, Replay: d.Replay, Clock: d.Clock, Origins: d.Origins}}, nil
}

// ValidatePresented checks a presented access token with one store read and, for a DPoP-bound
// token, one conditional write of the proof's jti, made last (oauth.Service.ValidatePresented).
func (c *Checker) ValidatePresented(ctx context.Context, p oauth.Presentation) (oauth.Token, error) {
	return c.tokens.ValidatePresented(ctx, p)
}

// UserInfoRequest is a UserInfo request as the HTTP adapter read it.
type UserInfoRequest struct {
	Token string
	// DPoP reports the DPoP scheme (Authorization: DPoP …); false is Bearer.
	DPoP           bool
	CertThumbprint string
	Proof          oauth.ProofHeaders
}

// UserInfo answers the OIDC UserInfo endpoint (OIDC Core 5.3): the sub and the claims the
// token's scopes release, taken from the grant's snapshot of the user (made at consent), so
// answering is the one read that validates the token. UserInfo is OpenID Connect's: a token of
// a plain OAuth grant may not read it, which is checked inside the validation, before a DPoP
// proof's jti is recorded: a refusal writes nothing. Errors are shaped for RFC 6750's
// WWW-Authenticate challenge (authorizer.ScopeError, authorizer.DPoPAware).
func (c *Checker) UserInfo(ctx context.Context, r UserInfoRequest) (map[string]any, error) {
	var refused error
	allow := func(t oauth.Token) error {
		if !t.Scopes.Has(oauth.ScopeOpenID) || t.Grant.HasNoUser() {
			refused = &authorizer.ScopeError{Err: oauth.InsufficientScope("the access token was not granted the openid scope"),
				Required: oauth.Scopes{oauth.ScopeOpenID}}
		}
		return refused
	}
	t, err := c.tokens.ValidatePresented(ctx, oauth.Presentation{Token: r.Token, DPoP: r.DPoP, CertThumbprint: r.CertThumbprint,
		Proof: c.tokens.ProofRequest(r.Proof), Allow: allow})
	if refused != nil {
		return nil, refused
	}
	if err != nil {
		return nil, authorizer.DPoPAware(err, r.DPoP)
	}
	claims := t.Grant.Claims.ForScopes(t.Scopes)
	claims["sub"] = t.Grant.UID
	return claims, nil
}
