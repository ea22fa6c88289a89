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
		var seen replayed
		err := getLive(tx, bReplay, key, &seen, &seen.ExpiresAt, now)
		switch {
		case err == nil:
			return oauth.ErrUsed
		case !errors.Is(err, oauth.ErrNotFound):
			return err
		}
		return put(tx, bReplay, key, replayed{ExpiresAt: expires})
	})
}
