package oauth

import (
	"context"
	"errors"
	"log/slog"
	"slices"
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

// ReasonCustomer is the audit reason of a grant its user withdrew (the Connected apps page).
const ReasonCustomer = "customer"

// CustomerGrants returns the live grants of the user uid, newest first: what the Connected
// apps page lists. The listing may lag a revocation by the backend's index delay
// (GrantStore.ListGrants); a withdrawal itself is read and written consistently.
func (s *Service) CustomerGrants(ctx context.Context, uid string) ([]GrantRecord, error) {
	if uid == "" {
		return nil, nil
	}
	list, err := s.Grants.ListGrants(ctx, GrantFilter{UID: uid}, s.now())
	if err != nil {
		return nil, AsError(err)
	}
	slices.SortStableFunc(list, func(a, b GrantRecord) int { return b.Grant.CreatedAt.Compare(a.Grant.CreatedAt) })
	return list, nil
}

// CustomerGrant returns the grant id of the user uid, revoked or not: the one rule of which
// grants a customer may touch on the Connected apps page (withdraw it, download its consent
// receipt): their own only. A grant that is unknown, ended or another user's is ErrNotFound,
// the same answer for each (an id tells a stranger nothing); another user's is audited as
// refused with the action the customer tried (event). It writes nothing.
func (s *Service) CustomerGrant(ctx context.Context, uid, id, event string) (GrantRecord, error) {
	if uid == "" || id == "" {
		return GrantRecord{}, ErrNotFound
	}
	rec, err := s.Grants.GetGrant(ctx, id, s.now())
	switch {
	case errors.Is(err, ErrNotFound):
		return GrantRecord{}, ErrNotFound
	case err != nil:
		return GrantRecord{}, AsError(err)
	case rec.Grant.UID != uid:
		s.audit(ctx, event, &Grant{ID: id, UID: uid}, slog.String("reason", "not_the_users"))
		return GrantRecord{}, ErrNotFound
	}
	return rec, nil
}

// WithdrawGrant revokes the grant id at the request of its user uid (the Connected apps page):
// the grant and every token of it, at once (GrantStore.RevokeGrant), audited with reason
// ReasonCustomer. Who may is CustomerGrant's rule: a grant that is unknown, ended or another
// user's is ErrNotFound and nothing is written; one revoked before is withdrawn already (nil,
// nothing written).
func (s *Service) WithdrawGrant(ctx context.Context, uid, id string) error {
	rec, err := s.CustomerGrant(ctx, uid, id, "grant_withdraw_refused")
	if err != nil {
		return err
	}
	if rec.Revoked {
		return nil
	}
	now := s.now()
	if err := s.Grants.RevokeGrant(ctx, id, now); err != nil {
		return AsError(err)
	}
	s.audit(ctx, "grant_revoked", &rec.Grant, slog.String("reason", ReasonCustomer))
	return nil
}
