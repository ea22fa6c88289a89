package embedded_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// The store under concurrent writers, as the token endpoint drives it at C concurrent requests:
// ops/s and the p99 of one operation's latency, with fsync (the default) and without. Run with
//
//	go test -run '^$' -bench 'Concurrent' -benchtime 2000x -count 3 ./shared/store/embedded
//
// An operation is a FAPI code exchange's writes (ConsumeCode with the assertion's and the DPoP
// proof's jti, then IssueTokens) or a refresh (GetToken, then IssueTokens spending the token).
// "sweeping" runs a sweep of 50,000 expired items beside the writers (see sweepBeside), to show
// what the sweep costs them.

// latencies collects per-operation latencies from many goroutines.
type latencies struct {
	mu  sync.Mutex
	all []time.Duration
}

func (l *latencies) add(d []time.Duration) {
	l.mu.Lock()
	l.all = append(l.all, d...)
	l.mu.Unlock()
}

// report reports ops/s over elapsed and the 50th and 99th percentile latencies in µs.
func (l *latencies) report(b *testing.B, elapsed time.Duration) {
	slices.Sort(l.all)
	pct := func(p float64) float64 {
		if len(l.all) == 0 {
			return 0
		}
		return float64(l.all[min(len(l.all)-1, int(float64(len(l.all))*p))]) / float64(time.Microsecond)
	}
	b.ReportMetric(float64(len(l.all))/elapsed.Seconds(), "ops/s")
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(0, "ns/op") // wall time per op of N goroutines says little; ops/s says it
}

// runConcurrent runs op(i) for i in [0, b.N) on writers goroutines and reports its figures,
// and how many commits of s an operation took (fewer than its transactions when they share).
func runConcurrent(b *testing.B, s *embedded.Store, writers int, op func(i int) error) {
	first, err := s.Commits()
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		last, err := s.Commits()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(last-first)/float64(b.N), "commits/op")
	}()
	var next atomic.Int64
	var lat latencies
	var wg sync.WaitGroup
	b.ResetTimer()
	began := time.Now()
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					break
				}
				t0 := time.Now()
				if err := op(i); err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(t0))
			}
			lat.add(mine)
		}()
	}
	wg.Wait()
	elapsed := time.Since(began)
	b.StopTimer()
	lat.report(b, elapsed)
}

// sweepBeside fills the store with expired items (what 30 seconds of a flood of DPoP proofs
// leaves: sweepItems one-time values, written before the timing) and starts one sweep of them,
// GarbageCollect called until it finds nothing left, as the local server's sweep every 30
// seconds would; wait waits for its end and reports how long it took.
func sweepBeside(b *testing.B, s *embedded.Store) (wait func()) {
	past := time.Now().Add(-time.Hour)
	for i := 0; i < sweepItems; i += 5000 {
		if err := s.PutExpired(5000, past.Add(time.Duration(i))); err != nil {
			b.Fatal(err)
		}
	}
	done := make(chan time.Duration)
	go func() {
		began := time.Now()
		for {
			n, err := s.GarbageCollect(time.Now())
			if err != nil {
				b.Error(err)
			}
			if err != nil || n == 0 {
				break
			}
		}
		done <- time.Since(began)
	}()
	return func() {
		b.ReportMetric(float64((<-done).Milliseconds()), "sweep-ms")
	}
}

// sweepItems is how many expired items the sweep beside the writers deletes.
const sweepItems = 50_000

var concurrentModes = []struct {
	name string
	opts embedded.Options
}{{"Fsync", embedded.Options{}}, {"NoSync", embedded.Options{NoSync: true}}}

