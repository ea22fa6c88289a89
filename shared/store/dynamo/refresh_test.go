package dynamo_test

import (
	"errors"
	"testing"

	"github.com/acmebank/authserver/shared/oauth"
)

// TestRefresh_CancelledTransactionLeavesTheTokenUnspent: a refresh spends its token inside the
// issuance's TransactWriteItems, so when DynamoDB cancels that transaction (here: one of its
// puts fails its condition) the spend is cancelled with it: the token reads unspent and the
// next refresh of it succeeds. Against DynamoDB Local.
func TestRefresh_CancelledTransactionLeavesTheTokenUnspent(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	at := now()
	first := firstIssue(testGrant(at), at)
	mustNil(t, f.store.IssueTokens(ctx, first, at))

	doomed := nextIssue(first, at)
	doomed.Access.Hash = first.Access.Hash // an item that exists: the put's condition fails
	if err := f.store.IssueTokens(ctx, doomed, at); !errors.Is(err, oauth.ErrAlreadyExists) {
		t.Fatalf("refresh whose put collides: %v, want ErrAlreadyExists", err)
	}
	tok, err := f.store.GetToken(ctx, first.Refresh.Hash, at)
	mustNil(t, err)
	if tok.Spent || !tok.SpentAt.IsZero() || len(tok.Successors) != 0 {
		t.Fatalf("the cancelled refresh left its token spent: Spent %v SpentAt %v Successors %v", tok.Spent, tok.SpentAt, tok.Successors)
	}
	if _, err := f.store.GetToken(ctx, doomed.Refresh.Hash, at); !isNotFound(err) {
		t.Fatalf("the cancelled refresh wrote its refresh token: %v", err)
	}
	mustNil(t, f.store.IssueTokens(ctx, nextIssue(first, at), at))
}
