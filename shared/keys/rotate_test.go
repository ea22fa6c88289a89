package keys_test

import (
	"context"
	"crypto"
	"errors"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/localkey"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/golang-jwt/jwt/v5"
)

type rotFixture struct {
	dir   string
	reg   *registry
	back  *countingBackend
	clock *fakeClock
	rot   *keys.Rotator
}

// countingBackend counts CreateKey calls and can fail CreateKey or ScheduleDeletion.
type countingBackend struct {
	keys.Backend
	creates     atomic.Int64
	failCreate  func(n int64) error
	failSchedul error
}

func (c *countingBackend) CreateKey(ctx context.Context, alg string) (string, crypto.PublicKey, error) {
	n := c.creates.Add(1)
	if c.failCreate != nil {
		if err := c.failCreate(n); err != nil {
			return "", nil, err
		}
	}
	return c.Backend.CreateKey(ctx, alg)
}

func (c *countingBackend) ScheduleDeletion(ctx context.Context, ref string) error {
	if c.failSchedul != nil {
		return c.failSchedul
	}
	return c.Backend.ScheduleDeletion(ctx, ref)
}

func newRotFixture(t *testing.T, p keys.Policy) *rotFixture {
	t.Helper()
	dir := t.TempDir()
	lb, err := localkey.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := &rotFixture{dir: dir, reg: newRegistry(t), back: &countingBackend{Backend: lb}, clock: newClock()}
	f.rot = keys.NewRotator(f.reg, f.back, p, f.clock, nil)
	return f
}

func (f *rotFixture) rotate(t *testing.T) keys.Report {
	t.Helper()
	rep, err := f.rot.Rotate(context.Background())
	if err != nil {
		t.Fatalf("Rotate at %v: %v", f.clock.Now(), err)
	}
	return rep
}

// states returns the registry as kid → state, and checks the invariants every registry must
// keep after any run: exactly one current key, at least one next key, and a private key file
// for exactly the keys that are not deleted.
func (f *rotFixture) states(t *testing.T) map[string]string {
	t.Helper()
	set, err := f.reg.Keys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var current, next int
	var live []string
	for _, k := range set.Keys {
		out[k.Kid] = k.State
		switch k.State {
		case oauth.KeyCurrent:
			current++
		case oauth.KeyNext:
			next++
		}
		if k.State != oauth.KeyDeleted {
			live = append(live, k.Ref)
		}
	}
	if current != 1 || next < 1 {
		t.Fatalf("registry has %d current and %d next keys, want 1 and at least 1: %v", current, next, out)
	}
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		files = append(files, e.Name())
	}
	slices.Sort(files)
	slices.Sort(live)
	if !slices.Equal(files, live) {
		t.Fatalf("key files %v, want exactly the registered, undeleted keys %v", files, live)
	}
	return out
}

func TestRotate_FreshRegistrySignsAtOnce(t *testing.T) {
	f := newRotFixture(t, keys.Policy{})
	rep := f.rotate(t)
	st := f.states(t)
	if !rep.Changed || len(rep.Created) != 2 || rep.Promoted == "" || rep.Current != rep.Promoted || rep.Next == "" {
		t.Fatalf("first run report %+v, want two keys created, one current at once and one next", rep)
	}
	if st[rep.Current] != oauth.KeyCurrent || st[rep.Next] != oauth.KeyNext {
		t.Fatalf("registry %v", st)
	}
	// No manual step: a signer signs right away.
	s := keys.NewSigner(f.reg, f.back, f.clock, 0)
	if _, err := s.SignJWT(context.Background(), jwt.MapClaims{"sub": "u"}); err != nil {
		t.Fatalf("signing after the first rotation: %v", err)
	}
	if want := f.clock.Now().Add(keys.DefaultRotationPeriod); !rep.NextRotation.Equal(want) {
		t.Fatalf("NextRotation %v, want %v", rep.NextRotation, want)
	}
}

