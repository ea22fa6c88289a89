package embedded

import (
	"context"
	"fmt"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// PutAuthRequest stores a pending authorization request.
func (s *Store) PutAuthRequest(ctx context.Context, r oauth.AuthRequest) error {
	if err := requireExpiry("auth request", r.ExpiresAt); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	fb := getFrame()
	defer putFrame(fb)
	body := appendBinary(*fb, kindRequest, r.ID, func(b []byte) []byte { return appendRequest(b, &r) })
	*fb = body
	r = cloneRequest(r)
	s.mu.Lock()
	if err := s.log.usable(); err != nil {
		s.mu.Unlock()
		return err
	}
	s.requests[r.ID] = &r
	b := s.log.append(body)
	s.mu.Unlock()
	return s.log.commit(b)
}

// GetAuthRequest returns a pending request; expired ones are ErrNotFound.
func (s *Store) GetAuthRequest(ctx context.Context, id string, now time.Time) (oauth.AuthRequest, error) {
	if err := ctx.Err(); err != nil {
		return oauth.AuthRequest{}, err
	}
	s.mu.RLock()
	if err := s.log.usable(); err != nil {
		s.mu.RUnlock()
		return oauth.AuthRequest{}, err
	}
	p, ok := s.requests[id]
	var r oauth.AuthRequest
	if ok {
		r = *p
	}
	s.mu.RUnlock()
	if !ok || !live(r.ExpiresAt, now) {
		return oauth.AuthRequest{}, oauth.ErrNotFound
	}
	return cloneRequest(r), nil
}

// TakeAuthRequest deletes and returns a pending request, once.
func (s *Store) TakeAuthRequest(ctx context.Context, id string, now time.Time) (oauth.AuthRequest, error) {
	if err := ctx.Err(); err != nil {
		return oauth.AuthRequest{}, err
	}
	var small [128]byte
	s.mu.Lock()
	if err := s.log.usable(); err != nil {
		s.mu.Unlock()
		return oauth.AuthRequest{}, err
	}
	p, ok := s.requests[id]
	if !ok || !live(p.ExpiresAt, now) {
		s.mu.Unlock()
		return oauth.AuthRequest{}, oauth.ErrNotFound
	}
	r := *p
	delete(s.requests, id)
	b := s.log.append(appendEntry(small[:0], kindRequest, opDelete, id, nil))
	s.mu.Unlock()
	return cloneRequest(r), s.log.commit(b)
}

// PutSession stores a browser session.
func (s *Store) PutSession(ctx context.Context, x oauth.Session) error {
	if err := requireExpiry("session", x.ExpiresAt); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	fb := getFrame()
	defer putFrame(fb)
	body := appendBinary(*fb, kindSession, x.Hash, func(b []byte) []byte { return appendSession(b, &x) })
	*fb = body
	s.mu.Lock()
	if err := s.log.usable(); err != nil {
		s.mu.Unlock()
		return err
	}
	s.sessions[x.Hash] = &x
	b := s.log.append(body)
	s.mu.Unlock()
	return s.log.commit(b)
}

// GetSession returns a live session.
func (s *Store) GetSession(ctx context.Context, hash string, now time.Time) (oauth.Session, error) {
	if err := ctx.Err(); err != nil {
		return oauth.Session{}, err
	}
	s.mu.RLock()
	if err := s.log.usable(); err != nil {
		s.mu.RUnlock()
		return oauth.Session{}, err
	}
	p, ok := s.sessions[hash]
	var x oauth.Session
	if ok {
		x = *p
	}
	s.mu.RUnlock()
	if !ok || !live(x.ExpiresAt, now) {
		return oauth.Session{}, oauth.ErrNotFound
	}
	return x, nil
}

// DeleteSession deletes a session; an unknown one is not an error.
func (s *Store) DeleteSession(ctx context.Context, hash string) error {
	return s.deleteItem(ctx, kindSession, hash)
}

// CountFailure adds one failure to key's counter and returns the new count; a counter lives
// for window from its first failure.
func (s *Store) CountFailure(ctx context.Context, key string, window time.Duration, now time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	if err := s.log.usable(); err != nil {
		s.mu.Unlock()
		return 0, err
	}
	c := failureCounter{ExpiresAt: now.Add(window)}
	if p, ok := s.failures[key]; ok && live(p.ExpiresAt, now) {
		c = *p
	}
	c.Count++
	body, err := appendJSON(nil, kindFailure, key, &c)
	if err != nil {
		s.mu.Unlock()
		return 0, fmt.Errorf("embedded store: count failure: %w", err)
	}
	s.failures[key] = &c
	b := s.log.append(body)
	s.mu.Unlock()
	return c.Count, s.log.commit(b)
}

// Failures returns key's current count (zero when none or expired).
func (s *Store) Failures(ctx context.Context, key string, now time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.log.usable(); err != nil {
		return 0, err
	}
	if p, ok := s.failures[key]; ok && live(p.ExpiresAt, now) {
		return p.Count, nil
	}
	return 0, nil
}

// ResetFailures forgets key's counter.
func (s *Store) ResetFailures(ctx context.Context, key string) error {
	return s.deleteItem(ctx, kindFailure, key)
}
