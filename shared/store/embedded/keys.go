package embedded

import (
	"context"
	"fmt"

	"github.com/acmebank/authserver/shared/oauth"
)

// Keys returns the signing-key registry (oauth.KeyStore).
func (s *Store) Keys(ctx context.Context) (oauth.KeySet, error) {
	if err := ctx.Err(); err != nil {
		return oauth.KeySet{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.log.usable(); err != nil {
		return oauth.KeySet{}, err
	}
	return cloneKeys(s.keys), nil
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
	s.mu.Lock()
	if err := s.log.usable(); err != nil {
		s.mu.Unlock()
		return err
	}
	if s.keys.Version != cur.Version {
		s.mu.Unlock()
		return oauth.ErrConflict
	}
	s.keys = next
	b := s.log.append(body)
	s.mu.Unlock()
	return s.log.commit(b)
}
