package embedded

import (
	"context"
	"fmt"

	"github.com/acmebank/authserver/shared/oauth"
)

// Keys returns the signing-key registry (oauth.KeyStore).
func (s *Store) Keys(ctx context.Context) (oauth.KeySet, error) {
	var set oauth.KeySet
	err := s.view(ctx, func() error {
		set = cloneKeys(s.keys)
		return nil
	})
	return set, err
}

// UpdateKeys applies fn to the registry, without the lock, and writes the result only if the
// version is unchanged (oauth.KeyStore).
func (s *Store) UpdateKeys(ctx context.Context, fn func(oauth.KeySet) (oauth.KeySet, error)) error {
	cur, err := s.Keys(ctx)
	if err != nil {
		return err
	}
	next, err := fn(cur)
	if err != nil {
		return err
	}
	next = cloneKeys(next)
	next.Version = cur.Version + 1
	body, err := appendJSON(nil, kindKeys, "set", &next)
	if err != nil {
		return fmt.Errorf("embedded store: update keys: %w", err)
	}
	return s.change(ctx, func() ([]byte, error) {
		if s.keys.Version != cur.Version {
			return nil, oauth.ErrConflict
		}
		s.keys = next
		return body, nil
	})
}
