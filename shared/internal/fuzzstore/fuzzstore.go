// Package fuzzstore is the small in-memory store of the HTTP handlers' fuzz targets (shared/
// httpapi and shared/web), shared so that both fuzz the same store. It is for tests only.
package fuzzstore

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// Store is a small in-memory store for the fuzz targets of the handlers: fast enough for
// tens of thousands of requests a second, and complete for every call the authorize, token and
// revoke paths make. It holds one client and one user and no grants, so token requests end at
// the code or refresh-token lookup, after all the parsing the fuzzer is after.
type Store struct {
	oauth.Store // nil: a call the paths do not make panics, which the fuzzer reports

	mu sync.Mutex

	// Client and User are the one client and user it holds.
	Client   oauth.Client
	User     oauth.User
	requests map[string]oauth.AuthRequest
	sessions map[string]oauth.Session
	failures map[string]int
	codes    int
}

// The one client (with its secret and redirect URI) and user a Store holds.
const (
	ClientID = "fuzz-client"
	Secret   = "fuzz-secret-0123456789abcdef-0123456789"
	Redirect = "https://client.example/cb"
	Username = "fuzzer"
)

// New returns a Store whose user has passwordHash ("" for the paths that sign nobody in).
func New(passwordHash string) *Store {
	return &Store{
		Client: oauth.Client{ID: ClientID, Name: "Fuzz <App>", SecretHashes: []oauth.SecretHash{{Hash: oauth.HashSecret(Secret)}},
			RedirectURIs: []string{Redirect, "http://127.0.0.1:9999/cb?x=1"}, Scopes: []string{"openid", "email", "profile", "bank:transfers:write"}},
		User:     oauth.User{UID: "uid-f", Username: Username, PasswordHash: passwordHash},
		requests: map[string]oauth.AuthRequest{},
		sessions: map[string]oauth.Session{},
		failures: map[string]int{},
	}
}

func (m *Store) GetClient(_ context.Context, id string) (oauth.Client, error) {
	if id != m.Client.ID {
		return oauth.Client{}, oauth.ErrNotFound
	}
	return m.Client, nil
}

func (m *Store) GetUser(_ context.Context, uid string) (oauth.User, error) {
	if uid != m.User.UID {
		return oauth.User{}, oauth.ErrNotFound
	}
	return m.User, nil
}

func (m *Store) GetUserByUsername(_ context.Context, u string) (oauth.User, error) {
	if u != m.User.Username {
		return oauth.User{}, oauth.ErrNotFound
	}
	return m.User, nil
}

func (m *Store) PutAuthRequest(_ context.Context, r oauth.AuthRequest) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.requests) > 1000 {
		clear(m.requests)
	}
	m.requests[r.ID] = r
	return nil
}

func (m *Store) GetAuthRequest(_ context.Context, id string, now time.Time) (oauth.AuthRequest, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.requests[id]
	if !ok || !now.Before(r.ExpiresAt) {
		return oauth.AuthRequest{}, oauth.ErrNotFound
	}
	return r, nil
}

func (m *Store) TakeAuthRequest(ctx context.Context, id string, now time.Time) (oauth.AuthRequest, error) {
	r, err := m.GetAuthRequest(ctx, id, now)
	if err == nil {
		m.mu.Lock()
		delete(m.requests, id)
		m.mu.Unlock()
	}
	return r, err
}

func (m *Store) PutSession(_ context.Context, s oauth.Session) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.sessions) > 1000 {
		clear(m.sessions)
	}
	m.sessions[s.Hash] = s
	return nil
}

func (m *Store) GetSession(_ context.Context, hash string, now time.Time) (oauth.Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[hash]
	if !ok || !now.Before(s.ExpiresAt) {
		return oauth.Session{}, oauth.ErrNotFound
	}
	return s, nil
}

func (m *Store) TakeSession(_ context.Context, hash string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.sessions[hash]; !ok {
		return oauth.ErrNotFound
	}
	delete(m.sessions, hash)
	return nil
}

func (m *Store) DeleteSession(_ context.Context, hash string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.sessions, hash)
	return nil
}

func (m *Store) CountFailure(_ context.Context, key string, _ time.Duration, _ time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failures[key]++
	return m.failures[key], nil
}

func (m *Store) Failures(_ context.Context, key string, _ time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failures[key], nil
}

func (m *Store) ResetFailures(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.failures, key)
	return nil
}

func (m *Store) CreateCode(context.Context, oauth.Code) error {
	m.mu.Lock()
	m.codes++
	m.mu.Unlock()
	return nil
}

func (m *Store) ConsumeCode(context.Context, string, string, time.Time, ...oauth.Once) (oauth.Code, error) {
	return oauth.Code{}, oauth.ErrNotFound
}

func (m *Store) GetToken(context.Context, string, time.Time) (oauth.Token, error) {
	return oauth.Token{}, oauth.ErrNotFound
}

// Factors: the fuzzed user holds no second factor.
func (m *Store) Factors(_ context.Context, uid string) (oauth.UserFactors, error) {
	return oauth.UserFactors{UID: uid}, nil
}

// Service is the token domain over st with a fixed clock.
func Service(st *Store) *oauth.Service {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return &oauth.Service{
		Clients: st, Interactions: st, Grants: st, Replay: st,
		Clock:  oauth.ClockFunc(func() time.Time { return now }),
		Issuer: "https://auth.example/v2/authentication/oauth2",
		Lifetimes: oauth.Lifetimes{AccessToken: time.Hour, RefreshToken: 24 * time.Hour, Grant: 48 * time.Hour,
			Code: time.Minute, IDToken: time.Hour, Session: time.Hour, Request: time.Hour},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}
