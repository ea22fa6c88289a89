package embedded

import (
	"context"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/acmebank/authserver/shared/oauth"
)

// Factors returns a user's second factors, an empty set at version 0 when none was written
// (oauth.FactorStore).
func (s *Store) Factors(ctx context.Context, uid string) (oauth.UserFactors, error) {
	f := oauth.UserFactors{UID: uid}
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		_, err := get(tx, bFactors, uid, &f)
		return err
	})
	return f, err
}

// UpdateFactors applies fn outside any transaction and writes the result only if the version
// is unchanged: otherwise ErrConflict and nothing written (oauth.FactorStore).
func (s *Store) UpdateFactors(ctx context.Context, uid string, fn func(oauth.UserFactors) (oauth.UserFactors, error)) error {
	cur, err := s.Factors(ctx, uid)
	if err != nil {
		return err
	}
	next, err := fn(cur)
	if err != nil {
		return fmt.Errorf("update factors: %w", err)
	}
	next.UID, next.Version = uid, cur.Version+1
	return s.update(ctx, func(tx *bbolt.Tx) error {
		var now oauth.UserFactors
		if _, err := get(tx, bFactors, uid, &now); err != nil {
			return err
		}
		if now.Version != cur.Version {
			return oauth.ErrConflict
		}
		return put(tx, bFactors, uid, next)
	})
}
