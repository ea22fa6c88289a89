package dynamo

import (
	"context"
	"fmt"

	"github.com/acmebank/authserver/shared/oauth"
)

// Factors reads a user's second factors: one GetItem of FACTORS#<uid> (oauth.FactorStore).
func (s *Store) Factors(ctx context.Context, uid string) (oauth.UserFactors, error) {
	item, err := s.get(ctx, key(typeFactors, uid))
	if err != nil {
		return oauth.UserFactors{}, fmt.Errorf("factors: %w", err)
	}
	if item == nil {
		return oauth.UserFactors{UID: uid}, nil
	}
	return decode[oauth.UserFactors](item)
}

// UpdateFactors reads the record, calls fn, and writes the result with version read+1 in one
// conditional PutItem that holds only if the version is still the one read (for version 0:
// if no record exists yet). A lost race is oauth.ErrConflict and writes nothing.
func (s *Store) UpdateFactors(ctx context.Context, uid string, fn func(oauth.UserFactors) (oauth.UserFactors, error)) error {
	cur, err := s.Factors(ctx, uid)
	if err != nil {
		return fmt.Errorf("update factors: %w", err)
	}
	next, err := fn(cur)
	if err != nil {
		return fmt.Errorf("update factors: %w", err)
	}
	next.UID, next.Version = uid, cur.Version+1
	item, err := newItem(typeFactors, uid, next)
	if err != nil {
		return fmt.Errorf("update factors: %w", err)
	}
	if err := s.putSuccessor(ctx, item, cur.Version); err != nil {
		return fmt.Errorf("update factors: %w", err)
	}
	return nil
}
