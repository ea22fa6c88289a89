package bolt

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/acmebank/authserver/shared/oauth"
)

// Keys returns the signing-key registry; an empty set at version 0 when none was written.
func (s *Store) Keys(ctx context.Context) (oauth.KeySet, error) {
	var set oauth.KeySet
	err := s.read(ctx, func(tx *bbolt.Tx) error {
		var err error
		set, err = readKeys(tx)
		return err
	})
	if err != nil {
		return oauth.KeySet{}, fmt.Errorf("bolt: keys: %w", err)
	}
	return set, nil
}

// UpdateKeys reads the registry, calls fn outside any transaction (a rotation may call a key
// service in between), and writes the result only if the version is still the one read:
// otherwise ErrConflict and nothing written. The written version is the read one plus one.
func (s *Store) UpdateKeys(ctx context.Context, fn func(oauth.KeySet) (oauth.KeySet, error)) error {
	cur, err := s.Keys(ctx)
	if err != nil {
		return err
	}
	next, err := fn(cur)
	if err != nil {
		return err
	}
	next.Version = cur.Version + 1
	val, err := encode(next, time.Time{}, 0)
	if err != nil {
		return fmt.Errorf("bolt: update keys: %w", err)
	}
	var result error
	err = s.write(ctx, func(tx *bbolt.Tx) error {
		result = nil
		now, err := readKeys(tx)
		if err != nil {
			return err
		}
		if now.Version != cur.Version {
			result = oauth.ErrConflict
			return nil
		}
		return put(tx, bKeys, 0, keySet, val)
	})
	if err != nil {
		return fmt.Errorf("bolt: update keys: %w", err)
	}
	return result
}

func readKeys(tx *bbolt.Tx) (oauth.KeySet, error) {
	var set oauth.KeySet
	r, ok, err := getRaw(tx.Bucket(bKeys), keySet)
	if err != nil || !ok {
		return set, err
	}
	err = decode(r.body, &set)
	return set, err
}
