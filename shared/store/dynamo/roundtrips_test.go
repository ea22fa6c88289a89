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
// request each; a refresh is SpendRefreshToken then IssueTokens, one each; validating an access
// token is one GetItem; serving the JWKS reads the key registry in one GetItem; revoking a grant
// takes at most two.
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
		{"SpendRefreshToken", func(t *testing.T) func() error {
			in := firstIssue(testGrant(now()), now())
			mustNil(t, f.store.IssueTokens(ctx, in, now()))
			return func() error {
				_, err := f.store.SpendRefreshToken(ctx, in.Refresh.Hash, in.Grant.ClientID, now())
				return err
			}
		}, map[string]int{"UpdateItem": 1}},
		{"SpendRefreshTokenReplayTellsUsedInOneCall", func(t *testing.T) func() error {
			in := firstIssue(testGrant(now()), now())
			mustNil(t, f.store.IssueTokens(ctx, in, now()))
			_, err := f.store.SpendRefreshToken(ctx, in.Refresh.Hash, in.Grant.ClientID, now())
			mustNil(t, err)
			return func() error {
				_, err := f.store.SpendRefreshToken(ctx, in.Refresh.Hash, in.Grant.ClientID, now())
				return expect(err, oauth.ErrUsed)
			}
		}, map[string]int{"UpdateItem": 1}},
		{"IssueTokensOnRefresh", func(t *testing.T) func() error {
			first := firstIssue(testGrant(now()), now())
			mustNil(t, f.store.IssueTokens(ctx, first, now()))
			second := nextIssue(first, now())
			mustNil(t, f.store.IssueTokens(ctx, second, now()))
			third := nextIssue(second, now()) // retires first.Access: puts, update and a delete
			return func() error { return f.store.IssueTokens(ctx, third, now()) }
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
	old, err := f.store.SpendRefreshToken(ctx, first.Refresh.Hash, g.ClientID, now())
	mustNil(t, err)
	if !old.Spent {
		t.Errorf("spent refresh token came back with Spent unset")
	}
	mustNil(t, f.store.IssueTokens(ctx, nextIssue(first, now()), now()))
	if n := f.counter.Total(); n != 2 {
		t.Errorf("refresh sent %d requests (%v), want 2", n, f.counter.Calls())
	}
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

// TestRoundTrips_RefreshRetryIsTwoSequentialCalls counts a retry within the window: the
// repeated SpendRefreshToken (one UpdateItem, which returns the spent token with its spend
// time and successors) and the retry's IssueTokens (one TransactWriteItems that checks and
// replaces them). A duplicate that loses to a retry already written adds two GetItems to tell
// a duplicate from reuse.
func TestRoundTrips_RefreshRetryIsTwoSequentialCalls(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	g := testGrant(now())
	first := firstIssue(g, now())
	mustNil(t, f.store.IssueTokens(ctx, first, now()))
	_, err := f.store.SpendRefreshToken(ctx, first.Refresh.Hash, g.ClientID, now())
	mustNil(t, err)
	next := nextIssue(first, now())
	next.Spent = first.Refresh.Hash
	f.counter.Reset()
	mustNil(t, f.store.IssueTokens(ctx, next, now()))
	if got := f.counter.Calls(); !maps.Equal(got, map[string]int{"TransactWriteItems": 1}) {
		t.Errorf("refresh recording its successors sent %v, want one TransactWriteItems", got)
	}

	retry := func() error {
		spent, err := f.store.SpendRefreshToken(ctx, first.Refresh.Hash, g.ClientID, now())
		if err = expect(err, oauth.ErrUsed); err != nil {
			return err
		}
		in := nextIssue(first, now())
		in.Spent, in.Retry = spent.Hash, &oauth.Retry{Token: spent, Window: time.Minute}
		return f.store.IssueTokens(ctx, in, now())
	}
	f.counter.Reset()
	mustNil(t, retry())
	if got, want := f.counter.Calls(), map[string]int{"UpdateItem": 1, "TransactWriteItems": 1}; !maps.Equal(got, want) {
		t.Errorf("retry sent %v, want %v", got, want)
	}
	f.counter.Reset()
	mustNil(t, expect(retry(), oauth.ErrConflict))
	if got, want := f.counter.Calls(), map[string]int{"UpdateItem": 1, "TransactWriteItems": 1, "GetItem": 2}; !maps.Equal(got, want) {
		t.Errorf("duplicate retry sent %v, want %v", got, want)
	}
}
