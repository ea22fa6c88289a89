package embedded

import (
	"context"

	"go.etcd.io/bbolt"

	"github.com/acmebank/authserver/shared/oauth"
)

// Keys returns the signing-key registry, an empty set at version 0 when none was written
// (oauth.KeyStore).
func (s *Store) Keys(ctx context.Context) (oauth.KeySet, error) {
	var set oauth.KeySet
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		_, err := get(tx, bKeys, string(keySet), &set)
		return err
	})
	return set, err
}

// UpdateKeys applies fn to the registry outside any transaction (a rotation may call a key
// service in between), and writes the result only if the version is unchanged: otherwise
// ErrConflict and nothing written (oauth.KeyStore).
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
	return s.update(ctx, func(tx *bbolt.Tx) error {
		var now oauth.KeySet
		if _, err := get(tx, bKeys, string(keySet), &now); err != nil {
			return err
		}
		if now.Version != cur.Version {
			return oauth.ErrConflict
		}
		return put(tx, bKeys, string(keySet), next)
	})
}

// nonceKeySet names the item of the bKeys bucket that holds the DPoP nonce keys.
const nonceKeySet = "dpop-nonce"

// NonceKeys returns the DPoP nonce keys, an empty set at version 0 when none was written
// (oauth.NonceKeyStore).
func (s *Store) NonceKeys(ctx context.Context) (oauth.NonceKeySet, error) {
	var set oauth.NonceKeySet
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		_, err := get(tx, bKeys, nonceKeySet, &set)
		return err
	})
	return set, err
}

// UpdateNonceKeys applies fn outside any transaction (it may call a key service) and writes
// the result only if the version is unchanged: otherwise ErrConflict and nothing written
// (oauth.NonceKeyStore).
func (s *Store) UpdateNonceKeys(ctx context.Context, fn func(oauth.NonceKeySet) (oauth.NonceKeySet, error)) error {
	cur, err := s.NonceKeys(ctx)
	if err != nil {
		return err
	}
	next, err := fn(cur)
	if err != nil {
		return err
	}
	next.Version = cur.Version + 1
	return s.update(ctx, func(tx *bbolt.Tx) error {
		var now oauth.NonceKeySet
		if _, err := get(tx, bKeys, nonceKeySet, &now); err != nil {
			return err
		}
		if now.Version != cur.Version {
			return oauth.ErrConflict
		}
		return put(tx, bKeys, nonceKeySet, next)
	})
}
