package dynamo_test

import (
	"testing"

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

// BenchmarkRefresh measures the store's part of a refresh against DynamoDB Local:
// SpendRefreshToken then IssueTokens with rotation, each iteration spending the refresh token
// the one before issued.
func BenchmarkRefresh(b *testing.B) {
	f := newFixture(b)
	ctx := b.Context()
	at := now()
	prev := firstIssue(testGrant(at), at)
	mustNil(b, f.store.IssueTokens(ctx, prev, at))
	f.counter.Reset()
	b.ResetTimer()
	for range b.N {
		if _, err := f.store.SpendRefreshToken(ctx, prev.Refresh.Hash, prev.Grant.ClientID, at); err != nil {
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
