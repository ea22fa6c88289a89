package embedded

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/bbolt"

	"github.com/acmebank/authserver/shared/oauth"
)

// replayed is the value kept under a one-time key: only its end, which GarbageCollect reads.
type replayed struct {
	ExpiresAt time.Time `json:"expires_at"`
}

// UseOnce records key until expires in one write transaction; bbolt runs one at a time, so of
// racing calls exactly one finds the key absent (or expired) and records it.
func (s *Store) UseOnce(ctx context.Context, key string, expires, now time.Time) error {
	if err := requireExpiry("one-time value", expires); err != nil {
		return err
	}
	return s.update(ctx, func(tx *bbolt.Tx) error {
		err := recordOnce(tx, oauth.Once{Key: key, Expires: expires}, now)
		if errors.Is(err, oauth.ErrReplayed) {
			return oauth.ErrUsed
		}
		return err
	})
}

// requireOnceExpiry refuses one-time values without an end before any transaction starts.
func requireOnceExpiry(once []oauth.Once) error {
	for _, o := range once {
		if err := requireExpiry("one-time value", o.Expires); err != nil {
			return err
		}
	}
	return nil
}

// recordOnce records o inside tx if no live record of its key exists, else returns a
// *oauth.ReplayedError; the caller's transaction then rolls back, so nothing it wrote stays.
func recordOnce(tx *bbolt.Tx, o oauth.Once, now time.Time) error {
	var seen replayed
	err := getLive(tx, bReplay, o.Key, &seen, &seen.ExpiresAt, now)
	switch {
	case err == nil:
		return &oauth.ReplayedError{Key: o.Key}
	case !errors.Is(err, oauth.ErrNotFound):
		return err
	}
	return put(tx, bReplay, o.Key, replayed{ExpiresAt: o.Expires})
}

// recordOnces records every value of once inside tx, checked before anything else the
// transaction decides, so a replayed value wins over every other refusal.
func recordOnces(tx *bbolt.Tx, once []oauth.Once, now time.Time) error {
	for _, o := range once {
		if err := recordOnce(tx, o, now); err != nil {
			return err
		}
	}
	return nil
}
