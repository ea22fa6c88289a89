package dynamo_test

import (
	"testing"
)

// TestRevokeGrant_DeletesMoreTokensThanOneTransactionHolds covers the grant whose token list
// outgrows DynamoDB's 100 items per transaction (the domain keeps a handful, but the store
// must not leave tokens behind if it ever does): every listed token is gone afterwards.
func TestRevokeGrant_DeletesMoreTokensThanOneTransactionHolds(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	at := now()
	var listed []string
	for range 75 {
		in := firstIssue(testGrant(at), at)
		mustNil(t, f.store.IssueTokens(ctx, in, at))
		listed = append(listed, in.Tokens...)
	}
	big := firstIssue(testGrant(at), at)
	big.Tokens = append(big.Tokens, listed...)
	mustNil(t, f.store.IssueTokens(ctx, big, at))

	f.counter.Reset()
	mustNil(t, f.store.RevokeGrant(ctx, big.Grant.ID, at))
	if got := f.counter.Calls()["TransactWriteItems"]; got != 2 {
		t.Errorf("%d transactions for %d tokens, want 2", got, len(big.Tokens))
	}
	for _, h := range big.Tokens {
		if _, err := f.store.GetToken(ctx, h, at); !isNotFound(err) {
			t.Fatalf("token %s of the revoked grant: %v, want ErrNotFound", h, err)
		}
	}
	rec, err := f.store.GetGrant(ctx, big.Grant.ID, at)
	mustNil(t, err)
	if !rec.Revoked || len(rec.Tokens) != 0 {
		t.Errorf("grant after revocation: revoked=%v tokens=%d, want revoked with none", rec.Revoked, len(rec.Tokens))
	}
}
