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
	algs  []string // the configured algorithms
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
	f := &rotFixture{algs: p.WithDefaults().Algs, dir: dir, reg: newRegistry(t), back: &countingBackend{Backend: lb}, clock: newClock()}
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
	current, next := map[string]int{}, map[string]int{}
	var live []string
	for _, k := range set.Keys {
		out[k.Kid] = k.State
		switch k.State {
		case oauth.KeyCurrent:
			current[k.Algorithm()]++
		case oauth.KeyNext:
			next[k.Algorithm()]++
		}
		if k.State != oauth.KeyDeleted {
			live = append(live, k.Ref)
		}
	}
	for _, alg := range f.algs {
		if current[alg] != 1 || next[alg] < 1 {
			t.Fatalf("registry has %d current and %d next %s keys, want 1 and at least 1: %v", current[alg], next[alg], alg, out)
		}
	}
	for alg, n := range current {
		if !slices.Contains(f.algs, alg) && n > 0 {
			t.Fatalf("%d current keys of %s, which is not configured: %v", n, alg, out)
		}
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

// TestRotate_FreshRegistrySignsAtOnce: a fresh deployment's first run gives every configured
// algorithm a current key (signing at once, no manual step) and a next key.
func TestRotate_FreshRegistrySignsAtOnce(t *testing.T) {
	f := newRotFixture(t, keys.Policy{})
	rep := f.rotate(t)
	st := f.states(t)
	if !rep.Changed || len(rep.Created) != 2*len(keys.Algs) || len(rep.Algs) != len(keys.Algs) {
		t.Fatalf("first run report %+v, want two keys created per algorithm", rep)
	}
	s := keys.NewSigner(f.reg, f.back, f.clock, 0)
	set, _ := f.reg.Keys(context.Background())
	for _, alg := range keys.Algs {
		a := rep.Algs[alg]
		if a.Promoted == "" || a.Current != a.Promoted || a.Next == "" || st[a.Current] != oauth.KeyCurrent || st[a.Next] != oauth.KeyNext {
			t.Fatalf("%s: report %+v, registry %v; want one current at once and one next", alg, a, st)
		}
		if cur, _ := set.Current(alg); cur.Alg != alg {
			t.Fatalf("%s: current key recorded with alg %q", alg, cur.Alg)
		}
		// No manual step: a signer signs right away.
		if _, err := s.SignJWT(context.Background(), alg, jwt.MapClaims{"sub": "u"}); err != nil {
			t.Fatalf("signing %s after the first rotation: %v", alg, err)
		}
		if want := f.clock.Now().Add(keys.DefaultRotationPeriod); !a.NextRotation.Equal(want) {
			t.Fatalf("%s: NextRotation %v, want %v", alg, a.NextRotation, want)
		}
	}
}

// TestRotate_KeepsKeysOnlyForConfiguredAlgorithms: a deployment configured for PS256 and ES256
// makes no RS256 key, and signing RS256 there is a clear error.
func TestRotate_KeepsKeysOnlyForConfiguredAlgorithms(t *testing.T) {
	f := newRotFixture(t, keys.Policy{Algs: []string{keys.PS256, keys.ES256}})
	rep := f.rotate(t)
	f.states(t)
	set, _ := f.reg.Keys(context.Background())
	for _, k := range set.Keys {
		if k.Algorithm() == keys.RS256 {
			t.Fatalf("an RS256 key was made: %+v", k)
		}
	}
	if len(rep.Created) != 4 || len(rep.Algs) != 2 {
		t.Fatalf("report %+v, want 2 keys for each of 2 algorithms", rep)
	}
	s := keys.NewSigner(f.reg, f.back, f.clock, 0)
	if _, err := s.SignJWT(context.Background(), keys.RS256, jwt.MapClaims{}); !errors.Is(err, keys.ErrNoCurrentKey) {
		t.Fatalf("SignJWT(RS256) = %v, want ErrNoCurrentKey", err)
	}
	if _, err := s.SignJWT(context.Background(), "HS256", jwt.MapClaims{}); !errors.Is(err, keys.ErrUnsupportedAlg) {
		t.Fatalf("SignJWT(HS256) = %v, want ErrUnsupportedAlg", err)
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
	if after.Version != before.Version || f.back.creates.Load() != int64(2*len(keys.Algs)) {
		t.Fatalf("registry version %d→%d, %d keys created; want no writes and no new keys", before.Version, after.Version, f.back.creates.Load())
	}
}

// TestRotate_FollowsTheTimingRules walks the default policy through two rotations and
// checks each algorithm's state changes happen exactly when they are due, not a second before.
func TestRotate_FollowsTheTimingRules(t *testing.T) {
	p := keys.DefaultPolicy()
	f := newRotFixture(t, p)
	t0 := f.clock.Now()
	first := f.rotate(t)
	period, hold := p.RotationPeriod, p.RetiredHold()
	var firstCurrents []string
	for _, alg := range keys.Algs {
		firstCurrents = append(firstCurrents, first.Algs[alg].Current)
	}

	steps := []struct {
		at   time.Duration
		want func(st map[string]string, rep keys.Report, alg, a, b string) string // "" when fine
	}{
		{period - time.Second, func(st map[string]string, rep keys.Report, alg, a, b string) string {
			if rep.Changed {
				return "changed before the rotation period ended"
			}
			return ""
		}},
		{period, func(st map[string]string, rep keys.Report, alg, a, b string) string {
			if rep.Algs[alg].Promoted != b || st[a] != oauth.KeyRetired || st[b] != oauth.KeyCurrent || len(rep.Created) != len(keys.Algs) {
				return "the next key was not promoted with a new next key when the period ended"
			}
			return ""
		}},
		{period + hold - time.Second, func(st map[string]string, rep keys.Report, alg, a, b string) string {
			if st[a] != oauth.KeyRetired || rep.Changed {
				return "the retired key left before its hold ended"
			}
			return ""
		}},
		{period + hold, func(st map[string]string, rep keys.Report, alg, a, b string) string {
			if st[a] != oauth.KeyDeleted || !slices.Equal(rep.Deleted, firstCurrents) {
				return "the retired key was not deleted when its hold ended"
			}
			return ""
		}},
		{2 * period, func(st map[string]string, rep keys.Report, alg, a, b string) string {
			if st[b] != oauth.KeyRetired || rep.Algs[alg].Promoted == "" || rep.Algs[alg].Promoted == b {
				return "the second rotation did not happen"
			}
			return ""
		}},
	}
	for _, s := range steps {
		f.clock.Set(t0.Add(s.at))
		rep := f.rotate(t)
		st := f.states(t)
		for _, alg := range keys.Algs {
			if msg := s.want(st, rep, alg, first.Algs[alg].Current, first.Algs[alg].Next); msg != "" {
				t.Fatalf("at t0+%v, %s: %s; registry %v, report %+v", s.at, alg, msg, st, rep)
			}
		}
	}
	// The deleted keys' private halves are gone: their files were removed (checked by states)
	// and they no longer appear in the JWKS.
	set, _ := f.reg.Keys(context.Background())
	body, _ := keys.PublicJWKS(set)
	for _, kid := range firstCurrents {
		if slices.Contains(jwksKids(t, body), kid) {
			t.Fatal("a deleted key is still published")
		}
	}
}

// TestRotate_NextKeyWaitsForThePublishLead: an algorithm that lost its next key gets a new one
// and does not promote it before it has been published for the lead time, while the other
// algorithms rotate on time.
func TestRotate_NextKeyWaitsForThePublishLead(t *testing.T) {
	for _, alg := range keys.Algs {
		t.Run(alg, func(t *testing.T) {
			p := keys.DefaultPolicy()
			f := newRotFixture(t, p)
			t0 := f.clock.Now()
			first := f.rotate(t)
			nextRef := refOf(t, f, first.Algs[alg].Next)
			// Lose alg's next key (as if the registry had only a current one) long after t0.
			if err := f.reg.UpdateKeys(context.Background(), func(s oauth.KeySet) (oauth.KeySet, error) {
				s.Keys = slices.DeleteFunc(s.Keys, func(k oauth.SigningKey) bool { return k.State == oauth.KeyNext && k.Algorithm() == alg })
				return s, nil
			}); err != nil {
				t.Fatal(err)
			}
			_ = f.back.ScheduleDeletion(context.Background(), nextRef)

			f.clock.Set(t0.Add(p.RotationPeriod + time.Hour)) // rotation is overdue
			rep := f.rotate(t)
			a := rep.Algs[alg]
			if a.Promoted != "" || a.Next == "" || !slices.Contains(rep.Created, a.Next) {
				t.Fatalf("overdue rotation without a published next key: %+v; want only a new next key", a)
			}
			for _, other := range keys.Algs {
				if other != alg && rep.Algs[other].Promoted != first.Algs[other].Next {
					t.Fatalf("%s did not rotate on time beside %s: %+v", other, alg, rep.Algs[other])
				}
			}
			fresh := a.Next
			if want := f.clock.Now().Add(p.PublishLead()); !a.NextRotation.Equal(want) {
				t.Fatalf("NextRotation %v, want %v", a.NextRotation, want)
			}
			f.clock.Advance(p.PublishLead() - time.Second)
			if rep := f.rotate(t); rep.Algs[alg].Promoted != "" {
				t.Fatalf("a next key signed %v after it was published, before the lead %v", p.PublishLead()-time.Second, p.PublishLead())
			}
			f.clock.Advance(time.Second)
			if rep := f.rotate(t); rep.Algs[alg].Promoted != fresh {
				t.Fatalf("the next key was not promoted once ripe: %+v", rep)
			}
			f.states(t)
		})
	}
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
	if err != nil {
		t.Fatal(err)
	}
	var retired []string
	for _, alg := range keys.Algs {
		retired = append(retired, first.Algs[alg].Current)
		if rep.Algs[alg].Promoted != first.Algs[alg].Next {
			t.Fatalf("Promote with a ripe %s next key: %+v", alg, rep)
		}
	}
	if !slices.Equal(rep.Retired, retired) {
		t.Fatalf("Promote retired %v, want %v", rep.Retired, retired)
	}
	f.states(t)
}

// TestRotate_DroppedAlgorithmRetiresNormally: an algorithm removed from the configuration
// stops signing at the next run, its keys stay published for the retired hold and are then
// deleted; the other algorithms are untouched.
func TestRotate_DroppedAlgorithmRetiresNormally(t *testing.T) {
	p := keys.DefaultPolicy()
	f := newRotFixture(t, p)
	first := f.rotate(t)
	f.clock.Advance(time.Hour)
	p.Algs = []string{keys.PS256, keys.ES256}
	f.algs = p.Algs
	f.rot = keys.NewRotator(f.reg, f.back, p, f.clock, nil)
	rep := f.rotate(t)
	st := f.states(t)
	dropped := []string{first.Algs[keys.RS256].Current, first.Algs[keys.RS256].Next}
	if !rep.Changed || !slices.Equal(rep.Retired, dropped) || len(rep.Created) != 0 || len(rep.Promoted()) != 0 {
		t.Fatalf("run after dropping RS256: %+v; want its current and next key retired, nothing else", rep)
	}
	if _, ok := rep.Algs[keys.RS256]; ok {
		t.Fatalf("report still lists the dropped algorithm: %+v", rep.Algs)
	}
	set, _ := f.reg.Keys(context.Background())
	body, _ := keys.PublicJWKS(set)
	for _, kid := range dropped {
		if st[kid] != oauth.KeyRetired || !slices.Contains(jwksKids(t, body), kid) {
			t.Fatalf("dropped key %s is %s, published %v; want retired and still published", kid, st[kid], slices.Contains(jwksKids(t, body), kid))
		}
	}
	if _, err := keys.NewSigner(f.reg, f.back, f.clock, 0).SignJWT(context.Background(), keys.RS256, jwt.MapClaims{}); !errors.Is(err, keys.ErrNoCurrentKey) {
		t.Fatalf("signing RS256 after it was dropped: %v, want ErrNoCurrentKey", err)
	}
	f.clock.Advance(p.RetiredHold())
	rep = f.rotate(t)
	st = f.states(t)
	if !slices.Equal(rep.Deleted, dropped) || st[dropped[0]] != oauth.KeyDeleted || st[dropped[1]] != oauth.KeyDeleted {
		t.Fatalf("after the hold: %+v, registry %v; want the dropped keys deleted", rep, st)
	}
	if rep := f.rotate(t); rep.Changed {
		t.Fatalf("a run after the deletion still found work: %+v", rep)
	}
}

// TestRotate_RecordsWithoutAlgAreRS256: a registry written before keys had an algorithm (one
// current and one next key, no alg) keeps its RS256 keys; the first run adds PS256 and ES256
// keys, current at once, and does not replace the RS256 ones.
func TestRotate_RecordsWithoutAlgAreRS256(t *testing.T) {
	f := newRotFixture(t, keys.DefaultPolicy())
	var old []string
	for _, state := range []string{oauth.KeyCurrent, oauth.KeyNext} {
		k, _, err := installKey(f.reg, f.back, keys.RS256, state, f.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		old = append(old, k.Kid)
	}
	if err := f.reg.UpdateKeys(context.Background(), func(s oauth.KeySet) (oauth.KeySet, error) {
		for i := range s.Keys {
			s.Keys[i].Alg = "" // as written before
		}
		return s, nil
	}); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Hour)
	rep := f.rotate(t)
	f.states(t)
	if a := rep.Algs[keys.RS256]; a.Promoted != "" || a.Current != old[0] || a.Next != old[1] {
		t.Fatalf("RS256 after the first multi-algorithm run: %+v, want the old keys %v untouched", a, old)
	}
	if len(rep.Created) != 4 || rep.Algs[keys.PS256].Current == "" || rep.Algs[keys.ES256].Current == "" {
		t.Fatalf("report %+v, want current and next PS256 and ES256 keys", rep)
	}
	set, _ := f.reg.Keys(context.Background())
	for _, k := range set.Keys {
		if slices.Contains(old, k.Kid) && k.Alg != "" {
			t.Fatalf("the rotation rewrote an old record's alg: %+v", k)
		}
	}
}

// TestRotate_ConcurrentRunsLeaveExactlyOneCurrentKey races rotation runs at each moment of
// the lifecycle: exactly one run writes, every algorithm keeps exactly one current key, and the
// losers discard the keys they made. With every algorithm, 4 runs (each makes up to four RSA
// keys); with ES256 alone, whose keys are cheap to make, 50.
func TestRotate_ConcurrentRunsLeaveExactlyOneCurrentKey(t *testing.T) {
	t.Parallel()
	for _, cfg := range []struct {
		name string
		algs []string
		runs int
	}{{"all algorithms", keys.Algs, 4}, {"ES256 alone", []string{keys.ES256}, 50}} {
		p := keys.DefaultPolicy()
		p.Algs = cfg.algs
		n := len(cfg.algs)
		for _, moment := range []struct {
			name                         string
			promotions, deletions, added int
			setup                        func(t *testing.T, f *rotFixture)
		}{
			{"fresh registry", n, 0, 2 * n, func(t *testing.T, f *rotFixture) {}},
			{"at promotion", n, 0, n, func(t *testing.T, f *rotFixture) { f.rotate(t); f.clock.Advance(p.RotationPeriod) }},
			{"at deletion", 0, n, 0, func(t *testing.T, f *rotFixture) {
				f.rotate(t)
				f.clock.Advance(p.RotationPeriod)
				f.rotate(t)
				f.clock.Advance(p.RetiredHold())
			}},
		} {
			t.Run(cfg.name+"/"+moment.name, func(t *testing.T) {
				f := newRotFixture(t, p)
				moment.setup(t, f)
				before, _ := f.reg.Keys(context.Background())
				runs := cfg.runs
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
					promotions += len(reps[i].Promoted())
					deletions += len(reps[i].Deleted)
					if reps[i].Changed {
						writers++
					}
				}
				st := f.states(t) // one current per algorithm, files == registered keys (losers discarded theirs)
				if promotions != moment.promotions || deletions != moment.deletions || writers != 1 {
					t.Fatalf("%d runs wrote, %d promoted, %d deleted; want 1 writer, %d promotions, %d deletions",
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
	if rep.Changed || rep.Attempts != 2 || len(rep.Discarded) != 2*len(keys.Algs) {
		t.Fatalf("losing run report %+v; want no change after 2 attempts and its %d keys discarded", rep, 2*len(keys.Algs))
	}
	for _, alg := range keys.Algs {
		if rep.Algs[alg].Current != winner.Algs[alg].Current || rep.Algs[alg].Next != winner.Algs[alg].Next {
			t.Fatalf("losing run sees %s %+v, winner made %+v", alg, rep.Algs[alg], winner.Algs[alg])
		}
	}
	f.states(t)
}

func TestRotate_FailureMidwayLeavesTheRegistryUsable(t *testing.T) {
	f := newRotFixture(t, keys.DefaultPolicy())
	f.back.failCreate = func(n int64) error {
		if n == 4 {
			return errBoom // the fourth CreateKey of the first run (the second algorithm's second) fails
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
	body, _ := keys.PublicJWKS(set)
	var want []string
	for _, alg := range keys.Algs {
		want = append(want, first.Algs[alg].Current)
		if !slices.Contains(jwksKids(t, body), first.Algs[alg].Current) {
			t.Fatalf("a retired %s key whose private half still exists left the JWKS", alg)
		}
	}
	f.back.failSchedul = nil
	if rep := f.rotate(t); !slices.Equal(rep.Deleted, want) {
		t.Fatalf("retry did not delete the keys: %+v", rep)
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
		"one algorithm":         {keys.Policy{Algs: []string{keys.ES256}}, true},
		"unknown algorithm":     {keys.Policy{Algs: []string{keys.RS256, "HS256"}}, false},
		"algorithm twice":       {keys.Policy{Algs: []string{keys.PS256, keys.PS256}}, false},
	} {
		if err := tc.p.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate = %v", name, err)
		}
	}
	if got := keys.DefaultPolicy(); got.RotationPeriod != 30*24*time.Hour || got.JWKSCacheTTL != time.Hour ||
		got.IDTokenTTL != time.Hour || got.ClockSkew != 5*time.Minute || got.Margin != 15*time.Minute || got.CacheTTL != time.Minute ||
		!slices.Equal(got.Algs, []string{"RS256", "PS256", "ES256"}) {
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