func TestRotate_IsIdempotent(t *testing.T) {
	f := newRotFixture(t, keys.Policy{})
	f.rotate(t)
	before, _ := f.reg.Keys(context.Background())
	for range 3 {
		f.clock.Advance(time.Hour)
		if rep := f.rotate(t); rep.Changed {
			t.Fatalf("a run with nothing due changed the registry: %+v", rep)
		}
	}
	after, _ := f.reg.Keys(context.Background())
	if after.Version != before.Version || f.back.creates.Load() != 2 {
		t.Fatalf("registry version %d→%d, %d keys created; want no writes and no new keys", before.Version, after.Version, f.back.creates.Load())
	}
}

// TestRotate_FollowsTheTimingRules walks the default policy through two rotations and
// checks each state change happens exactly when it is due, not a second before.
func TestRotate_FollowsTheTimingRules(t *testing.T) {
	p := keys.DefaultPolicy()
	f := newRotFixture(t, p)
	t0 := f.clock.Now()
	first := f.rotate(t)
	a, b := first.Current, first.Next
	period, hold := p.RotationPeriod, p.RetiredHold()

	steps := []struct {
		at   time.Duration
		want func(st map[string]string, rep keys.Report) string // "" when fine
	}{
		{period - time.Second, func(st map[string]string, rep keys.Report) string {
			if rep.Changed {
				return "changed before the rotation period ended"
			}
			return ""
		}},
		{period, func(st map[string]string, rep keys.Report) string {
			if rep.Promoted != b || st[a] != oauth.KeyRetired || st[b] != oauth.KeyCurrent || len(rep.Created) != 1 {
				return "the next key was not promoted with a new next key when the period ended"
			}
			return ""
		}},
		{period + hold - time.Second, func(st map[string]string, rep keys.Report) string {
			if st[a] != oauth.KeyRetired || rep.Changed {
				return "the retired key left before its hold ended"
			}
			return ""
		}},
		{period + hold, func(st map[string]string, rep keys.Report) string {
			if st[a] != oauth.KeyDeleted || !slices.Equal(rep.Deleted, []string{a}) {
				return "the retired key was not deleted when its hold ended"
			}
			return ""
		}},
		{2 * period, func(st map[string]string, rep keys.Report) string {
			if st[b] != oauth.KeyRetired || rep.Promoted == "" || rep.Promoted == b {
				return "the second rotation did not happen"
			}
			return ""
		}},
	}
	for _, s := range steps {
		f.clock.Set(t0.Add(s.at))
		rep := f.rotate(t)
		st := f.states(t)
		if msg := s.want(st, rep); msg != "" {
			t.Fatalf("at t0+%v: %s; registry %v, report %+v", s.at, msg, st, rep)
		}
	}
	// The deleted key's private half is gone: its file was removed (checked by states) and
	// it no longer appears in the JWKS.
	set, _ := f.reg.Keys(context.Background())
	if body, _ := keys.PublicJWKS(set); slices.Contains(jwksKids(t, body), a) {
		t.Fatal("a deleted key is still published")
	}
}

func TestRotate_NextKeyWaitsForThePublishLead(t *testing.T) {
	p := keys.DefaultPolicy()
	f := newRotFixture(t, p)
	t0 := f.clock.Now()
	first := f.rotate(t)
	nextRef := refOf(t, f, first.Next)
	// Lose the next key (as if the registry had only a current one) long after t0.
	if err := f.reg.UpdateKeys(context.Background(), func(s oauth.KeySet) (oauth.KeySet, error) {
		s.Keys = slices.DeleteFunc(s.Keys, func(k oauth.SigningKey) bool { return k.State == oauth.KeyNext })
		return s, nil
	}); err != nil {
		t.Fatal(err)
	}
	_ = f.back.ScheduleDeletion(context.Background(), nextRef)

	f.clock.Set(t0.Add(p.RotationPeriod + time.Hour)) // rotation is overdue
	rep := f.rotate(t)
	if rep.Promoted != "" || len(rep.Created) != 1 {
		t.Fatalf("overdue rotation without a published next key: %+v; want only a new next key", rep)
	}
	fresh := rep.Created[0]
	if want := f.clock.Now().Add(p.PublishLead()); !rep.NextRotation.Equal(want) {
		t.Fatalf("NextRotation %v, want %v", rep.NextRotation, want)
	}
	f.clock.Advance(p.PublishLead() - time.Second)
	if rep := f.rotate(t); rep.Promoted != "" {
		t.Fatalf("a next key signed %v after it was published, before the lead %v", p.PublishLead()-time.Second, p.PublishLead())
	}
	f.clock.Advance(time.Second)
	if rep := f.rotate(t); rep.Promoted != fresh {
		t.Fatalf("the next key was not promoted once ripe: %+v", rep)
	}
	f.states(t)
}

