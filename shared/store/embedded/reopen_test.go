package embedded_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
	"github.com/acmebank/authserver/shared/store/storetest"
)

// reopening is a store that closes and reopens its file after every call that writes, so that
// every read of the conformance suite after a write is served by a store opened afresh from
// the file: what is stored (every field of every item, as JSON) must give back exactly what the
// writes made, for every behaviour the suite checks, and every reopen passes Open's checks.
type reopening struct {
	t   testing.TB
	dir string

	mu sync.RWMutex
	s  *embedded.Store
}

func newReopening(t testing.TB) *reopening {
	s, dir := openTemp(t, embedded.Options{NoSync: true})
	return &reopening{t: t, dir: dir, s: s}
}

// read runs f on the current store.
func (r *reopening) read(f func(s *embedded.Store)) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	f(r.s)
}

// write runs f, then closes the store and opens it again from its file.
func (r *reopening) write(f func(s *embedded.Store)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r.s)
	if err := r.s.Close(); err != nil {
		r.t.Errorf("Close: %v", err)
	}
	s, err := embedded.OpenWith(r.dir, embedded.Options{NoSync: true})
	if err != nil {
		r.t.Fatalf("reopen: %v", err)
	}
	r.s = s
	r.t.Cleanup(func() { s.Close() })
}

func TestConformance_ReopenedAfterEveryWrite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) oauth.Store { return newReopening(t) })
}

var _ oauth.Store = (*reopening)(nil)

