package bolt_test

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/bolt"
)

// The benchmarks measure the store's hot paths as the token endpoint and the authorizer use
// them, serially (one client's latency) and in parallel (throughput under concurrent requests,
// where the group commit shares one fsync among concurrent writes):
//
//	go test -run '^$' -bench . -benchmem ./shared/store/bolt
//
// Besides ns/op each reports cpu-µs/op, the process CPU time (user+system, all goroutines,
// GC included) per operation: on a shared or loaded machine wall time says more about the
// neighbours than about the store, CPU time much less so.

// cpuMeter reports the process CPU time spent per operation from its start to b's end.
func cpuMeter(b *testing.B) {
	b.Helper()
	start := cpuTime()
	b.Cleanup(func() {
		if b.N > 0 {
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N)/1e3, "cpu-µs/op")
		}
	})
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchGrant(now time.Time) oauth.Grant {
	return oauth.Grant{
		ID: oauth.NewID(oauth.PrefixGrant), ClientID: "cl_bench", UID: "u_bench",
		Scopes:           oauth.Scopes{oauth.ScopeOpenID, oauth.ScopeEmail, oauth.ScopeTransfersWrite},
		CompanyProfileID: "cp-1", CompanyUserID: "cu-1", AuthTime: now, Nonce: "n-0S6_WzA2Mj",
		Claims:    oauth.Claims{Email: "ada@example.com", EmailVerified: true},
		CreatedAt: now, ExpiresAt: now.Add(30 * 24 * time.Hour),
	}
}

func benchCode(now time.Time) oauth.Code {
	return oauth.Code{
		Hash: oauth.HashToken(oauth.NewSecret(oauth.PrefixCode)), Grant: benchGrant(now),
		RedirectURI: "https://client.example.com/cb", ExpiresAt: now.Add(5 * time.Minute),
		CodeChallenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
	}
}

func benchIssue(g oauth.Grant, now time.Time) oauth.Issue {
	a := oauth.Token{Hash: oauth.HashToken(oauth.NewSecret(oauth.PrefixAccess)), Kind: oauth.KindAccess,
		Scopes: g.Scopes, IssuedAt: now, ExpiresAt: now.Add(time.Hour), Grant: g}
	r := oauth.Token{Hash: oauth.HashToken(oauth.NewSecret(oauth.PrefixRefresh)), Kind: oauth.KindRefresh,
		Scopes: g.Scopes, IssuedAt: now, ExpiresAt: now.Add(24 * time.Hour), Grant: g, Live: []string{a.Hash}}
	return oauth.Issue{Grant: g, Access: a, Refresh: r, FromCode: true, Tokens: []string{a.Hash, r.Hash}}
}

