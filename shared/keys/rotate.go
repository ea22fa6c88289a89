package keys

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// maxAttempts bounds how often one Rotate run re-reads the registry after losing a
// compare-and-swap to a concurrent run.
const maxAttempts = 5

// keepDeleted is how many deleted keys the registry remembers (for audit and for operators
// asking "which kid was that?"); older records are dropped so the registry stays one small item.
const keepDeleted = 24

// Rotator moves signing keys through next → current → retired → deleted under a Policy. Each
// algorithm of Policy.Algs has its own keys and its own life on the same timings: one current
// key, at least one next key, retired keys until their hold ends. The keys of an algorithm
// dropped from Policy.Algs stop signing and retire as usual. The Rotator is the only writer of
// the registry's states; run it on a schedule (and on demand). Each run is idempotent: it makes
// exactly the transitions that are due at the clock's now.
//
// Safety under overlapping or crashed runs comes from the registry being one versioned set:
// a run creates the backend keys it will need first, then writes the whole new set with one
// compare-and-swap. A run that loses the swap re-reads and re-plans, and schedules for
// deletion any key it created but did not register. A crash between creating a key and the
// swap leaves at worst an unregistered backend key (tagged, never published, never signing);
// a crash after the swap leaves a complete, valid registry. There is never a moment with zero or
// two current keys of an algorithm.
type Rotator struct {
	reg   oauth.KeyStore
	b     Backend
	p     Policy
	clock oauth.Clock
	log   *slog.Logger

	// nonceKeys and nonceWrap, when set (WithNonceKeys), make each Rotate run rotate the DPoP
	// nonce keys too.
	nonceKeys oauth.NonceKeyStore
	nonceWrap oauth.NonceKeyWrapper
}

// WithNonceKeys has every Rotate run also make and drop the DPoP nonce keys that are due
// (oauth.RotateNonceKeys), so the schedule and the stack's InitialKey run that make the
// signing keys make the nonce keys too. It returns r.
func (r *Rotator) WithNonceKeys(store oauth.NonceKeyStore, w oauth.NonceKeyWrapper) *Rotator {
	r.nonceKeys, r.nonceWrap = store, w
	return r
}

