package dynamo_test

import (
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// TestRoundTrips_EachOperationStaysWithinItsBudget counts the requests each store operation
// sends to DynamoDB (DESIGN.md decision 3): a code exchange is ConsumeCode then IssueTokens, one
// request each; a refresh is GetToken then IssueTokens (which spends the token), one each; a
// refresh that lost its token to a racing one is refused by that one transaction; validating an access
// token is one GetItem; serving the JWKS reads the key registry in one GetItem; revoking a grant
// takes at most two, and so does the exchange of a merge's or a replace's code (IssueTokens with
// Rewrite: the grant's GetItem, then one transaction).
func TestRoundTrips_EachOperationStaysWithinItsBudget(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	tests := []struct {
		name string
		// setup prepares the store (its calls are not counted) and returns the operation.
		setup func(t *testing.T) func() error
		want  map[string]int
	}{
		{"ConsumeCode", func(t *testing.T) func() error {
			c := testCode(testGrant(now()), now())
			mustNil(t, f.store.CreateCode(ctx, c))
			return func() error { _, err := f.store.ConsumeCode(ctx, c.Hash, c.Grant.ClientID, now()); return err }
		}, map[string]int{"UpdateItem": 1}},
		{"ConsumeCodeReplayTellsUsedInOneCall", func(t *testing.T) func() error {
			c := testCode(testGrant(now()), now())
			mustNil(t, f.store.CreateCode(ctx, c))
			_, err := f.store.ConsumeCode(ctx, c.Hash, c.Grant.ClientID, now())
			mustNil(t, err)
			return func() error {
				_, err := f.store.ConsumeCode(ctx, c.Hash, c.Grant.ClientID, now())
				return expect(err, oauth.ErrUsed)
			}
		}, map[string]int{"UpdateItem": 1}},
		{"ConsumeCodeWithOneTimeValues", func(t *testing.T) func() error {
			c := testCode(testGrant(now()), now())
			mustNil(t, f.store.CreateCode(ctx, c))
			once := []oauth.Once{testOnce("assertion:"), testOnce("dpop:")}
			return func() error { _, err := f.store.ConsumeCode(ctx, c.Hash, c.Grant.ClientID, now(), once...); return err }
		}, map[string]int{"GetItem": 1, "TransactWriteItems": 1}},
		{"ConsumeCodeWithAReplayedValueTellsItInOneRoundTrip", func(t *testing.T) func() error {
			c := testCode(testGrant(now()), now())
			mustNil(t, f.store.CreateCode(ctx, c))
			used := testOnce("dpop:")
			mustNil(t, f.store.UseOnce(ctx, used.Key, used.Expires, now()))
			return func() error {
				_, err := f.store.ConsumeCode(ctx, c.Hash, c.Grant.ClientID, now(), used)
				return expect(err, oauth.ErrReplayed)
			}
		}, map[string]int{"GetItem": 1, "TransactWriteItems": 1}},
		{"UseOnce", func(t *testing.T) func() error {
			key := oauth.NewID("dpop:")
			return func() error { return f.store.UseOnce(ctx, key, now().Add(time.Minute), now()) }
		}, map[string]int{"PutItem": 1}},
		{"UseOnceReplayTellsUsedInOneCall", func(t *testing.T) func() error {
			key := oauth.NewID("assertion:")
			mustNil(t, f.store.UseOnce(ctx, key, now().Add(time.Minute), now()))
			return func() error { return expect(f.store.UseOnce(ctx, key, now().Add(time.Minute), now()), oauth.ErrUsed) }
		}, map[string]int{"PutItem": 1}},
		{"IssueTokensFromCode", func(t *testing.T) func() error {
			in := firstIssue(testGrant(now()), now())
			return func() error { return f.store.IssueTokens(ctx, in, now()) }
		}, map[string]int{"TransactWriteItems": 1}},
		{"IssueTokensRewritingAGrant", func(t *testing.T) func() error {
			// A Grant Management merge's exchange: the grant read, then one transaction that
			// rewrites it, deletes its tokens and puts the new ones.
			first := firstIssue(testGrant(now()), now())
			mustNil(t, f.store.IssueTokens(ctx, first, now()))
			g := first.Grant
			g.Revision++
			in := firstIssue(g, now())
			in.Rewrite = &oauth.Rewrite{Action: oauth.GrantActionMerge, Revision: first.Grant.Revision}
			return func() error { return f.store.IssueTokens(ctx, in, now()) }
		}, map[string]int{"GetItem": 1, "TransactWriteItems": 1}},
		{"IssueTokensOnRefresh", func(t *testing.T) func() error {
			first := firstIssue(testGrant(now()), now())
			mustNil(t, f.store.IssueTokens(ctx, first, now()))
			second := nextIssue(first, now())
			mustNil(t, f.store.IssueTokens(ctx, second, now()))
			third := nextIssue(second, now()) // retires first.Access: puts, update and a delete
			return func() error { return f.store.IssueTokens(ctx, third, now()) }
		}, map[string]int{"TransactWriteItems": 1}},
		{"IssueTokensOnRefreshWithOneTimeValues", func(t *testing.T) func() error {
			first := firstIssue(testGrant(now()), now())
			mustNil(t, f.store.IssueTokens(ctx, first, now()))
			next := nextIssue(first, now())
			next.Once = []oauth.Once{testOnce("assertion:"), testOnce("dpop:")}
			return func() error { return f.store.IssueTokens(ctx, next, now()) }
		}, map[string]int{"TransactWriteItems": 1}},
		{"IssueTokensOnRefreshOfASpentTokenTellsConflictInOneCall", func(t *testing.T) func() error {
			first := firstIssue(testGrant(now()), now())
			mustNil(t, f.store.IssueTokens(ctx, first, now()))
			mustNil(t, f.store.IssueTokens(ctx, nextIssue(first, now()), now()))
			return func() error {
				return expect(f.store.IssueTokens(ctx, nextIssue(first, now()), now()), oauth.ErrConflict)
			}
		}, map[string]int{"TransactWriteItems": 1}},
		{"GetToken", func(t *testing.T) func() error {
			in := firstIssue(testGrant(now()), now())
			mustNil(t, f.store.IssueTokens(ctx, in, now()))
			return func() error { _, err := f.store.GetToken(ctx, in.Access.Hash, now()); return err }
		}, map[string]int{"GetItem": 1}},
		{"RevokeGrant", func(t *testing.T) func() error {
			in := firstIssue(testGrant(now()), now())
			mustNil(t, f.store.IssueTokens(ctx, in, now()))
			return func() error { return f.store.RevokeGrant(ctx, in.Grant.ID, now()) }
		}, map[string]int{"GetItem": 1, "TransactWriteItems": 1}},
		{"RevokeGrantNotYetWrittenLeavesATombstone", func(t *testing.T) func() error {
			id := oauth.NewID(oauth.PrefixGrant)
			return func() error { return f.store.RevokeGrant(ctx, id, now()) }
		}, map[string]int{"GetItem": 1, "PutItem": 1}},
		{"RevokeGrantAlreadyRevoked", func(t *testing.T) func() error {
			in := firstIssue(testGrant(now()), now())
			mustNil(t, f.store.IssueTokens(ctx, in, now()))
			mustNil(t, f.store.RevokeGrant(ctx, in.Grant.ID, now()))
			return func() error { return f.store.RevokeGrant(ctx, in.Grant.ID, now()) }
		}, map[string]int{"GetItem": 1}},
		{"ConsumeGrant", func(t *testing.T) func() error {
			in := firstIssue(testGrant(now()), now())
			mustNil(t, f.store.IssueTokens(ctx, in, now()))
			return func() error { return f.store.ConsumeGrant(ctx, in.Grant.ID, now()) }
		}, map[string]int{"UpdateItem": 1}},
		{"ConsumeGrantAgainTellsUsedInOneCall", func(t *testing.T) func() error {
			in := firstIssue(testGrant(now()), now())
			mustNil(t, f.store.IssueTokens(ctx, in, now()))
			mustNil(t, f.store.ConsumeGrant(ctx, in.Grant.ID, now()))
			return func() error { return expect(f.store.ConsumeGrant(ctx, in.Grant.ID, now()), oauth.ErrUsed) }
		}, map[string]int{"UpdateItem": 1}},
		{"ConsumeGrantWithADPoPValue", func(t *testing.T) func() error {
			in := firstIssue(testGrant(now()), now())
			mustNil(t, f.store.IssueTokens(ctx, in, now()))
			once := testOnce("dpop:")
			return func() error { return f.store.ConsumeGrant(ctx, in.Grant.ID, now(), once) }
		}, map[string]int{"TransactWriteItems": 1}},
		{"Keys", func(t *testing.T) func() error {
			mustNil(t, f.store.UpdateKeys(ctx, func(s oauth.KeySet) (oauth.KeySet, error) {
				s.Keys = append(s.Keys, oauth.SigningKey{Kid: "k1", Ref: "k1.pem", State: oauth.KeyCurrent, N: "AQAB", E: "AQAB", CreatedAt: now()})
				return s, nil
			}))
			return func() error { _, err := f.store.Keys(ctx); return err }
		}, map[string]int{"GetItem": 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			op := tc.setup(t)
			f.counter.Reset()
			if err := op(); err != nil {
				t.Fatalf("operation: %v", err)
			}
			if got := f.counter.Calls(); !maps.Equal(got, tc.want) {
				t.Errorf("AWS requests = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRoundTrips_CodeExchangeAndRefreshAreTwoSequentialCalls runs the store's part of a code
// exchange and of a refresh end to end and counts every request they send.
func TestRoundTrips_CodeExchangeAndRefreshAreTwoSequentialCalls(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	g := testGrant(now())
	c := testCode(g, now())
	mustNil(t, f.store.CreateCode(ctx, c))

	f.counter.Reset()
	code, err := f.store.ConsumeCode(ctx, c.Hash, g.ClientID, now())
	mustNil(t, err)
	first := firstIssue(code.Grant, now())
	mustNil(t, f.store.IssueTokens(ctx, first, now()))
	if n := f.counter.Total(); n != 2 {
		t.Errorf("code exchange sent %d requests (%v), want 2", n, f.counter.Calls())
	}

	f.counter.Reset()
	old, err := f.store.GetToken(ctx, first.Refresh.Hash, now())
	mustNil(t, err)
	if old.Spent {
		t.Errorf("refresh token read before its refresh came back spent")
	}
	mustNil(t, f.store.IssueTokens(ctx, nextIssue(first, now()), now()))
	if got, want := f.counter.Calls(), map[string]int{"GetItem": 1, "TransactWriteItems": 1}; !maps.Equal(got, want) {
		t.Errorf("refresh sent %v, want %v", got, want)
	}
}

// TestRoundTrips_FAPIExchangeAndRefreshAreTwoSequentialRoundTrips runs the store's part of a
// FAPI code exchange and refresh (a client assertion's and a DPoP proof's jti with each) and
// counts the round trips: the exchange consumes the code and records both values in one
// TransactWriteItems, its GetItem (the code's content) sent at the same time, then issues in a
// second TransactWriteItems; the refresh reads its token, then spends it, issues and records
// both values in one TransactWriteItems. Two sequential round trips each, as without the values.
func TestRoundTrips_FAPIExchangeAndRefreshAreTwoSequentialRoundTrips(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	g := testGrant(now())
	c := testCode(g, now())
	mustNil(t, f.store.CreateCode(ctx, c))
	// Requests sent together overlap only with a network's latency between them and the table
	// (see SetLatency); without it a busy machine may schedule the read after the transaction.
	f.counter.SetLatency(20 * time.Millisecond)

	f.counter.Reset()
	code, err := f.store.ConsumeCode(ctx, c.Hash, g.ClientID, now(), testOnce("assertion:"), testOnce("dpop:"))
	mustNil(t, err)
	first := firstIssue(code.Grant, now())
	mustNil(t, f.store.IssueTokens(ctx, first, now()))
	if got, want := f.counter.Calls(), map[string]int{"GetItem": 1, "TransactWriteItems": 2}; !maps.Equal(got, want) {
		t.Errorf("FAPI code exchange sent %v, want %v", got, want)
	}
	if n := f.counter.RoundTrips(); n != 2 {
		t.Errorf("FAPI code exchange took %d sequential round trips (%+v), want 2", n, f.counter.Spans())
	}

	f.counter.Reset()
	_, err = f.store.GetToken(ctx, first.Refresh.Hash, now())
	mustNil(t, err)
	next := nextIssue(first, now())
	next.Once = []oauth.Once{testOnce("assertion:"), testOnce("dpop:")}
	mustNil(t, f.store.IssueTokens(ctx, next, now()))
	if got, want := f.counter.Calls(), map[string]int{"GetItem": 1, "TransactWriteItems": 1}; !maps.Equal(got, want) {
		t.Errorf("FAPI refresh sent %v, want %v", got, want)
	}
	if n := f.counter.RoundTrips(); n != 2 {
		t.Errorf("FAPI refresh took %d sequential round trips, want 2", n)
	}
}

// testOnce is a fresh one-time value under prefix, live for a minute.
func testOnce(prefix string) oauth.Once {
	return oauth.Once{Key: oauth.NewID(prefix), Expires: now().Add(time.Minute)}
}

// expect turns the wanted sentinel error into success, so the budget table can count calls of
// operations that are meant to fail.
func expect(err, want error) error {
	if errors.Is(err, want) {
		return nil
	}
	if err == nil {
		return errors.New("no error, want " + want.Error())
	}
	return err
}

func mustNil(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

func isNotFound(err error) bool { return errors.Is(err, oauth.ErrNotFound) }

// TestRoundTrips_RefreshRetryIsTwoSequentialCalls counts a retry within the window: GetToken of
// the spent token (one GetItem, with its spend time and successors) and the retry's
// IssueTokens (one TransactWriteItems that checks and replaces them). A duplicate that loses
// to a retry already written adds two GetItems to tell a duplicate from reuse.
func TestRoundTrips_RefreshRetryIsTwoSequentialCalls(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	g := testGrant(now())
	first := firstIssue(g, now())
	mustNil(t, f.store.IssueTokens(ctx, first, now()))
	f.counter.Reset()
	mustNil(t, f.store.IssueTokens(ctx, nextIssue(first, now()), now()))
	if got := f.counter.Calls(); !maps.Equal(got, map[string]int{"TransactWriteItems": 1}) {
		t.Errorf("refresh spending its token and recording its successors sent %v, want one TransactWriteItems", got)
	}

	retry := func() error {
		spent, err := f.store.GetToken(ctx, first.Refresh.Hash, now())
		if err != nil {
			return err
		}
		in := nextIssue(first, now())
		in.Retry = &oauth.Retry{Token: spent, Window: time.Minute}
		return f.store.IssueTokens(ctx, in, now())
	}
	f.counter.Reset()
	mustNil(t, retry())
	if got, want := f.counter.Calls(), map[string]int{"GetItem": 1, "TransactWriteItems": 1}; !maps.Equal(got, want) {
		t.Errorf("retry sent %v, want %v", got, want)
	}
	f.counter.Reset()
	mustNil(t, expect(retry(), oauth.ErrConflict))
	if got, want := f.counter.Calls(), map[string]int{"GetItem": 3, "TransactWriteItems": 1}; !maps.Equal(got, want) {
		t.Errorf("duplicate retry sent %v, want %v", got, want)
	}
}