// createCodes stores n codes, concurrently so that setup is batched too.
func createCodes(b testing.TB, s *bolt.Store, n int, now time.Time) []oauth.Code {
	b.Helper()
	codes := make([]oauth.Code, n)
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 64 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				codes[i] = benchCode(now)
				if err := s.CreateCode(context.Background(), codes[i]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return codes
}

// exchange is the store's part of a code exchange: consume the code, write the tokens.
func exchange(ctx context.Context, s *bolt.Store, c oauth.Code, now time.Time) error {
	code, err := s.ConsumeCode(ctx, c.Hash, c.Grant.ClientID, now)
	if err != nil {
		return err
	}
	return s.IssueTokens(ctx, benchIssue(code.Grant, now), now)
}

// BenchmarkCodeExchange is ConsumeCode followed by IssueTokens.
func BenchmarkCodeExchange(b *testing.B) {
	now := time.Now()
	b.Run("serial", func(b *testing.B) {
		s := openTemp(b)
		codes := createCodes(b, s, b.N, now)
		b.ResetTimer()
		cpuMeter(b)
		for i := range b.N {
			if err := exchange(b.Context(), s, codes[i], now); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		s := openTemp(b)
		codes := createCodes(b, s, b.N, now)
		var next atomic.Int64
		b.SetParallelism(32)
		b.ResetTimer()
		cpuMeter(b)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := exchange(context.Background(), s, codes[next.Add(1)-1], now); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkRefresh is SpendRefreshToken followed by the refresh IssueTokens.
func BenchmarkRefresh(b *testing.B) {
	now := time.Now()
	setup := func(b *testing.B, s *bolt.Store) []oauth.Issue {
		b.Helper()
		issues := make([]oauth.Issue, b.N)
		for i, c := range createCodes(b, s, b.N, now) {
			issues[i] = benchIssue(c.Grant, now)
			if err := s.IssueTokens(b.Context(), issues[i], now); err != nil {
				b.Fatal(err)
			}
		}
		return issues
	}
	refresh := func(ctx context.Context, s *bolt.Store, prev oauth.Issue) error {
		rt, err := s.SpendRefreshToken(ctx, prev.Refresh.Hash, prev.Grant.ClientID, now)
		if err != nil {
			return err
		}
		in := benchIssue(rt.Grant, now)
		in.FromCode = false
		in.Refresh.Live = []string{in.Access.Hash, prev.Access.Hash}
		in.Tokens = []string{in.Access.Hash, prev.Access.Hash, in.Refresh.Hash}
		return s.IssueTokens(ctx, in, now)
	}
	b.Run("serial", func(b *testing.B) {
		s := openTemp(b)
		issues := setup(b, s)
		b.ResetTimer()
		cpuMeter(b)
		for i := range b.N {
			if err := refresh(b.Context(), s, issues[i]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		s := openTemp(b)
		issues := setup(b, s)
		var next atomic.Int64
		b.SetParallelism(32)
		b.ResetTimer()
		cpuMeter(b)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := refresh(context.Background(), s, issues[next.Add(1)-1]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkGetToken is the authorizer's one read of an access token.
func BenchmarkGetToken(b *testing.B) {
	now := time.Now()
	s := openTemp(b)
	const n = 1000
	hashes := make([]string, n)
	for _, c := range createCodes(b, s, n, now) {
		in := benchIssue(c.Grant, now)
		if err := s.IssueTokens(b.Context(), in, now); err != nil {
			b.Fatal(err)
		}
		hashes = append(hashes, in.Access.Hash)
	}
	hashes = hashes[n:]
	b.Run("serial", func(b *testing.B) {
		cpuMeter(b)
		for i := range b.N {
			if _, err := s.GetToken(b.Context(), hashes[i%n], now); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		cpuMeter(b)
		var next atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.GetToken(context.Background(), hashes[int(next.Add(1))%n], now); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkFlow is every store call of one complete authorization code flow for a signed-in
// user: the pending request is stored and taken, the code created, consumed and exchanged,
// and the access token validated once. ns/op in the parallel run gives flows per second.
func BenchmarkFlow(b *testing.B) {
	now := time.Now()
	s := openTemp(b)
	flow := func(ctx context.Context) error {
		req := oauth.AuthRequest{ID: oauth.NewID(oauth.PrefixRequest), ClientID: "cl_bench",
			RedirectURI: "https://client.example.com/cb", Scopes: oauth.Scopes{oauth.ScopeOpenID},
			CSRFHash: "x", CreatedAt: now, ExpiresAt: now.Add(10 * time.Minute)}
		if err := s.PutAuthRequest(ctx, req); err != nil {
			return err
		}
		if _, err := s.TakeAuthRequest(ctx, req.ID, now); err != nil {
			return err
		}
		c := benchCode(now)
		if err := s.CreateCode(ctx, c); err != nil {
			return err
		}
		code, err := s.ConsumeCode(ctx, c.Hash, c.Grant.ClientID, now)
		if err != nil {
			return err
		}
		in := benchIssue(code.Grant, now)
		if err := s.IssueTokens(ctx, in, now); err != nil {
			return err
		}
		_, err = s.GetToken(ctx, in.Access.Hash, now)
		return err
	}
	b.SetParallelism(32)
	b.ResetTimer()
	cpuMeter(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := flow(context.Background()); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
