package web

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/pages"
)

// memStore is a small in-memory store for the fuzz targets of the handlers: fast enough for
// tens of thousands of requests a second, and complete for every call the authorize, token and
// revoke paths make. It holds one client and one user and no grants, so token requests end at
// the code or refresh-token lookup, after all the parsing the fuzzer is after.
type memStore struct {
	oauth.Store // nil: a call the paths do not make panics, which the fuzzer reports

	mu       sync.Mutex
	client   oauth.Client
	user     oauth.User
	requests map[string]oauth.AuthRequest
	sessions map[string]oauth.Session
	failures map[string]int
	codes    int
}

const (
	fuzzClientID = "fuzz-client"
	fuzzSecret   = "fuzz-secret-0123456789abcdef-0123456789"
	fuzzRedirect = "https://client.example/cb"
	fuzzUser     = "fuzzer"
	fuzzPassword = "fuzz-password"
)

var fuzzHasher = authn.PasswordHasher{Time: 1, MemoryKiB: 8, Threads: 1}

func newMemStore() *memStore {
	return &memStore{
		client: oauth.Client{ID: fuzzClientID, Name: "Fuzz <App>", SecretHashes: []oauth.SecretHash{{Hash: oauth.HashSecret(fuzzSecret)}},
			RedirectURIs: []string{fuzzRedirect, "http://127.0.0.1:9999/cb?x=1"}, Scopes: []string{"openid", "email", "profile", "bank:transfers:write"}},
		user:     oauth.User{UID: "uid-f", Username: fuzzUser, PasswordHash: fuzzHasher.Hash(fuzzPassword)},
		requests: map[string]oauth.AuthRequest{},
		sessions: map[string]oauth.Session{},
		failures: map[string]int{},
	}
}

func (m *memStore) GetClient(_ context.Context, id string) (oauth.Client, error) {
	if id != m.client.ID {
		return oauth.Client{}, oauth.ErrNotFound
	}
	return m.client, nil
}

func (m *memStore) GetUser(_ context.Context, uid string) (oauth.User, error) {
	if uid != m.user.UID {
		return oauth.User{}, oauth.ErrNotFound
	}
	return m.user, nil
}

func (m *memStore) GetUserByUsername(_ context.Context, u string) (oauth.User, error) {
	if u != m.user.Username {
		return oauth.User{}, oauth.ErrNotFound
	}
	return m.user, nil
}

func (m *memStore) PutAuthRequest(_ context.Context, r oauth.AuthRequest) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.requests) > 1000 {
		clear(m.requests)
	}
	m.requests[r.ID] = r
	return nil
}

func (m *memStore) GetAuthRequest(_ context.Context, id string, now time.Time) (oauth.AuthRequest, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.requests[id]
	if !ok || !now.Before(r.ExpiresAt) {
		return oauth.AuthRequest{}, oauth.ErrNotFound
	}
	return r, nil
}

func (m *memStore) TakeAuthRequest(ctx context.Context, id string, now time.Time) (oauth.AuthRequest, error) {
	r, err := m.GetAuthRequest(ctx, id, now)
	if err == nil {
		m.mu.Lock()
		delete(m.requests, id)
		m.mu.Unlock()
	}
	return r, err
}

func (m *memStore) PutSession(_ context.Context, s oauth.Session) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.sessions) > 1000 {
		clear(m.sessions)
	}
	m.sessions[s.Hash] = s
	return nil
}

func (m *memStore) GetSession(_ context.Context, hash string, now time.Time) (oauth.Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[hash]
	if !ok || !now.Before(s.ExpiresAt) {
		return oauth.Session{}, oauth.ErrNotFound
	}
	return s, nil
}

func (m *memStore) DeleteSession(_ context.Context, hash string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.sessions, hash)
	return nil
}

func (m *memStore) CountFailure(_ context.Context, key string, _ time.Duration, _ time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failures[key]++
	return m.failures[key], nil
}

func (m *memStore) Failures(_ context.Context, key string, _ time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failures[key], nil
}

func (m *memStore) ResetFailures(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.failures, key)
	return nil
}

func (m *memStore) CreateCode(context.Context, oauth.Code) error {
	m.mu.Lock()
	m.codes++
	m.mu.Unlock()
	return nil
}

func (m *memStore) ConsumeCode(context.Context, string, string, time.Time) (oauth.Code, error) {
	return oauth.Code{}, oauth.ErrNotFound
}

func (m *memStore) GetToken(context.Context, string, time.Time) (oauth.Token, error) {
	return oauth.Token{}, oauth.ErrNotFound
}

// Factors: the fuzzed user holds no second factor.
func (m *memStore) Factors(_ context.Context, uid string) (oauth.UserFactors, error) {
	return oauth.UserFactors{UID: uid}, nil
}

// fuzzService is a Service over a fresh memStore with a fixed clock.
func fuzzService(tb testing.TB) (*oauth.Service, *memStore) {
	tb.Helper()
	st := newMemStore()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return &oauth.Service{
		Clients: st, Interactions: st, Grants: st,
		Clock:  oauth.ClockFunc(func() time.Time { return now }),
		Issuer: "https://auth.example/v2/authentication/oauth2",
		Lifetimes: oauth.Lifetimes{AccessToken: time.Hour, RefreshToken: 24 * time.Hour, Grant: 48 * time.Hour,
			Code: time.Minute, IDToken: time.Hour, Session: time.Hour, Request: time.Hour},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, st
}

// fuzzUsers is the user's authentication of svc's fuzzService, over the same store.
func fuzzUsers(tb testing.TB, svc *oauth.Service, st *memStore) *authn.Service {
	tb.Helper()
	users, err := authn.New(authn.Deps{
		Users: st, Interactions: st, Factors: st, Clock: svc.Clock,
		Passwords:       fuzzHasher,
		SessionLifetime: svc.Lifetimes.Session,
		LoginPolicy:     authn.LoginPolicy{MaxFailures: 5, Window: time.Minute},
		Log:             svc.Log,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return users
}

func fuzzPages(tb testing.TB) *pages.Pages {
	tb.Helper()
	pg, err := pages.New(httpapi.PathAssets)
	if err != nil {
		tb.Fatal(err)
	}
	return pg
}