func TestPromote_ForcesRotationOnlyWithARipeNextKey(t *testing.T) {
	p := keys.DefaultPolicy()
	f := newRotFixture(t, p)
	first := f.rotate(t)
	f.clock.Advance(p.PublishLead() - time.Minute)
	rep, err := f.rot.Promote(context.Background())
	if err != nil || rep.Changed {
		t.Fatalf("Promote before the next key is ripe: %+v, %v; want no change", rep, err)
	}
	f.clock.Advance(time.Minute)
	rep, err = f.rot.Promote(context.Background())
	if err != nil || rep.Promoted != first.Next || !slices.Equal(rep.Retired, []string{first.Current}) {
		t.Fatalf("Promote with a ripe next key: %+v, %v", rep, err)
	}
	f.states(t)
}

func TestRotate_ConcurrentRunsLeaveExactlyOneCurrentKey(t *testing.T) {
	t.Parallel()
	p := keys.DefaultPolicy()
	for _, moment := range []struct {
		name                         string
		promotions, deletions, added int
		setup                        func(t *testing.T, f *rotFixture)
	}{
		{"fresh registry", 1, 0, 2, func(t *testing.T, f *rotFixture) {}},
		{"at promotion", 1, 0, 1, func(t *testing.T, f *rotFixture) { f.rotate(t); f.clock.Advance(p.RotationPeriod) }},
		{"at deletion", 0, 1, 0, func(t *testing.T, f *rotFixture) {
			f.rotate(t)
			f.clock.Advance(p.RotationPeriod)
			f.rotate(t)
			f.clock.Advance(p.RetiredHold())
		}},
	} {
		t.Run(moment.name, func(t *testing.T) {
			f := newRotFixture(t, p)
			moment.setup(t, f)
			before, _ := f.reg.Keys(context.Background())
			const runs = 4
			reps := make([]keys.Report, runs)
			errs := make([]error, runs)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range runs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					reps[i], errs[i] = f.rot.Rotate(context.Background())
				}()
			}
			close(start)
			wg.Wait()
			var promotions, deletions, writers int
			for i := range runs {
				if errs[i] != nil {
					t.Fatalf("run %d: %v", i, errs[i])
				}
				if reps[i].Promoted != "" {
					promotions++
				}
				deletions += len(reps[i].Deleted)
				if reps[i].Changed {
					writers++
				}
			}
			st := f.states(t) // one current, files == registered keys (losers discarded theirs)
			if promotions != moment.promotions || deletions != moment.deletions || writers != 1 {
				t.Fatalf("%d runs wrote, %d promoted, %d deleted; want 1 writer, %d promotion, %d deletion",
					writers, promotions, deletions, moment.promotions, moment.deletions)
			}
			after, _ := f.reg.Keys(context.Background())
			if got := len(after.Keys) - len(before.Keys); got != moment.added {
				t.Fatalf("registry grew from %d to %d keys, want +%d: %v", len(before.Keys), len(after.Keys), moment.added, st)
			}
			// Running once more changes nothing.
			if rep := f.rotate(t); rep.Changed {
				t.Fatalf("a run after the race still found work: %+v", rep)
			}
		})
	}
}

