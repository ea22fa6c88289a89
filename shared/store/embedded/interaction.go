package embedded

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// PutAuthRequest stores a pending authorization request.
func (s *Store) PutAuthRequest(ctx context.Context, r oauth.AuthRequest) error {
	if err := requireExpiry("auth request", r.ExpiresAt); err != nil {
		return err
	}
	fb := getFrame()
	defer putFrame(fb)
	*fb = appendBinary(*fb, kindRequest, r.ID, func(b []byte) []byte { return appendRequest(b, &r) })
	r = cloneRequest(r)
	return s.change(ctx, func() ([]byte, error) {
		s.requests[r.ID] = &r
		return *fb, nil
	})
}

// GetAuthRequest returns a pending request; expired ones are ErrNotFound.
func (s *Store) GetAuthRequest(ctx context.Context, id string, now time.Time) (oauth.AuthRequest, error) {
	p, err := lookup(ctx, s, s.requests, id)
	if err != nil {
		return oauth.AuthRequest{}, err
	}
	if !live(p.ExpiresAt, now) {
		return oauth.AuthRequest{}, oauth.ErrNotFound
	}
	return cloneRequest(*p), nil
}

// TakeAuthRequest deletes and returns a pending request, once.
func (s *Store) TakeAuthRequest(ctx context.Context, id string, now time.Time) (oauth.AuthRequest, error) {
	var small [128]byte
	var r *oauth.AuthRequest
	err := s.change(ctx, func() ([]byte, error) {
		p, ok := s.requests[id]
		if !ok || !live(p.ExpiresAt, now) {
			return nil, oauth.ErrNotFound
		}
		r = p
		delete(s.requests, id)
		return appendEntry(small[:0], kindRequest, opDelete, id, nil), nil
	})
	if r == nil {
		return oauth.AuthRequest{}, err
	}
	return cloneRequest(*r), err
}

// PutSession stores a browser session.
func (s *Store) PutSession(ctx context.Context, x oauth.Session) error {
	if err := requireExpiry("session", x.ExpiresAt); err != nil {
		return err
	}
	fb := getFrame()
	defer putFrame(fb)
	*fb = appendBinary(*fb, kindSession, x.Hash, func(b []byte) []byte { return appendSession(b, &x) })
	return s.change(ctx, func() ([]byte, error) {
		s.sessions[x.Hash] = &x
		return *fb, nil
	})
}

// GetSession returns a live session.
func (s *Store) GetSession(ctx context.Context, hash string, now time.Time) (oauth.Session, error) {
	p, err := lookup(ctx, s, s.sessions, hash)
	if err != nil {
		return oauth.Session{}, err
	}
	if !live(p.ExpiresAt, now) {
		return oauth.Session{}, oauth.ErrNotFound
	}
	return *p, nil
}

// DeleteSession deletes a session; an unknown one is not an error.
func (s *Store) DeleteSession(ctx context.Context, hash string) error {
	return s.deleteItem(ctx, kindSession, hash)
}

// CountFailure adds one failure to key's counter and returns the new count; a counter lives
// for window from its first failure.
func (s *Store) CountFailure(ctx context.Context, key string, window time.Duration, now time.Time) (int, error) {
	var count int
	err := s.change(ctx, func() ([]byte, error) {
		c := failureCounter{ExpiresAt: now.Add(window)}
		if p, ok := s.failures[key]; ok && live(p.ExpiresAt, now) {
			c = *p
		}
		c.Count++
		body, err := appendJSON(nil, kindFailure, key, &c)
		if err != nil {
			return nil, fmt.Errorf("embedded store: count failure: %w", err)
		}
		s.failures[key] = &c
		count = c.Count
		return body, nil
	})
	return count, err
}

// Failures returns key's current count (zero when none or expired).
func (s *Store) Failures(ctx context.Context, key string, now time.Time) (int, error) {
	p, err := lookup(ctx, s, s.failures, key)
	switch {
	case errors.Is(err, oauth.ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	case !live(p.ExpiresAt, now):
		return 0, nil
	}
	return p.Count, nil
}

// ResetFailures forgets key's counter.
func (s *Store) ResetFailures(ctx context.Context, key string) error {
	return s.deleteItem(ctx, kindFailure, key)
}