// BenchmarkConcurrentFAPIExchange is the store's part of FAPI code exchanges on 1, 8 and 32
// concurrent writers.
func BenchmarkConcurrentFAPIExchange(b *testing.B) {
	for _, m := range concurrentModes {
		for _, w := range []int{1, 8, 32} {
			for _, sweep := range []bool{false, true} {
				if sweep && w != 8 {
					continue
				}
				name := fmt.Sprintf("%s/writers=%d", m.name, w)
				if sweep {
					name += "/sweeping"
				}
				b.Run(name, func(b *testing.B) { benchConcurrentExchange(b, m.opts, w, sweep) })
			}
		}
	}
}

func benchConcurrentExchange(b *testing.B, opts embedded.Options, writers int, sweep bool) {
	s, _ := openTemp(b, opts)
	ctx := b.Context()
	now := time.Now()
	codes := make([]oauth.Code, b.N)
	for i := range codes {
		codes[i] = oauth.Code{Hash: oauth.HashToken(oauth.NewSecret("ac_")), Grant: benchGrant(now), RedirectURI: "https://app.example/cb", ExpiresAt: now.Add(2 * time.Minute)}
	}
	// The codes are created in groups on writers goroutines, not timed: one transaction each.
	fill := make(chan int)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range fill {
				if err := s.CreateCode(ctx, codes[i]); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for i := range codes {
		fill <- i
	}
	close(fill)
	wg.Wait()
	if sweep {
		defer sweepBeside(b, s)()
	}
	runConcurrent(b, s, writers, func(i int) error {
		once := []oauth.Once{
			{Key: oauth.NewID("assertion:"), Expires: now.Add(time.Minute)},
			{Key: oauth.NewID("dpop:"), Expires: now.Add(time.Minute)},
		}
		c, err := s.ConsumeCode(ctx, codes[i].Hash, "cl_bench", now, once...)
		if err != nil {
			return err
		}
		return s.IssueTokens(ctx, benchIssue(c.Grant, now, true), now)
	})
}

// BenchmarkConcurrentRefresh is the store's part of refreshes on 1, 8 and 32 concurrent
// writers, each refreshing its own grant.
func BenchmarkConcurrentRefresh(b *testing.B) {
	for _, m := range concurrentModes {
		for _, w := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("%s/writers=%d", m.name, w), func(b *testing.B) { benchConcurrentRefresh(b, m.opts, w) })
		}
	}
}

func benchConcurrentRefresh(b *testing.B, opts embedded.Options, writers int) {
	s, _ := openTemp(b, opts)
	ctx := b.Context()
	now := time.Now()
	current := make([]oauth.Issue, writers)
	for w := range current {
		current[w] = benchIssue(benchGrant(now), now, true)
		if err := s.IssueTokens(ctx, current[w], now); err != nil {
			b.Fatal(err)
		}
	}
	// Writer w refreshes grant w; ops are handed out by index, so one grant's refreshes never
	// race (each op of a goroutine owns the grant until it is done).
	var mu [64]sync.Mutex
	runConcurrent(b, s, writers, func(i int) error {
		w := i % writers
		mu[w].Lock()
		defer mu[w].Unlock()
		in := current[w]
		rt, err := s.GetToken(ctx, in.Refresh.Hash, now)
		if err != nil {
			return err
		}
		next := benchIssue(rt.Grant, now, false)
		next.Retire = []string{in.Access.Hash}
		next.Spent = rt.Hash
		if err := s.IssueTokens(ctx, next, now); err != nil {
			return err
		}
		current[w] = next
		return nil
	})
}

// BenchmarkSweepBatch is what the size of the sweep's transactions costs 8 concurrent FAPI
// exchanges while a sweep of 50,000 expired items runs: each transaction reads 5 times as many
// items as it may delete (see gcScan, gcBatch).
func BenchmarkSweepBatch(b *testing.B) {
	for _, m := range concurrentModes {
		for _, batch := range []int{1000, 250, 100} {
			b.Run(fmt.Sprintf("%s/delete=%d", m.name, batch), func(b *testing.B) {
				defer embedded.SetGCLimits(5*batch, batch, 100_000)()
				benchConcurrentExchange(b, m.opts, 8, true)
			})
		}
	}
}