func TestRotate_LosingTheSwapDiscardsTheKeysItCreated(t *testing.T) {
	f := newRotFixture(t, keys.DefaultPolicy())
	other := keys.NewRotator(f.reg, f.back, keys.DefaultPolicy(), f.clock, nil)
	var once sync.Once
	var winner keys.Report
	f.reg.beforeWrite = func() {
		// Our run has read the empty registry and created its keys; another run now wins.
		once.Do(func() {
			f.reg.beforeWrite = nil
			var err error
			if winner, err = other.Rotate(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	rep := f.rotate(t)
	if rep.Changed || rep.Attempts != 2 || len(rep.Discarded) != 2 {
		t.Fatalf("losing run report %+v; want no change after 2 attempts and its 2 keys discarded", rep)
	}
	if rep.Current != winner.Current || rep.Next != winner.Next {
		t.Fatalf("losing run sees current %s next %s, winner made %s %s", rep.Current, rep.Next, winner.Current, winner.Next)
	}
	f.states(t)
}

func TestRotate_FailureMidwayLeavesTheRegistryUsable(t *testing.T) {
	f := newRotFixture(t, keys.DefaultPolicy())
	f.back.failCreate = func(n int64) error {
		if n == 2 {
			return errBoom // the second CreateKey of the first run fails
		}
		return nil
	}
	if _, err := f.rot.Rotate(context.Background()); !errors.Is(err, errBoom) {
		t.Fatalf("Rotate = %v, want the backend's error", err)
	}
	set, _ := f.reg.Keys(context.Background())
	entries, _ := os.ReadDir(f.dir)
	if len(set.Keys) != 0 || len(entries) != 0 {
		t.Fatalf("failed run left %d registered keys and %d key files; want none", len(set.Keys), len(entries))
	}
	f.back.failCreate = nil
	f.rotate(t)
	f.states(t)
}

func TestRotate_DeletionFailureKeepsTheKeyRetired(t *testing.T) {
	p := keys.DefaultPolicy()
	f := newRotFixture(t, p)
	first := f.rotate(t)
	f.clock.Advance(p.RotationPeriod)
	f.rotate(t)
	f.clock.Advance(p.RetiredHold())
	f.back.failSchedul = errBoom
	rep := f.rotate(t)
	if len(rep.Deleted) != 0 {
		t.Fatalf("a key whose deletion failed was marked deleted: %+v", rep)
	}
	set, _ := f.reg.Keys(context.Background())
	if body, _ := keys.PublicJWKS(set); !slices.Contains(jwksKids(t, body), first.Current) {
		t.Fatal("a retired key whose private half still exists left the JWKS")
	}
	f.back.failSchedul = nil
	if rep := f.rotate(t); !slices.Equal(rep.Deleted, []string{first.Current}) {
		t.Fatalf("retry did not delete the key: %+v", rep)
	}
	f.states(t)
}

func TestPolicy_ValidateRejectsUnsafeTimings(t *testing.T) {
	for name, tc := range map[string]struct {
		p  keys.Policy
		ok bool
	}{
		"defaults":              {keys.Policy{}, true},
		"negative skew":         {keys.Policy{ClockSkew: -time.Minute}, false},
		"margin below cache":    {keys.Policy{Margin: time.Second}, false},
		"cache beyond margin":   {keys.Policy{CacheTTL: 20 * time.Minute}, false},
		"cache equal to margin": {keys.Policy{CacheTTL: 15 * time.Minute}, true},
		"short but sane":        {keys.Policy{RotationPeriod: time.Hour, JWKSCacheTTL: time.Minute, Margin: time.Minute}, true},
	} {
		if err := tc.p.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate = %v", name, err)
		}
	}
	if got := keys.DefaultPolicy(); got.RotationPeriod != 30*24*time.Hour || got.JWKSCacheTTL != time.Hour ||
		got.IDTokenTTL != time.Hour || got.ClockSkew != 5*time.Minute || got.Margin != 15*time.Minute || got.CacheTTL != time.Minute {
		t.Fatalf("DefaultPolicy = %+v", got)
	}
}

func refOf(t *testing.T, f *rotFixture, kid string) string {
	t.Helper()
	set, _ := f.reg.Keys(context.Background())
	for _, k := range set.Keys {
		if k.Kid == kid {
			return k.Ref
		}
	}
	t.Fatalf("kid %s not in the registry", kid)
	return ""
}
