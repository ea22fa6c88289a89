package embedded

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/acmebank/authserver/shared/oauth"
)

// failureCounter is a login-failure counter of InteractionStore.
type failureCounter struct {
	Count     int       `json:"count"`
	ExpiresAt time.Time `json:"expires_at"`
}

// PutAuthRequest stores a pending authorization request. A new one (an id not stored) that no
// one has signed in on yet is refused with oauth.ErrCapacity when the pending requests would
// then take more than Options.MaxPendingBytes. A request already stored may always be
// rewritten, and one bound to a user (the sign-in's replacement of the login page's request,
// made only after a password or passkey passed, which the login's own limits bound) is always
// stored, so a sign-in in progress is never cut short by others' requests; nothing is evicted.
func (s *Store) PutAuthRequest(ctx context.Context, r oauth.AuthRequest) error {
	if err := requireExpiry("auth request", r.ExpiresAt); err != nil {
		return err
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("embedded store: encode a value of %s: %w", bRequests, err)
	}
	return s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bRequests)
		old := b.Get([]byte(r.ID))
		total := pendingBytes(tx) + itemBytes(r.ID, raw) - itemBytes(r.ID, old)
		if old == nil && r.UID == "" && s.maxPending > 0 && total > s.maxPending {
			return oauth.ErrCapacity
		}
		if err := b.Put([]byte(r.ID), raw); err != nil {
			return err
		}
		return setPendingBytes(tx, total)
	})
}

// keyPendingBytes is the meta item that counts the bytes of the auth_requests bucket's keys
// and values, kept in the transaction of every write to that bucket, so the cap on pending
// requests costs no scan and survives a restart exactly.
var keyPendingBytes = []byte("pending_bytes")

// itemBytes is what one pending request counts for: its key and its value (0 when absent).
func itemBytes(id string, raw []byte) int64 {
	if raw == nil {
		return 0
	}
	return int64(len(id) + len(raw))
}

// pendingBytes reads the count of the auth_requests bucket's bytes.
func pendingBytes(tx *bbolt.Tx) int64 {
	v := tx.Bucket(bMeta).Get(keyPendingBytes)
	if len(v) != 8 {
		return 0 // not counted yet: countPendingBytes sets it at Open
	}
	return int64(binary.BigEndian.Uint64(v))
}

// setPendingBytes writes the count of the auth_requests bucket's bytes.
func setPendingBytes(tx *bbolt.Tx, n int64) error {
	return tx.Bucket(bMeta).Put(keyPendingBytes, binary.BigEndian.AppendUint64(nil, uint64(max(n, 0))))
}

// countPendingBytes counts the auth_requests bucket whole and writes the count: at Open, so a
// file written before the count existed (or by any other writer) starts exact.
func countPendingBytes(tx *bbolt.Tx) error {
	var n int64
	err := tx.Bucket(bRequests).ForEach(func(k, v []byte) error {
		n += int64(len(k) + len(v))
		return nil
	})
	if err != nil {
		return err
	}
	return setPendingBytes(tx, n)
}

// PendingBytes is how many bytes the pending authorization requests take (keys and values,
// expired ones until GarbageCollect removes them): what Options.MaxPendingBytes caps.
func (s *Store) PendingBytes() (int64, error) {
	var n int64
	err := s.db.View(func(tx *bbolt.Tx) error {
		n = pendingBytes(tx)
		return nil
	})
	return n, err
}

// GetAuthRequest returns a pending request; expired ones are ErrNotFound.
func (s *Store) GetAuthRequest(ctx context.Context, id string, now time.Time) (oauth.AuthRequest, error) {
	var r oauth.AuthRequest
	err := s.view(ctx, func(tx *bbolt.Tx) error { return getLive(tx, bRequests, id, &r, &r.ExpiresAt, now) })
	return r, err
}

// TakeAuthRequest deletes and returns a pending request, once.
func (s *Store) TakeAuthRequest(ctx context.Context, id string, now time.Time) (oauth.AuthRequest, error) {
	var r oauth.AuthRequest
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		r = oauth.AuthRequest{} // fn may run again (see update): nothing from a run before
		if err := getLive(tx, bRequests, id, &r, &r.ExpiresAt, now); err != nil {
			return err
		}
		n := pendingBytes(tx) - itemBytes(id, tx.Bucket(bRequests).Get([]byte(id)))
		if err := del(tx, bRequests, id); err != nil {
			return err
		}
		return setPendingBytes(tx, n)
	})
	if err != nil {
		return oauth.AuthRequest{}, err
	}
	return r, nil
}

// PutSession stores a browser session.
func (s *Store) PutSession(ctx context.Context, x oauth.Session) error {
	if err := requireExpiry("session", x.ExpiresAt); err != nil {
		return err
	}
	return s.update(ctx, func(tx *bbolt.Tx) error { return put(tx, bSessions, x.Hash, x) })
}

// GetSession returns a live session.
func (s *Store) GetSession(ctx context.Context, hash string, now time.Time) (oauth.Session, error) {
	var x oauth.Session
	err := s.view(ctx, func(tx *bbolt.Tx) error { return getLive(tx, bSessions, hash, &x, &x.ExpiresAt, now) })
	return x, err
}

// DeleteSession deletes a session; an unknown one is not an error.
func (s *Store) DeleteSession(ctx context.Context, hash string) error {
	return s.update(ctx, func(tx *bbolt.Tx) error { return del(tx, bSessions, hash) })
}

// TakeSession deletes a session in one transaction that finds it first: none is
// oauth.ErrNotFound, so of racing calls one succeeds.
func (s *Store) TakeSession(ctx context.Context, hash string) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		if tx.Bucket(bSessions).Get([]byte(hash)) == nil {
			return fmt.Errorf("take session: %w", oauth.ErrNotFound)
		}
		return del(tx, bSessions, hash)
	})
}

// CountFailure adds one failure to key's counter and returns the new count; a counter lives
// for window from its first failure.
func (s *Store) CountFailure(ctx context.Context, key string, window time.Duration, now time.Time) (int, error) {
	var c failureCounter
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		c = failureCounter{} // fn may run again (see update): nothing from a run before
		ok, err := get(tx, bFailures, key, &c)
		if err != nil {
			return err
		}
		if !ok || !live(c.ExpiresAt, now) {
			c = failureCounter{ExpiresAt: now.Add(window)}
		}
		c.Count++
		return put(tx, bFailures, key, c)
	})
	if err != nil {
		return 0, err
	}
	return c.Count, nil
}

// Failures returns key's current count (zero when none or expired).
func (s *Store) Failures(ctx context.Context, key string, now time.Time) (int, error) {
	var c failureCounter
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		ok, err := get(tx, bFailures, key, &c)
		if err == nil && (!ok || !live(c.ExpiresAt, now)) {
			c.Count = 0
		}
		return err
	})
	return c.Count, err
}

// ResetFailures forgets key's counter.
func (s *Store) ResetFailures(ctx context.Context, key string) error {
	return s.update(ctx, func(tx *bbolt.Tx) error { return del(tx, bFailures, key) })
}

// getLive decodes the value under key into v, whose expiry is *exp: ErrNotFound when there is
// none or it has expired at now.
func getLive(tx *bbolt.Tx, bucket []byte, key string, v any, exp *time.Time, now time.Time) error {
	if err := mustGet(tx, bucket, key, v); err != nil {
		return err
	}
	if !live(*exp, now) {
		return oauth.ErrNotFound
	}
	return nil
}
