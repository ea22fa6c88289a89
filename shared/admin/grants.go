package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// Reasons recorded in the audit log for the operator's revocations.
const (
	ReasonOperator       = "operator"
	ReasonClientDisabled = "client_disabled"
	ReasonClientDeleted  = "client_deleted"
	ReasonUserDisabled   = "user_disabled"
	ReasonUserDeleted    = "user_deleted"
	ReasonPasswordReset  = "password_reset"
)

// ListGrants returns the live grants of a user or of a client (exactly one of f's fields set),
// newest first.
func (s *Service) ListGrants(ctx context.Context, f oauth.GrantFilter) ([]oauth.GrantRecord, error) {
	if err := checkFilter(f); err != nil {
		return nil, err
	}
	list, err := s.Store.ListGrants(ctx, f, s.now())
	if err != nil {
		return nil, fmt.Errorf("list grants: %w", err)
	}
	slices.SortStableFunc(list, func(a, b oauth.GrantRecord) int {
		return b.Grant.CreatedAt.Compare(a.Grant.CreatedAt)
	})
	return list, nil
}

func checkFilter(f oauth.GrantFilter) error {
	if (f.UID == "") == (f.ClientID == "") {
		return invalid("name either a user or a client")
	}
	return nil
}

// GetGrant returns one grant, revoked or not (an operator looking into a customer's
// complaint needs both); an unknown id, or one past its end, is ErrNotFound.
func (s *Service) GetGrant(ctx context.Context, id string) (oauth.GrantRecord, error) {
	rec, err := s.Store.GetGrant(ctx, id, s.now())
	if errors.Is(err, oauth.ErrNotFound) {
		return oauth.GrantRecord{}, fmt.Errorf("grant %q: %w", id, oauth.ErrNotFound)
	}
	if err != nil {
		return oauth.GrantRecord{}, fmt.Errorf("get grant %s: %w", id, err)
	}
	return rec, nil
}

// RevokeGrant revokes one grant and every token of it. An unknown id is ErrNotFound; a grant
// revoked before is revoked again, harmlessly, and reported as such (alreadyRevoked).
func (s *Service) RevokeGrant(ctx context.Context, id string) (alreadyRevoked bool, err error) {
	rec, err := s.Store.GetGrant(ctx, id, s.now())
	if errors.Is(err, oauth.ErrNotFound) {
		return false, fmt.Errorf("grant %q: %w", id, oauth.ErrNotFound)
	}
	if err != nil {
		return false, fmt.Errorf("get grant %s: %w", id, err)
	}
	if err := s.revoker().RevokeGrantByOperator(s.operatorCtx(ctx), &rec.Grant, ReasonOperator); err != nil {
		return false, fmt.Errorf("revoke grant %s: %w", id, err)
	}
	return rec.Revoked, nil
}

// RevokeAll revokes every live grant of a user or of a client and returns the ids it revoked.
// It goes on past a failed revocation and returns the failures joined, so one bad item does
// not leave the rest usable.
func (s *Service) RevokeAll(ctx context.Context, f oauth.GrantFilter, reason string) ([]string, error) {
	if err := checkFilter(f); err != nil {
		return nil, err
	}
	list, err := s.Store.ListGrants(ctx, f, s.now())
	if err != nil {
		return nil, fmt.Errorf("list grants: %w", err)
	}
	if reason == "" {
		reason = ReasonOperator
	}
	rev := s.revoker()
	octx := s.operatorCtx(ctx)
	var done []string
	var errs []error
	for _, g := range list {
		if err := rev.RevokeGrantByOperator(octx, &g.Grant, reason); err != nil {
			errs = append(errs, fmt.Errorf("revoke grant %s: %w", g.Grant.ID, err))
			continue
		}
		done = append(done, g.Grant.ID)
	}
	return done, errors.Join(errs...)
}

// Resweep waits, then revokes the owner's grants again, and returns the ids of this second
// sweep. It closes the window a disablement leaves: a code issued just before it can still be
// exchanged until it expires (AUTH_CODE_TTL), and a running server may serve a disabled client
// from its cache for AUTH_CLIENT_CACHE_TTL, so wait that long.
func (s *Service) Resweep(ctx context.Context, f oauth.GrantFilter, reason string, wait time.Duration) ([]string, error) {
	sleep := s.Sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	if err := sleep(ctx, wait); err != nil {
		return nil, fmt.Errorf("wait before sweeping grants again: %w", err)
	}
	return s.RevokeAll(ctx, f, reason)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
