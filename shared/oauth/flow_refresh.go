package oauth

import (
	"context"
	"errors"
	"log/slog"
)

// RefreshRequest is a token request with grant_type=refresh_token (RFC 6749 6).
type RefreshRequest struct {
	RefreshToken string
	// Scope, when given, narrows the new access token to a subset of the grant's scopes.
	Scope          string
	CertThumbprint string
}

// Refresh spends a refresh token and issues a new access and refresh token (rotation). A spent
// token presented again revokes the whole grant (RFC 9700 4.14.2).
func (s *Service) Refresh(ctx context.Context, client *Client, req RefreshRequest) (*TokenResponse, error) {
	if req.RefreshToken == "" {
		return nil, InvalidRequest("the refresh_token parameter is required")
	}
	var want Scopes
	if req.Scope != "" {
		want = ParseScopes(req.Scope)
		for _, sc := range want {
			if !IsKnownScope(sc) {
				return nil, InvalidScope("unknown scope '%s'", sc)
			}
		}
	}
	now := s.now()
	rt, err := s.Grants.SpendRefreshToken(ctx, HashToken(req.RefreshToken), client.ID, now)
	switch {
	case errors.Is(err, ErrUsed):
		s.audit(ctx, "refresh_reuse_detected", &rt.Grant)
		if rerr := s.Grants.RevokeGrant(ctx, rt.Grant.ID, now); rerr != nil {
			return nil, AsError(rerr)
		}
		s.audit(ctx, "grant_revoked", &rt.Grant, slog.String("reason", "refresh_token_reuse"))
		return nil, InvalidGrant("the refresh token has already been used")
	case errors.Is(err, ErrNotFound):
		return nil, InvalidGrant("the refresh token is invalid, expired or revoked")
	case err != nil:
		return nil, AsError(err)
	}
	g := rt.Grant
	if !now.Before(g.ExpiresAt) {
		return nil, InvalidGrant("the grant has reached its end; a new authorization is needed")
	}
	if g.CertThumbprint != "" && !constantEqual(g.CertThumbprint, req.CertThumbprint) {
		return nil, InvalidGrant("the refresh token is bound to another client certificate")
	}
	scopes := g.Scopes
	if want != nil {
		if !g.Scopes.Contains(want) {
			return nil, InvalidScope("the requested scope exceeds the granted scope")
		}
		scopes = g.Scopes.Narrow(want)
	}
	// The grant keeps at most two live access tokens: the new one and the one issued with the
	// spent refresh token; any older one is revoked now.
	var live, retire []string
	if len(rt.Live) > 0 {
		live = rt.Live[:1]
		retire = rt.Live[1:]
	}
	is := s.newIssuance(g, scopes, now, false, live, retire)
	resp, err := s.issue(ctx, is, "", now)
	if err != nil {
		return nil, err
	}
	s.audit(ctx, "grant_refreshed", &g, slog.String("scope", resp.Scope))
	return resp, nil
}
