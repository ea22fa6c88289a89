package embedded

import (
	"context"
	"time"

	"go.etcd.io/bbolt"

	"github.com/acmebank/authserver/shared/oauth"
)

// PutInitialAccessToken stores an operator's initial access token until it expires; a hash
// already stored (live or not yet collected) is oauth.ErrAlreadyExists.
func (s *Store) PutInitialAccessToken(ctx context.Context, t oauth.InitialAccessToken) error {
	if err := requireExpiry("initial access token", t.ExpiresAt); err != nil {
		return err
	}
	return s.update(ctx, func(tx *bbolt.Tx) error {
		if tx.Bucket(bIATs).Get([]byte(t.Hash)) != nil {
			return oauth.ErrAlreadyExists
		}
		return put(tx, bIATs, t.Hash, t)
	})
}

// GetInitialAccessToken reads a live initial access token.
func (s *Store) GetInitialAccessToken(ctx context.Context, hash string, now time.Time) (oauth.InitialAccessToken, error) {
	var t oauth.InitialAccessToken
	if err := s.view(ctx, func(tx *bbolt.Tx) error { return getLive(tx, bIATs, hash, &t, &t.ExpiresAt, now) }); err != nil {
		return oauth.InitialAccessToken{}, err
	}
	return t, nil
}

// TakeInitialAccessToken deletes and returns a live initial access token, once: bbolt runs
// one writer at a time, so of racing calls the first deletes it and the others find nothing.
func (s *Store) TakeInitialAccessToken(ctx context.Context, hash string, now time.Time) (oauth.InitialAccessToken, error) {
	var t oauth.InitialAccessToken
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		t = oauth.InitialAccessToken{} // fn may run again (see update): nothing from a run before
		if err := getLive(tx, bIATs, hash, &t, &t.ExpiresAt, now); err != nil {
			return err
		}
		return del(tx, bIATs, hash)
	})
	if err != nil {
		return oauth.InitialAccessToken{}, err
	}
	return t, nil
}
