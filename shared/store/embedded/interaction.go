package embedded

import (
	"context"
	"time"

	"go.etcd.io/bbolt"

	"github.com/acmebank/authserver/shared/oauth"
)

// failureCounter is a login-failure counter of InteractionStore.
type failureCounter struct {
	Count     int       `json:"count"`
	ExpiresAt time.Time `json:"expires_at"`
}

// PutAuthRequest stores a pending authorization request.
func (s *Store) PutAuthRequest(ctx context.Context, r oauth.AuthRequest) error {
	if err := requireExpiry("auth request", r.ExpiresAt); err != nil {
		return err
	}
	return s.update(ctx, func(tx *bbolt.Tx) error { return put(tx, bRequests, r.ID, r) })
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
		if err := getLive(tx, bRequests, id, &r, &r.ExpiresAt, now); err != nil {
			return err
		}
		return del(tx, bRequests, id)
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

// CountFailure adds one failure to key's counter and returns the new count; a counter lives
// for window from its first failure.
func (s *Store) CountFailure(ctx context.Context, key string, window time.Duration, now time.Time) (int, error) {
	var c failureCounter
	err := s.update(ctx, func(tx *bbolt.Tx) error {
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
