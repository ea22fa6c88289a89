package keys_test

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// registry is the key registry of the tests: the embedded store, the one the local
// server uses, with two hooks. beforeWrite runs between a rotation's plan and the store's
// version check (so a test can make a concurrent writer win the race); failReads makes Keys
// fail.
type registry struct {
	oauth.KeyStore
	beforeWrite func()
	failReads   error
	reads       atomic.Int64
}

// countReads returns a function that reports how many times Keys was called since.
func countReads(r *registry) func() int64 {
	start := r.reads.Load()
	return func() int64 { return r.reads.Load() - start }
}

func newRegistry(t *testing.T) *registry { return benchRegistry(t) }

// benchRegistry is newRegistry for tests and benchmarks alike.
func benchRegistry(t testing.TB) *registry {
	t.Helper()
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &registry{KeyStore: st}
}

func (r *registry) Keys(ctx context.Context) (oauth.KeySet, error) {
	r.reads.Add(1)
	if r.failReads != nil {
		return oauth.KeySet{}, r.failReads
	}
	return r.KeyStore.Keys(ctx)
}

func (r *registry) UpdateKeys(ctx context.Context, fn func(oauth.KeySet) (oauth.KeySet, error)) error {
	return r.KeyStore.UpdateKeys(ctx, func(s oauth.KeySet) (oauth.KeySet, error) {
		out, err := fn(s)
		if hook := r.beforeWrite; hook != nil && err == nil {
			hook()
		}
		return out, err
	})
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *fakeClock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

func (c *fakeClock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// flakyBackend wraps a backend, counts Sign calls and fails them on demand.
type flakyBackend struct {
	keys.Backend
	signs   atomic.Int64
	signErr atomic.Pointer[error]
}

func (f *flakyBackend) Sign(ctx context.Context, ref, alg string, digest []byte) ([]byte, error) {
	f.signs.Add(1)
	if p := f.signErr.Load(); p != nil {
		return nil, *p
	}
	return f.Backend.Sign(ctx, ref, alg, digest)
}

// SignsInProcess is the wrapped backend's (keys.InProcessSigner): a local key backend under
// the wrapper is still one that signs in process.
func (f *flakyBackend) SignsInProcess(ref string) bool {
	b, ok := f.Backend.(keys.InProcessSigner)
	return ok && b.SignsInProcess(ref)
}

func (f *flakyBackend) failSign(err error) {
	if err == nil {
		f.signErr.Store(nil)
		return
	}
	f.signErr.Store(&err)
}

// installKey creates an alg key in b and registers it in reg in the given state (a new current
// key retires the current key of its algorithm).
func installKey(reg oauth.KeyStore, b keys.Backend, alg, state string, now time.Time) (oauth.SigningKey, crypto.PublicKey, error) {
	ref, pub, err := b.CreateKey(context.Background(), alg)
	if err != nil {
		return oauth.SigningKey{}, nil, err
	}
	k, err := keys.NewSigningKey(ref, alg, pub, now)
	if err != nil {
		return oauth.SigningKey{}, nil, err
	}
	k.State = state
	err = reg.UpdateKeys(context.Background(), func(s oauth.KeySet) (oauth.KeySet, error) {
		for i := range s.Keys {
			if state == oauth.KeyCurrent && s.Keys[i].State == oauth.KeyCurrent && s.Keys[i].Algorithm() == alg {
				s.Keys[i].State = oauth.KeyRetired
			}
		}
		s.Keys = append(s.Keys, k)
		return s, nil
	})
	if err != nil {
		return oauth.SigningKey{}, nil, fmt.Errorf("register: %w", err)
	}
	return k, pub, nil
}

var errBoom = errors.New("boom")

// jwksKids returns the kids of a JWKS document.
func jwksKids(t interface{ Fatal(...any) }, body []byte) []string {
	var doc struct {
		Keys []struct {
			Kid string `json:"kid"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range doc.Keys {
		out = append(out, k.Kid)
	}
	return out
}
