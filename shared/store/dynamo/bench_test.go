package dynamo_test

import (
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// BenchmarkCodeExchange measures the store's part of a code exchange against DynamoDB Local:
// ConsumeCode then IssueTokens (two sequential requests; the KMS Sign runs beside the second
// in the token function). The codes are written before the timer starts.
func BenchmarkCodeExchange(b *testing.B) {
	f := newFixture(b)
	ctx := b.Context()
	at := now()
	codes := make([]oauth.Code, b.N)
	for i := range codes {
		codes[i] = testCode(testGrant(at), at)
		mustNil(b, f.store.CreateCode(ctx, codes[i]))
	}
	f.counter.Reset()
	b.ResetTimer()
	for i := range b.N {
		c, err := f.store.ConsumeCode(ctx, codes[i].Hash, codes[i].Grant.ClientID, at)
		if err != nil {
			b.Fatal(err)
		}
		if err := f.store.IssueTokens(ctx, firstIssue(c.Grant, at), at); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(f.counter.Total())/float64(b.N), "calls/op")
}

// BenchmarkRefresh measures the store's part of a refresh against DynamoDB Local, as
// oauth.Service.Refresh calls it: GetToken (the refresh token, read to check it), then
// IssueTokens with rotation, whose one transaction spends that token and writes the new pair;
// each iteration spends the refresh token the one before issued.
func BenchmarkRefresh(b *testing.B) {
	f := newFixture(b)
	ctx := b.Context()
	at := now()
	prev := firstIssue(testGrant(at), at)
	mustNil(b, f.store.IssueTokens(ctx, prev, at))
	f.counter.Reset()
	b.ResetTimer()
	for range b.N {
		if _, err := f.store.GetToken(ctx, prev.Refresh.Hash, at); err != nil {
			b.Fatal(err)
		}
		next := nextIssue(prev, at)
		if err := f.store.IssueTokens(ctx, next, at); err != nil {
			b.Fatal(err)
		}
		prev = next
	}
	b.StopTimer()
	b.ReportMetric(float64(f.counter.Total())/float64(b.N), "calls/op")
}

// BenchmarkRefreshRetry measures a retry within the window: GetToken of the spent token (with
// the spend's time and successors) and the retry's IssueTokens. Each iteration first
// refreshes a new grant, untimed.
func BenchmarkRefreshRetry(b *testing.B) {
	f := newFixture(b)
	ctx := b.Context()
	at := now()
	calls := 0
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		first := firstIssue(testGrant(at), at)
		mustNil(b, f.store.IssueTokens(ctx, first, at))
		mustNil(b, f.store.IssueTokens(ctx, nextIssue(first, at), at))
		f.counter.Reset()
		b.StartTimer()
		spent, err := f.store.GetToken(ctx, first.Refresh.Hash, at)
		if err != nil || !spent.Spent {
			b.Fatal(err, spent.Spent)
		}
		retry := nextIssue(first, at)
		retry.Retry = &oauth.Retry{Token: spent, Window: time.Minute}
		if err := f.store.IssueTokens(ctx, retry, at); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		calls += f.counter.Total()
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(calls)/float64(b.N), "calls/op")
}

// BenchmarkGetToken measures access-token validation: one strongly consistent GetItem.
func BenchmarkGetToken(b *testing.B) {
	f := newFixture(b)
	ctx := b.Context()
	at := now()
	in := firstIssue(testGrant(at), at)
	mustNil(b, f.store.IssueTokens(ctx, in, at))
	f.counter.Reset()
	b.ResetTimer()
	for range b.N {
		if _, err := f.store.GetToken(ctx, in.Access.Hash, at); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(f.counter.Total())/float64(b.N), "calls/op")
}

// BenchmarkFAPIExchange measures the store's part of a FAPI code exchange (a client
// assertion's and a DPoP proof's jti) against DynamoDB Local, both ways: "apart" records the
// values with two PutItems sent together before the code's UpdateItem (as before issue 28:
// three sequential round trips), "with_the_code" in the code's TransactWriteItems with the
// code's GetItem beside it (two); then the issuance.
func BenchmarkFAPIExchange(b *testing.B) {
	for _, apart := range []bool{true, false} {
		name := "with_the_code"
		if apart {
			name = "apart"
		}
		b.Run(name, func(b *testing.B) {
			f := newFixture(b)
			ctx := b.Context()
			at := now()
			codes := make([]oauth.Code, b.N)
			for i := range codes {
				codes[i] = testCode(testGrant(at), at)
				mustNil(b, f.store.CreateCode(ctx, codes[i]))
			}
			f.counter.Reset()
			b.ResetTimer()
			for i := range b.N {
				once := []oauth.Once{testOnce("assertion:"), testOnce("dpop:")}
				var c oauth.Code
				var err error
				if apart {
					errs := make(chan error, len(once))
					for _, o := range once {
						go func() { errs <- f.store.UseOnce(ctx, o.Key, o.Expires, at) }()
					}
					for range once {
						mustNil(b, <-errs)
					}
					c, err = f.store.ConsumeCode(ctx, codes[i].Hash, codes[i].Grant.ClientID, at)
				} else {
					c, err = f.store.ConsumeCode(ctx, codes[i].Hash, codes[i].Grant.ClientID, at, once...)
				}
				mustNil(b, err)
				mustNil(b, f.store.IssueTokens(ctx, firstIssue(c.Grant, at), at))
			}
			b.StopTimer()
			b.ReportMetric(float64(f.counter.Total())/float64(b.N), "calls/op")
		})
	}
}