// NewRotator returns a Rotator over the registry reg and the backend b. A nil log discards;
// a nil clock is the wall clock; zero policy fields take their defaults.
func NewRotator(reg oauth.KeyStore, b Backend, p Policy, clock oauth.Clock, log *slog.Logger) *Rotator {
	if clock == nil {
		clock = oauth.SystemClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Rotator{reg: reg, b: b, p: p.WithDefaults(), clock: clock, log: log}
}

// Report says what one run changed, for the logs and the admin tool. Kids only: a report
// never holds key material.
type Report struct {
	At time.Time `json:"at"`
	// Changed is false when nothing was due (the registry was not written).
	Changed bool `json:"changed"`
	// Created are the kids of keys registered by this run (as next, or as the first current),
	// of every algorithm.
	Created []string `json:"created,omitempty"`
	Retired []string `json:"retired,omitempty"`
	// Deleted were removed from the JWKS; their private keys are scheduled for deletion.
	Deleted []string `json:"deleted,omitempty"`
	// Discarded were created by this run but not registered (a concurrent run won); they were
	// scheduled for deletion in the backend.
	Discarded []string `json:"discarded,omitempty"`
	// Algs is the state of each configured algorithm after the run.
	Algs map[string]AlgReport `json:"algs,omitempty"`
	// Attempts counts compare-and-swap attempts (more than one: a concurrent run interfered).
	Attempts int `json:"attempts"`
	// NonceKeys is what the run did to the DPoP nonce keys (ids only), when it rotates them.
	NonceKeys *oauth.NonceKeyReport `json:"dpop_nonce_keys,omitempty"`
}

// AlgReport is one algorithm's part of a Report.
type AlgReport struct {
	// Promoted is the kid that became current in this run, if any.
	Promoted string `json:"promoted,omitempty"`
	// Current and Next are the algorithm's current and newest next kid after the run.
	Current string `json:"current,omitempty"`
	Next    string `json:"next,omitempty"`
	// NextRotation is the earliest time the current key will be replaced.
	NextRotation time.Time `json:"next_rotation,omitzero"`
}

// Promoted returns the kids that became current in this run, in the order of Algs.
func (r Report) Promoted() []string {
	var out []string
	for _, alg := range Algs {
		if a, ok := r.Algs[alg]; ok && a.Promoted != "" {
			out = append(out, a.Promoted)
		}
	}
	return out
}

// LogValue renders the report as a group for log/slog.
func (r Report) LogValue() slog.Value {
	attrs := []slog.Attr{slog.Time("at", r.At), slog.Bool("changed", r.Changed), slog.Int("attempts", r.Attempts)}
	for _, alg := range Algs {
		a, ok := r.Algs[alg]
		if !ok {
			continue
		}
		group := []any{slog.String("current", a.Current), slog.String("next", a.Next)}
		if a.Promoted != "" {
			group = append(group, slog.String("promoted", a.Promoted))
		}
		if !a.NextRotation.IsZero() {
			group = append(group, slog.Time("next_rotation", a.NextRotation))
		}
		attrs = append(attrs, slog.Group(alg, group...))
	}
	for _, list := range []struct {
		name string
		kids []string
	}{{"created", r.Created}, {"retired", r.Retired}, {"deleted", r.Deleted}, {"discarded", r.Discarded}} {
		if len(list.kids) > 0 {
			attrs = append(attrs, slog.Any(list.name, list.kids))
		}
	}
	if r.NonceKeys != nil {
		attrs = append(attrs, slog.Any("dpop_nonce_keys", *r.NonceKeys))
	}
	return slog.GroupValue(attrs...)
}

// Rotate makes the transitions due now, for each algorithm: the first key of an algorithm new
// to the registry (current at once, since no verifier can have cached anything signed before
// it, plus a next key), the promotion of a next key once the current one's period is over and
// the next one has been published long enough, the deletion of retired keys whose tokens have
// all expired, and a new next key whenever there is none; and the retirement of the current
// and next keys of an algorithm no longer configured.
func (r *Rotator) Rotate(ctx context.Context) (Report, error) {
	rep, err := r.run(ctx, false)
	if err != nil || r.nonceKeys == nil {
		return rep, err
	}
	var nonces oauth.NonceKeyReport
	for attempt := 1; ; attempt++ {
		nonces, err = oauth.RotateNonceKeys(ctx, r.nonceKeys, r.nonceWrap, r.clock.Now().UTC())
		if !errors.Is(err, oauth.ErrConflict) || attempt == maxAttempts {
			break
		}
	}
	if err != nil {
		return rep, fmt.Errorf("key rotation: %w", err)
	}
	rep.NonceKeys = &nonces
	return rep, nil
}

// Promote is Rotate on demand (the admin tool): it treats the current key's period as over.
// It still never lets a next key sign before it has been published for Policy.PublishLead, so
// on a registry without a ripe next key it only creates one; run it again after the lead time.
func (r *Rotator) Promote(ctx context.Context) (Report, error) { return r.run(ctx, true) }

// errNeedKeys makes UpdateKeys give up when the set it read needs more fresh keys than the
// run created (a concurrent run changed it); the run creates them and tries again.
var errNeedKeys = errors.New("rotation needs more keys")

// errNoChange makes UpdateKeys skip the write when a concurrent run already did the work.
var errNoChange = errors.New("rotation: nothing to change")

func (r *Rotator) run(ctx context.Context, force bool) (rep Report, err error) {
	if err := r.p.Validate(); err != nil {
		return Report{}, err
	}
	now := r.clock.Now().UTC()
	var pool []oauth.SigningKey    // created in the backend, not (yet) registered
	scheduled := map[string]bool{} // kids whose private key this run scheduled for deletion
	registered := map[string]bool{}
	defer func() {
		// Whatever happened, a key this run created and did not register must not linger.
		for _, k := range pool {
			if registered[k.Kid] {
				continue
			}
			if derr := r.b.ScheduleDeletion(context.WithoutCancel(ctx), k.Ref); derr != nil {
				r.log.Warn("key rotation: could not schedule deletion of an unregistered key", "kid", k.Kid, "err", derr)
				err = errors.Join(err, fmt.Errorf("discard unregistered key %s: %w", k.Kid, derr))
				continue
			}
			rep.Discarded = append(rep.Discarded, k.Kid)
		}
	}()

	for attempt := 1; attempt <= maxAttempts; attempt++ {
		set, err := r.reg.Keys(ctx)
		if err != nil {
			return rep, fmt.Errorf("key rotation: read registry: %w", err)
		}
		plan := advance(set, now, r.p, force, pool, scheduled)
		for _, alg := range Algs {
			for range plan.need[alg] {
				ref, pub, err := r.b.CreateKey(ctx, alg)
				if err != nil {
					return rep, fmt.Errorf("key rotation: create %s key: %w", alg, err)
				}
				k, err := NewSigningKey(ref, alg, pub, now)
				if err != nil {
					pool = append(pool, oauth.SigningKey{Kid: ref, Ref: ref}) // discarded by the deferred cleanup
					return rep, fmt.Errorf("key rotation: %s key %s from the backend: %w", alg, ref, err)
				}
				pool = append(pool, k)
			}
		}
		for _, k := range plan.toDelete {
			// Schedule first, write the registry second: a crash in between leaves a retired key
			// whose private half is already pending deletion, and the next run (Schedule is
			// idempotent) just records it.
			if err := r.b.ScheduleDeletion(ctx, k.Ref); err != nil {
				r.log.Warn("key rotation: schedule deletion failed; the key stays retired", "kid", k.Kid, "err", err)
				continue
			}
			scheduled[k.Kid] = true
		}

		var applied result
		err = r.reg.UpdateKeys(ctx, func(s oauth.KeySet) (oauth.KeySet, error) {
			applied = advance(s, now, r.p, force, pool, scheduled)
			if len(applied.need) > 0 {
				return s, errNeedKeys
			}
			if !applied.report.Changed {
				return s, errNoChange
			}
			return applied.set, nil
		})
		switch {
		case err == nil || errors.Is(err, errNoChange):
			rep = applied.report
			rep.Attempts = attempt
			for _, kid := range rep.Created {
				registered[kid] = true
			}
			if err == nil {
				r.log.Debug("key rotation: registry updated", "report", rep)
			}
			return rep, nil
		case errors.Is(err, oauth.ErrConflict), errors.Is(err, errNeedKeys):
			r.log.Info("key rotation: concurrent update, re-reading the registry", "attempt", attempt)
			continue
		default:
			return rep, fmt.Errorf("key rotation: write registry: %w", err)
		}
	}
	return rep, fmt.Errorf("key rotation: gave up after %d concurrent updates: %w", maxAttempts, oauth.ErrConflict)
}

// result is the outcome of planning one run over one registry state.
type result struct {
	set      oauth.KeySet
	report   Report
	need     map[string]int     // fresh keys missing from the pool, by algorithm
	toDelete []oauth.SigningKey // retired keys due for deletion, not yet scheduled
}

// advance is the state machine: a pure function of the registry, the time and the run's
// prepared keys (pool) and scheduled deletions. It may be called several times per run (once
// per registry read), always on the latest state, and never touches the backend. Each
// algorithm's keys move on their own; keys of an algorithm outside Algs are left alone.
func advance(in oauth.KeySet, now time.Time, p Policy, force bool, pool []oauth.SigningKey, scheduled map[string]bool) result {
	res := result{report: Report{At: now, Algs: map[string]AlgReport{}}, need: map[string]int{}}
	rep := &res.report
	ks := slices.Clone(in.Keys)
	for _, alg := range Algs {
		configured := slices.Contains(p.Algs, alg)
		if !configured && !slices.ContainsFunc(ks, func(k oauth.SigningKey) bool { return k.Algorithm() == alg }) {
			continue
		}
		ks = advanceAlg(ks, alg, configured, now, p, force, pool, scheduled, &res)
	}

	// Forget the oldest deleted records beyond keepDeleted.
	if del := indexOf(ks, "", oauth.KeyDeleted); len(del) > keepDeleted {
		slices.SortFunc(del, func(a, b int) int { return ks[a].DeletedAt.Compare(ks[b].DeletedAt) })
		drop := map[int]bool{}
		for _, i := range del[:len(del)-keepDeleted] {
			drop[i] = true
		}
		var kept []oauth.SigningKey
		for i, k := range ks {
			if !drop[i] {
				kept = append(kept, k)
			}
		}
		ks = kept
		rep.Changed = true
	}

	rep.Changed = rep.Changed || len(rep.Created) > 0 || len(rep.Promoted()) > 0 || len(rep.Retired) > 0 || len(rep.Deleted) > 0
	res.set = oauth.KeySet{Keys: ks, Version: in.Version}
	// Summarise the resulting registry, per configured algorithm.
	for _, alg := range p.Algs {
		a := rep.Algs[alg]
		var newestNext oauth.SigningKey
		for _, k := range ks {
			if k.Algorithm() == alg && k.State == oauth.KeyNext && (newestNext.Kid == "" || k.CreatedAt.After(newestNext.CreatedAt)) {
				newestNext = k
			}
		}
		a.Next = newestNext.Kid
		if c, ok := res.set.Current(alg); ok {
			a.Current = c.Kid
			// The current key is replaced when its period is over and a next key is ripe; with no
			// next key yet, one has to be published for the lead time first.
			ripeAt := now.Add(p.PublishLead())
			for _, k := range ks {
				if k.Algorithm() == alg && k.State == oauth.KeyNext && k.CreatedAt.Add(p.PublishLead()).Before(ripeAt) {
					ripeAt = k.CreatedAt.Add(p.PublishLead())
				}
			}
			a.NextRotation = maxTime(c.ActivatedAt.Add(p.RotationPeriod), ripeAt)
		}
		rep.Algs[alg] = a
	}
	return res
}

// indexOf returns the positions of the keys of alg ("" for every algorithm) in state.
func indexOf(ks []oauth.SigningKey, alg, state string) []int {
	var out []int
	for i, k := range ks {
		if k.State == state && (alg == "" || k.Algorithm() == alg) {
			out = append(out, i)
		}
	}
	return out
}

// advanceAlg makes the transitions due for the keys of one algorithm and returns the updated
// key list. An algorithm no longer configured gets no new keys and its signing keys retire.
func advanceAlg(ks []oauth.SigningKey, alg string, configured bool, now time.Time, p Policy, force bool,
	pool []oauth.SigningKey, scheduled map[string]bool, res *result) []oauth.SigningKey {
	rep := &res.report
	var promoted string
	takeFresh := func() (int, bool) {
		for _, k := range pool {
			if k.Algorithm() != alg {
				continue
			}
			if !slices.ContainsFunc(ks, func(x oauth.SigningKey) bool { return x.Kid == k.Kid }) {
				k.CreatedAt = now // published from now on, whenever the backend made it
				ks = append(ks, k)
				rep.Created = append(rep.Created, k.Kid)
				return len(ks) - 1, true
			}
		}
		res.need[alg]++
		return 0, false
	}
	retire := func(i int) {
		ks[i].State, ks[i].RetiredAt = oauth.KeyRetired, now
		rep.Retired = append(rep.Retired, ks[i].Kid)
	}
	index := func(state string) []int { return indexOf(ks, alg, state) }

	if !configured {
		// Dropped from the configuration: nothing of this algorithm signs from now on, and its
		// published keys stay published for the whole hold, as any retired key.
		for _, i := range append(index(oauth.KeyCurrent), index(oauth.KeyNext)...) {
			retire(i)
		}
	}

	// Exactly one current key: should the registry ever hold several (a hand edit), the
	// latest activated one keeps signing and the others retire.
	if cur := index(oauth.KeyCurrent); len(cur) > 1 {
		slices.SortFunc(cur, func(a, b int) int {
			return cmp.Or(ks[b].ActivatedAt.Compare(ks[a].ActivatedAt), ks[b].CreatedAt.Compare(ks[a].CreatedAt), cmp.Compare(ks[a].Kid, ks[b].Kid))
		})
		for _, i := range cur[1:] {
			retire(i)
		}
	}

	// Retired keys whose tokens have all expired leave the JWKS once their private key is
	// scheduled for deletion.
	for _, i := range index(oauth.KeyRetired) {
		if ks[i].RetiredAt.IsZero() {
			ks[i].RetiredAt = now // unknown retirement time: hold it for the full period from now
			rep.Changed = true
		}
		if now.Before(ks[i].RetiredAt.Add(p.RetiredHold())) {
			continue
		}
		if !scheduled[ks[i].Kid] {
			res.toDelete = append(res.toDelete, ks[i])
			continue
		}
		ks[i].State, ks[i].DeletedAt = oauth.KeyDeleted, now
		rep.Deleted = append(rep.Deleted, ks[i].Kid)
	}
	if !configured {
		return ks
	}

	// Promotion. The oldest next key that has been published long enough is the candidate.
	nexts := index(oauth.KeyNext)
	slices.SortFunc(nexts, func(a, b int) int { return ks[a].CreatedAt.Compare(ks[b].CreatedAt) })
	ripe := -1
	for _, i := range nexts {
		if !now.Before(ks[i].CreatedAt.Add(p.PublishLead())) {
			ripe = i
			break
		}
	}
	cur := index(oauth.KeyCurrent)
	switch {
	case len(cur) == 0 && len(nexts) > 0:
		// No signing key (the registry lost it): signing now beats signing never; the oldest
		// next key is the one verifiers are most likely to hold.
		i := nexts[0]
		if ripe >= 0 {
			i = ripe
		}
		ks[i].State, ks[i].ActivatedAt = oauth.KeyCurrent, now
		promoted = ks[i].Kid
	case len(cur) == 0:
		// An algorithm new to the registry: no verifier can hold any token it signed yet, so
		// its first key signs at once.
		if i, ok := takeFresh(); ok {
			ks[i].State, ks[i].ActivatedAt = oauth.KeyCurrent, now
			promoted = ks[i].Kid
		}
	default:
		c := cur[0]
		due := force || !now.Before(ks[c].ActivatedAt.Add(p.RotationPeriod))
		if due && ripe >= 0 {
			retire(c)
			ks[ripe].State, ks[ripe].ActivatedAt = oauth.KeyCurrent, now
			promoted = ks[ripe].Kid
		}
	}

	// There is always a next key, so that a promotion never waits for one to be published.
	if len(index(oauth.KeyNext)) == 0 {
		takeFresh() // pool keys are made in state next
	}
	if promoted != "" {
		rep.Algs[alg] = AlgReport{Promoted: promoted}
	}
	return ks
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
