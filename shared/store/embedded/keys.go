package embedded

import (
	"context"

	"go.etcd.io/bbolt"

	"github.com/acmebank/authserver/shared/oauth"
)

// Keys returns the signing-key registry, an empty set at version 0 when none was written
// (oauth.KeyStore).
func (s *Store) Keys(ctx context.Context) (oauth.KeySet, error) {
	return readWhole[oauth.KeySet](ctx, s, string(keySet))
}

// UpdateKeys applies fn to the registry outside any transaction (a rotation may call a key
// service in between), and writes the result only if the version is unchanged: otherwise
// ErrConflict and nothing written (oauth.KeyStore).
func (s *Store) UpdateKeys(ctx context.Context, fn func(oauth.KeySet) (oauth.KeySet, error)) error {
	return updateWhole(ctx, s, string(keySet), func(k *oauth.KeySet) *int64 { return &k.Version }, fn)
}

// nonceKeySet names the item of the bKeys bucket that holds the DPoP nonce keys.
const nonceKeySet = "dpop-nonce"

// NonceKeys returns the DPoP nonce keys, an empty set at version 0 when none was written
// (oauth.NonceKeyStore).
func (s *Store) NonceKeys(ctx context.Context) (oauth.NonceKeySet, error) {
	return readWhole[oauth.NonceKeySet](ctx, s, nonceKeySet)
}

// UpdateNonceKeys applies fn outside any transaction (it may call a key service) and writes
// the result only if the version is unchanged: otherwise ErrConflict and nothing written
// (oauth.NonceKeyStore).
func (s *Store) UpdateNonceKeys(ctx context.Context, fn func(oauth.NonceKeySet) (oauth.NonceKeySet, error)) error {
	return updateWhole(ctx, s, nonceKeySet, func(k *oauth.NonceKeySet) *int64 { return &k.Version }, fn)
}

// readWhole reads the record name of the bKeys bucket, the zero T when none was written.
func readWhole[T any](ctx context.Context, s *Store, name string) (T, error) {
	var rec T
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		_, err := get(tx, bKeys, name, &rec)
		return err
	})
	return rec, err
}

// updateWhole is the one optimistic update of a versioned record of the bKeys bucket (the key
// registry, the DPoP nonce keys): fn runs outside any transaction on the record read, and its
// result is written with the next version only if the stored version is still the one read;
// otherwise ErrConflict and nothing written.
func updateWhole[T any](ctx context.Context, s *Store, name string, version func(*T) *int64, fn func(T) (T, error)) error {
	cur, err := readWhole[T](ctx, s, name)
	if err != nil {
		return err
	}
	next, err := fn(cur)
	if err != nil {
		return err
	}
	*version(&next) = *version(&cur) + 1
	return s.update(ctx, func(tx *bbolt.Tx) error {
		var now T
		if _, err := get(tx, bKeys, name, &now); err != nil {
			return err
		}
		if *version(&now) != *version(&cur) {
			return oauth.ErrConflict
		}
		return put(tx, bKeys, name, next)
	})
}

// pairwiseSaltName names the item of the bKeys bucket that holds the pairwise-subject salt.
const pairwiseSaltName = "pairwise-salt"

// PairwiseSalt returns the stored salt (one read), or stores fresh in a transaction that
// checks again that none is stored (oauth.PairwiseSaltStore).
func (s *Store) PairwiseSalt(ctx context.Context, fresh []byte) ([]byte, error) {
	salt, err := readWhole[[]byte](ctx, s, pairwiseSaltName)
	if err != nil || salt != nil {
		return salt, err
	}
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		ok, err := get(tx, bKeys, pairwiseSaltName, &salt)
		if err != nil || ok {
			return err
		}
		if len(fresh) != oauth.PairwiseSaltLen {
			return oauth.ErrInvalidSalt
		}
		salt = fresh
		return put(tx, bKeys, pairwiseSaltName, fresh)
	})
	if err != nil {
		return nil, err
	}
	return salt, nil
}
