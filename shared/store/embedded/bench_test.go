package embedded_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// The store's part of each request path, alone: with fsync (the default, the disk's cost) and
// without (the store's own CPU). Run with
//
//	go test -run '^$' -bench . -benchmem ./shared/store/embedded

// cpuTimer reports the process's CPU time per operation (user + system, every goroutine), the
// figure that does not depend on what else the machine runs.
type cpuTimer struct {
	b     *testing.B
	start time.Duration
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU(b *testing.B) *cpuTimer {
	b.ReportAllocs()
	b.ResetTimer()
	return &cpuTimer{b: b, start: cpuNow()}
}

func (c *cpuTimer) stop() {
	c.b.StopTimer()
	c.b.ReportMetric(float64(cpuNow()-c.start)/float64(time.Microsecond)/float64(c.b.N), "cpu-µs/op")
}

func benchGrant(now time.Time) oauth.Grant {
	return oauth.Grant{
		ID: oauth.NewID(oauth.PrefixGrant), ClientID: "cl_bench", UID: "u_bench",
		Scopes:           oauth.Scopes{oauth.ScopeEmail, oauth.ScopePhone, oauth.ScopeProfile},
		CompanyProfileID: "cp-1", CompanyUserID: "cu-1", AuthTime: now, CreatedAt: now,
		Claims:    oauth.Claims{Email: "ada@example.com", EmailVerified: true, Name: "Ada Lovelace"},
		ExpiresAt: now.Add(30 * 24 * time.Hour),
	}
}

func benchIssue(g oauth.Grant, now time.Time, fromCode bool) oauth.Issue {
	tok := func(kind string, ttl time.Duration) oauth.Token {
		return oauth.Token{Hash: oauth.HashToken(oauth.NewSecret("x_")), Kind: kind, Scopes: g.Scopes,
			IssuedAt: now, ExpiresAt: now.Add(ttl), Grant: g}
	}
	in := oauth.Issue{Grant: g, Access: tok(oauth.KindAccess, time.Hour), Refresh: tok(oauth.KindRefresh, 24*time.Hour), FromCode: fromCode}
	in.Tokens = []string{in.Access.Hash, in.Refresh.Hash}
	return in
}

// createCodes stores n codes of benchGrant, as consents would, for a benchmark to exchange.
func createCodes(b *testing.B, s *embedded.Store, n int, now time.Time) []oauth.Code {
	b.Helper()
	codes := make([]oauth.Code, n)
	for i := range codes {
		codes[i] = oauth.Code{Hash: oauth.HashToken(oauth.NewSecret("ac_")), Grant: benchGrant(now), RedirectURI: "https://app.example/cb", ExpiresAt: now.Add(2 * time.Minute)}
		if err := s.CreateCode(b.Context(), codes[i]); err != nil {
			b.Fatal(err)
		}
	}
	return codes
}

// codeExchange is the store's part of a code exchange: the code consumed, then the grant and
// its tokens written (the code itself was created by the consent, outside the timing).
func benchExchange(b *testing.B, opts embedded.Options) {
	s, _ := openTemp(b, opts)
	ctx := b.Context()
	now := time.Now()
	codes := createCodes(b, s, b.N, now)
	c := startCPU(b)
	defer c.stop()
	for i := range b.N {
		c, err := s.ConsumeCode(ctx, codes[i].Hash, "cl_bench", now)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.IssueTokens(ctx, benchIssue(c.Grant, now, true), now); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkExchange_NoSync(b *testing.B) { benchExchange(b, embedded.Options{NoSync: true}) }
func BenchmarkExchange_Fsync(b *testing.B)  { benchExchange(b, embedded.Options{}) }

// BenchmarkRefresh is the store's part of a refresh: the refresh token read, then spent in the
// one transaction that writes the next pair and retires the oldest access token.
func BenchmarkRefresh_NoSync(b *testing.B) {
	s, _ := openTemp(b, embedded.Options{NoSync: true})
	ctx := b.Context()
	now := time.Now()
	in := benchIssue(benchGrant(now), now, true)
	if err := s.IssueTokens(ctx, in, now); err != nil {
		b.Fatal(err)
	}
	c := startCPU(b)
	defer c.stop()
	for range b.N {
		rt, err := s.GetToken(ctx, in.Refresh.Hash, now)
		if err != nil {
			b.Fatal(err)
		}
		next := benchIssue(rt.Grant, now, false)
		next.Retire = []string{in.Access.Hash}
		next.Spent = rt.Hash
		if err := s.IssueTokens(ctx, next, now); err != nil {
			b.Fatal(err)
		}
		in = next
	}
}

// BenchmarkGetToken is the authorizer's read.
func BenchmarkGetToken(b *testing.B) {
	s, _ := openTemp(b, embedded.Options{NoSync: true})
	ctx := b.Context()
	now := time.Now()
	in := benchIssue(benchGrant(now), now, true)
	if err := s.IssueTokens(ctx, in, now); err != nil {
		b.Fatal(err)
	}
	c := startCPU(b)
	defer c.stop()
	for range b.N {
		if _, err := s.GetToken(ctx, in.Access.Hash, now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpen is the start-up cost of a store of 20,000 grants with their tokens (about
// 60,000 items): Open reads and checks the whole file (see integrity.go).
func BenchmarkOpen(b *testing.B) {
	s, dir := openTemp(b, embedded.Options{NoSync: true})
	ctx := b.Context()
	now := time.Now()
	for range 20000 {
		if err := s.IssueTokens(ctx, benchIssue(benchGrant(now), now, true), now); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, embedded.FileName))
	if err != nil {
		b.Fatal(err)
	}
	c := startCPU(b)
	for range b.N {
		s, err := embedded.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	c.stop()
	b.ReportMetric(float64(st.Size())/(1<<20), "file-MiB")
}

// BenchmarkFAPIExchange is the store's part of a FAPI code exchange (a client assertion's and
// a DPoP proof's jti with it), both ways: "apart" records the two values in their own
// transactions (UseOnce) before the code's (as before issue 28), "with_the_code" records them
// in the code's transaction (ConsumeCode's once values); then the issuance.
func BenchmarkFAPIExchange(b *testing.B) {
	for _, sync := range []struct {
		name string
		opts embedded.Options
	}{{"NoSync", embedded.Options{NoSync: true}}, {"Fsync", embedded.Options{}}} {
		for _, apart := range []bool{true, false} {
			name := sync.name + "/with_the_code"
			if apart {
				name = sync.name + "/apart"
			}
			b.Run(name, func(b *testing.B) { benchFAPIExchange(b, sync.opts, apart) })
		}
	}
}

func benchFAPIExchange(b *testing.B, opts embedded.Options, apart bool) {
	s, _ := openTemp(b, opts)
	ctx := b.Context()
	now := time.Now()
	codes := createCodes(b, s, b.N, now)
	b.ResetTimer()
	for i := range b.N {
		once := []oauth.Once{
			{Key: oauth.NewID("assertion:"), Expires: now.Add(time.Minute)},
			{Key: oauth.NewID("dpop:"), Expires: now.Add(time.Minute)},
		}
		var c oauth.Code
		var err error
		if apart {
			for _, o := range once {
				if err := s.UseOnce(ctx, o.Key, o.Expires, now); err != nil {
					b.Fatal(err)
				}
			}
			c, err = s.ConsumeCode(ctx, codes[i].Hash, "cl_bench", now)
		} else {
			c, err = s.ConsumeCode(ctx, codes[i].Hash, "cl_bench", now, once...)
		}
		if err != nil {
			b.Fatal(err)
		}
		if err := s.IssueTokens(ctx, benchIssue(c.Grant, now, true), now); err != nil {
			b.Fatal(err)
		}
	}
}