func (r *reopening) CreateCode(ctx context.Context, c oauth.Code) (err error) {
	r.write(func(s *embedded.Store) { err = s.CreateCode(ctx, c) })
	return
}
func (r *reopening) ConsumeCode(ctx context.Context, h, cid string, now time.Time, once ...oauth.Once) (c oauth.Code, err error) {
	r.write(func(s *embedded.Store) { c, err = s.ConsumeCode(ctx, h, cid, now, once...) })
	return
}
func (r *reopening) IssueTokens(ctx context.Context, in oauth.Issue, now time.Time) (err error) {
	r.write(func(s *embedded.Store) { err = s.IssueTokens(ctx, in, now) })
	return
}
func (r *reopening) GetToken(ctx context.Context, h string, now time.Time) (t oauth.Token, err error) {
	r.read(func(s *embedded.Store) { t, err = s.GetToken(ctx, h, now) })
	return
}
func (r *reopening) RevokeToken(ctx context.Context, h string) (err error) {
	r.write(func(s *embedded.Store) { err = s.RevokeToken(ctx, h) })
	return
}
func (r *reopening) RevokeGrant(ctx context.Context, id string, now time.Time) (err error) {
	r.write(func(s *embedded.Store) { err = s.RevokeGrant(ctx, id, now) })
	return
}
func (r *reopening) ConsumeGrant(ctx context.Context, id string, now time.Time, once ...oauth.Once) (err error) {
	r.write(func(s *embedded.Store) { err = s.ConsumeGrant(ctx, id, now, once...) })
	return
}
func (r *reopening) UseOnce(ctx context.Context, key string, expires, now time.Time) (err error) {
	r.write(func(s *embedded.Store) { err = s.UseOnce(ctx, key, expires, now) })
	return
}
func (r *reopening) PutInitialAccessToken(ctx context.Context, t oauth.InitialAccessToken) (err error) {
	r.write(func(s *embedded.Store) { err = s.PutInitialAccessToken(ctx, t) })
	return
}
func (r *reopening) GetInitialAccessToken(ctx context.Context, h string, now time.Time) (t oauth.InitialAccessToken, err error) {
	r.read(func(s *embedded.Store) { t, err = s.GetInitialAccessToken(ctx, h, now) })
	return
}
func (r *reopening) TakeInitialAccessToken(ctx context.Context, h string, now time.Time) (t oauth.InitialAccessToken, err error) {
	r.write(func(s *embedded.Store) { t, err = s.TakeInitialAccessToken(ctx, h, now) })
	return
}
func (r *reopening) Factors(ctx context.Context, uid string) (f oauth.UserFactors, err error) {
	r.read(func(s *embedded.Store) { f, err = s.Factors(ctx, uid) })
	return
}
func (r *reopening) UpdateFactors(ctx context.Context, uid string, fn func(oauth.UserFactors) (oauth.UserFactors, error)) (err error) {
	r.write(func(s *embedded.Store) { err = s.UpdateFactors(ctx, uid, fn) })
	return
}
func (r *reopening) GetGrant(ctx context.Context, id string, now time.Time) (g oauth.GrantRecord, err error) {
	r.read(func(s *embedded.Store) { g, err = s.GetGrant(ctx, id, now) })
	return
}
func (r *reopening) ListGrants(ctx context.Context, f oauth.GrantFilter, now time.Time) (g []oauth.GrantRecord, err error) {
	r.read(func(s *embedded.Store) { g, err = s.ListGrants(ctx, f, now) })
	return
}
func (r *reopening) GetClient(ctx context.Context, id string) (c oauth.Client, err error) {
	r.read(func(s *embedded.Store) { c, err = s.GetClient(ctx, id) })
	return
}
func (r *reopening) CreateClient(ctx context.Context, c oauth.Client) (err error) {
	r.write(func(s *embedded.Store) { err = s.CreateClient(ctx, c) })
	return
}
func (r *reopening) UpdateClient(ctx context.Context, id string, fn func(oauth.Client) (oauth.Client, error)) (err error) {
	r.write(func(s *embedded.Store) { err = s.UpdateClient(ctx, id, fn) })
	return
}
func (r *reopening) DeleteClient(ctx context.Context, id string) (err error) {
	r.write(func(s *embedded.Store) { err = s.DeleteClient(ctx, id) })
	return
}
func (r *reopening) ListClients(ctx context.Context) (c []oauth.Client, err error) {
	r.read(func(s *embedded.Store) { c, err = s.ListClients(ctx) })
	return
}
func (r *reopening) GetUser(ctx context.Context, uid string) (u oauth.User, err error) {
	r.read(func(s *embedded.Store) { u, err = s.GetUser(ctx, uid) })
	return
}
func (r *reopening) GetUserByUsername(ctx context.Context, name string) (u oauth.User, err error) {
	r.read(func(s *embedded.Store) { u, err = s.GetUserByUsername(ctx, name) })
	return
}
func (r *reopening) CreateUser(ctx context.Context, u oauth.User) (err error) {
	r.write(func(s *embedded.Store) { err = s.CreateUser(ctx, u) })
	return
}
func (r *reopening) UpdateUser(ctx context.Context, uid string, fn func(oauth.User) (oauth.User, error)) (err error) {
	r.write(func(s *embedded.Store) { err = s.UpdateUser(ctx, uid, fn) })
	return
}
func (r *reopening) DeleteUser(ctx context.Context, uid string) (err error) {
	r.write(func(s *embedded.Store) { err = s.DeleteUser(ctx, uid) })
	return
}
func (r *reopening) ListUsers(ctx context.Context) (u []oauth.User, err error) {
	r.read(func(s *embedded.Store) { u, err = s.ListUsers(ctx) })
	return
}
func (r *reopening) PutAuthRequest(ctx context.Context, a oauth.AuthRequest) (err error) {
	r.write(func(s *embedded.Store) { err = s.PutAuthRequest(ctx, a) })
	return
}
func (r *reopening) GetAuthRequest(ctx context.Context, id string, now time.Time) (a oauth.AuthRequest, err error) {
	r.read(func(s *embedded.Store) { a, err = s.GetAuthRequest(ctx, id, now) })
	return
}
func (r *reopening) TakeAuthRequest(ctx context.Context, id string, now time.Time) (a oauth.AuthRequest, err error) {
	r.write(func(s *embedded.Store) { a, err = s.TakeAuthRequest(ctx, id, now) })
	return
}
func (r *reopening) PutSession(ctx context.Context, x oauth.Session) (err error) {
	r.write(func(s *embedded.Store) { err = s.PutSession(ctx, x) })
	return
}
func (r *reopening) GetSession(ctx context.Context, h string, now time.Time) (x oauth.Session, err error) {
	r.read(func(s *embedded.Store) { x, err = s.GetSession(ctx, h, now) })
	return
}
func (r *reopening) DeleteSession(ctx context.Context, h string) (err error) {
	r.write(func(s *embedded.Store) { err = s.DeleteSession(ctx, h) })
	return
}
func (r *reopening) TakeSession(ctx context.Context, h string) (err error) {
	r.write(func(s *embedded.Store) { err = s.TakeSession(ctx, h) })
	return
}
func (r *reopening) CountFailure(ctx context.Context, key string, w time.Duration, now time.Time) (n int, err error) {
	r.write(func(s *embedded.Store) { n, err = s.CountFailure(ctx, key, w, now) })
	return
}
func (r *reopening) Failures(ctx context.Context, key string, now time.Time) (n int, err error) {
	r.read(func(s *embedded.Store) { n, err = s.Failures(ctx, key, now) })
	return
}
func (r *reopening) ResetFailures(ctx context.Context, key string) (err error) {
	r.write(func(s *embedded.Store) { err = s.ResetFailures(ctx, key) })
	return
}
func (r *reopening) Keys(ctx context.Context) (k oauth.KeySet, err error) {
	r.read(func(s *embedded.Store) { k, err = s.Keys(ctx) })
	return
}

