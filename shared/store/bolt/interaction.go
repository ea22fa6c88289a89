package bolt

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/acmebank/authserver/shared/oauth"
)

// failureCounter is a login-failure counter as stored: its count and the end of its window.
type failureCounter struct {
	Count     int       `json:"count"`
	ExpiresAt time.Time `json:"expires_at"`
}

// PutAuthRequest stores a pending authorization request until it expires.
func (s *Store) PutAuthRequest(ctx context.Context, r oauth.AuthRequest) error {
	if err := requireExpiry("auth request", r.ExpiresAt); err != nil {
		return err
	}
	val, err := encode(r, r.ExpiresAt, 0)
	if err != nil {
		return fmt.Errorf("bolt: put auth request: %w", err)
	}
	err = s.write(ctx, func(tx *bbolt.Tx) error {
		return put(tx, bRequests, idRequests, []byte(r.ID), val)
	})
	if err != nil {
		return fmt.Errorf("bolt: put auth request: %w", err)
	}
	return nil
}

// GetAuthRequest returns a pending request; expired ones are ErrNotFound.
func (s *Store) GetAuthRequest(ctx context.Context, id string, now time.Time) (oauth.AuthRequest, error) {
	var r oauth.AuthRequest
	if err := s.getLive(ctx, bRequests, id, now, &r); err != nil {
		return oauth.AuthRequest{}, notFoundOr("get auth request", err)
	}
	return r, nil
}

// TakeAuthRequest deletes and returns a pending request, once. It is read and decoded outside
// the writer; the write deletes it if it is still there, unchanged.
func (s *Store) TakeAuthRequest(ctx context.Context, id string, now time.Time) (oauth.AuthRequest, error) {
	key := []byte(id)
	pre, err := s.readCopy(ctx, bRequests, key)
	if err != nil {
		return oauth.AuthRequest{}, fmt.Errorf("bolt: take auth request: %w", err)
	}
	r, ok, err := pre.live(now)
	if err != nil || !ok {
		return oauth.AuthRequest{}, notFoundOr("take auth request", err)
	}
	var req oauth.AuthRequest
	if err := decode(r.body, &req); err != nil {
		return oauth.AuthRequest{}, fmt.Errorf("bolt: take auth request: %w", err)
	}
	var result error
	err = s.write(ctx, func(tx *bbolt.Tx) error {
		result = nil
		b := tx.Bucket(bRequests)
		cur, ok, err := get(b, key, now)
		if err != nil {
			return err
		}
		if !ok || !pre.sameBody(cur) {
			result = oauth.ErrNotFound
			return nil
		}
		return b.Delete(key)
	})
	if err != nil {
		return oauth.AuthRequest{}, fmt.Errorf("bolt: take auth request: %w", err)
	}
	if result != nil {
		return oauth.AuthRequest{}, result
	}
	return req, nil
}

// PutSession stores a session until it expires.
func (s *Store) PutSession(ctx context.Context, x oauth.Session) error {
	if err := requireExpiry("session", x.ExpiresAt); err != nil {
		return err
	}
	val, err := encode(x, x.ExpiresAt, 0)
	if err != nil {
		return fmt.Errorf("bolt: put session: %w", err)
	}
	err = s.write(ctx, func(tx *bbolt.Tx) error {
		return put(tx, bSessions, idSessions, []byte(x.Hash), val)
	})
	if err != nil {
		return fmt.Errorf("bolt: put session: %w", err)
	}
	return nil
}

// GetSession returns a live session by the hash of its cookie.
func (s *Store) GetSession(ctx context.Context, hash string, now time.Time) (oauth.Session, error) {
	var x oauth.Session
	if err := s.getLive(ctx, bSessions, hash, now, &x); err != nil {
		return oauth.Session{}, notFoundOr("get session", err)
	}
	return x, nil
}

// DeleteSession ends a session; an unknown one is not an error.
func (s *Store) DeleteSession(ctx context.Context, hash string) error {
	err := s.write(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bSessions).Delete([]byte(hash))
	})
	if err != nil {
		return fmt.Errorf("bolt: delete session: %w", err)
	}
	return nil
}

// CountFailure adds one failure to key's counter, which lives for window from its first
// failure, and returns the new count.
func (s *Store) CountFailure(ctx context.Context, key string, window time.Duration, now time.Time) (int, error) {
	var count int
	err := s.write(ctx, func(tx *bbolt.Tx) error {
		count = 0
		r, ok, err := get(tx.Bucket(bFailures), []byte(key), now)
		if err != nil {
			return err
		}
		c := failureCounter{ExpiresAt: now.Add(window)}
		if ok {
			if err := decode(r.body, &c); err != nil {
				return err
			}
		}
		c.Count++
		count = c.Count
		val, err := encode(c, c.ExpiresAt, 0)
		if err != nil {
			return err
		}
		return put(tx, bFailures, idFailures, []byte(key), val)
	})
	if err != nil {
		return 0, fmt.Errorf("bolt: count failure: %w", err)
	}
	return count, nil
}

// Failures returns key's current count, zero when there is none or its window has passed.
func (s *Store) Failures(ctx context.Context, key string, now time.Time) (int, error) {
	var c failureCounter
	err := s.getLive(ctx, bFailures, key, now, &c)
	if err != nil {
		if errors.Is(err, oauth.ErrNotFound) {
			return 0, nil
		}
		return 0, fmt.Errorf("bolt: failures: %w", err)
	}
	return c.Count, nil
}

// ResetFailures forgets key's counter.
func (s *Store) ResetFailures(ctx context.Context, key string) error {
	err := s.write(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bFailures).Delete([]byte(key))
	})
	if err != nil {
		return fmt.Errorf("bolt: reset failures: %w", err)
	}
	return nil
}

// getLive reads an expiring item, ErrNotFound when it is missing or expired at now.
func (s *Store) getLive(ctx context.Context, bucket []byte, key string, now time.Time, v any) error {
	return s.read(ctx, func(tx *bbolt.Tx) error {
		r, ok, err := get(tx.Bucket(bucket), []byte(key), now)
		if err != nil {
			return err
		}
		if !ok {
			return oauth.ErrNotFound
		}
		return decode(r.body, v)
	})
}
