package oauth

import (
	"context"
	"errors"
	"log/slog"
)

// Revoke handles a revocation request (RFC 7009) from an authenticated client. Revoking a
// refresh token revokes its whole grant, so the access tokens issued with it stop working at
// once; revoking an access token revokes that token. A token that is unknown, expired, already
// revoked or another client's is answered the same way (success) and nothing changes.
func (s *Service) Revoke(ctx context.Context, client *Client, token, hint string) error {
	if token == "" {
		return InvalidRequest("the token parameter is required")
	}
	// The hint (RFC 7009 2.1) is not needed: the token is found by its hash whatever its kind,
	// and an unknown hint is ignored as the RFC allows.
	_ = hint
	now := s.now()
	hash := HashToken(token)
	ctx = WithHome(ctx, HomeOf(token))
	t, err := s.Grants.GetToken(ctx, hash, now)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return AsError(err)
	}
	if t.Grant.ClientID != client.ID {
		return nil
	}
	if t.Kind == KindRefresh {
		if err := s.Grants.RevokeGrant(ctx, t.Grant.ID, now); err != nil {
			return AsError(err)
		}
		s.audit(ctx, "grant_revoked", &t.Grant, slog.String("reason", "refresh_token_revoked"))
		return nil
	}
	if err := s.Grants.RevokeToken(ctx, hash); err != nil {
		return AsError(err)
	}
	s.audit(ctx, "access_token_revoked", &t.Grant)
	return nil
}

// RevokeGrantByOperator revokes a grant for an operator (admin tool, disabling a user or
// client); the audit record names the grant's client and user, the reason, and the operator
// (AuditInfo.Actor of ctx).
func (s *Service) RevokeGrantByOperator(ctx context.Context, g *Grant, reason string) error {
	if err := s.Grants.RevokeGrant(ctx, g.ID, s.now()); err != nil {
		return err
	}
	s.audit(ctx, "grant_revoked", g, slog.String("reason", reason))
	return nil
}