func (r *reopening) NonceKeys(ctx context.Context) (k oauth.NonceKeySet, err error) {
	r.read(func(s *embedded.Store) { k, err = s.NonceKeys(ctx) })
	return
}

func (r *reopening) PairwiseSalt(ctx context.Context, fresh []byte) (salt []byte, err error) {
	r.write(func(s *embedded.Store) { salt, err = s.PairwiseSalt(ctx, fresh) })
	return
}

// UpdateNonceKeys is UpdateKeys for the DPoP nonce keys.
func (r *reopening) UpdateNonceKeys(ctx context.Context, fn func(oauth.NonceKeySet) (oauth.NonceKeySet, error)) error {
	return reopenedCAS(r, ctx, r.NonceKeys, (*embedded.Store).UpdateNonceKeys, func(k oauth.NonceKeySet) int64 { return k.Version }, fn)
}

// UpdateKeys reads the set and runs fn outside any lock (the suite's fn may call the store and
// waits for other racers), then makes the compare-and-swap on the current store and reopens.
func (r *reopening) UpdateKeys(ctx context.Context, fn func(oauth.KeySet) (oauth.KeySet, error)) error {
	return reopenedCAS(r, ctx, r.Keys, (*embedded.Store).UpdateKeys, func(k oauth.KeySet) int64 { return k.Version }, fn)
}

// reopenedCAS is the reopening store's update of a versioned record: read, fn outside any
// lock, then the store's own update as a compare-and-swap on the version read, and reopen.
func reopenedCAS[T any](r *reopening, ctx context.Context, read func(context.Context) (T, error),
	update func(*embedded.Store, context.Context, func(T) (T, error)) error, version func(T) int64, fn func(T) (T, error)) error {
	cur, err := read(ctx)
	if err != nil {
		return err
	}
	next, err := fn(cur)
	if err != nil {
		return err
	}
	r.write(func(s *embedded.Store) {
		err = update(s, ctx, func(now T) (T, error) {
			if version(now) != version(cur) {
				return now, oauth.ErrConflict
			}
			return next, nil
		})
	})
	return err
}
func (r *reopening) PutBackchannelRequest(ctx context.Context, b oauth.BackchannelRequest) (err error) {
	r.write(func(s *embedded.Store) { err = s.PutBackchannelRequest(ctx, b) })
	return
}
func (r *reopening) GetBackchannelRequest(ctx context.Context, id string, now time.Time) (b oauth.BackchannelRequest, err error) {
	r.read(func(s *embedded.Store) { b, err = s.GetBackchannelRequest(ctx, id, now) })
	return
}
func (r *reopening) PollBackchannelRequest(ctx context.Context, id, cid string, now time.Time) (b oauth.BackchannelRequest, err error) {
	r.write(func(s *embedded.Store) { b, err = s.PollBackchannelRequest(ctx, id, cid, now) })
	return
}
func (r *reopening) DecideBackchannelRequest(ctx context.Context, id, uid string, d oauth.BackchannelDecision, now time.Time) (b oauth.BackchannelRequest, err error) {
	r.write(func(s *embedded.Store) { b, err = s.DecideBackchannelRequest(ctx, id, uid, d, now) })
	return
}
func (r *reopening) ConsumeBackchannelRequest(ctx context.Context, id, cid string, now time.Time, once ...oauth.Once) (b oauth.BackchannelRequest, err error) {
	r.write(func(s *embedded.Store) { b, err = s.ConsumeBackchannelRequest(ctx, id, cid, now, once...) })
	return
}
func (r *reopening) ListBackchannelRequests(ctx context.Context, uid string, now time.Time) (b []oauth.BackchannelRequest, err error) {
	r.read(func(s *embedded.Store) { b, err = s.ListBackchannelRequests(ctx, uid, now) })
	return
}
