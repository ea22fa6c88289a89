package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// window is the retry window the suite's retries run with.
const window = 30 * time.Second

// spent is a grant refreshed once: first issued the refresh token that was spent at now, next
// is the issuance whose write spent it (its successors), and token is the spent token as a
// refresh presenting it again reads it (GetToken), what a retry is built from.
type spent struct {
	first, next oauth.Issue
	token       oauth.Token
}

// spendOnce issues a grant and refreshes it once at now, as oauth.Service.Refresh does: the
// refresh's issuance spends the first refresh token in the same write.
func spendOnce(t *testing.T, s oauth.Store, now time.Time) spent {
	t.Helper()
	first := firstIssue(anyGrant(now), now)
	mustNil(t, s.IssueTokens(t.Context(), first, now), "IssueTokens from code")
	next := refresh(t, s, first, now)
	return spent{first: first, next: next, token: replay(t, s, first, now)}
}

// replay reads the refresh token of first, as a refresh presenting it again does, and checks
// that it is spent.
func replay(t *testing.T, s oauth.Store, first oauth.Issue, at time.Time) oauth.Token {
	t.Helper()
	tok, err := s.GetToken(t.Context(), first.Refresh.Hash, at)
	mustNil(t, err, "GetToken of the spent refresh token")
	if !tok.Spent {
		t.Fatalf("GetToken of a spent refresh token: Spent is false")
	}
	return tok
}

// retryIssue is the retry of the spent token tok, built as oauth.Service.Refresh builds it:
// the issuance that would have followed first, marked as a retry within window.
func retryIssue(first oauth.Issue, tok oauth.Token, at time.Time) oauth.Issue {
	in := nextIssue(first, at)
	in.Spent = tok.Hash
	in.Retry = &oauth.Retry{Token: tok, Window: window}
	return in
}

// pair is the hashes of an issuance's access and refresh token, as Successors lists them.
func pair(in oauth.Issue) []string { return []string{in.Access.Hash, in.Refresh.Hash} }

// wantGrantTokens checks the grant's live token list.
func wantGrantTokens(t *testing.T, s oauth.Store, g oauth.Grant, now time.Time, want []string) {
	t.Helper()
	rec, err := s.GetGrant(t.Context(), g.ID, now)
	mustNil(t, err, "GetGrant")
	if rec.Revoked {
		t.Errorf("grant %s is revoked, want it live", g.ID)
	}
	if !slices.Equal(rec.Tokens, want) {
		t.Errorf("grant tokens = %.8q, want %.8q", rec.Tokens, want)
	}
}

// retryTests prove the refresh retry window's store contract (oauth.GrantStore.IssueTokens
// with Issue.Retry): the spend's time and successors are recorded, one retry within the window
// rotates again and retires the successors, and everything else writes nothing.
var retryTests = []test{
	{"SpendRecordsItsTimeAndTheIssuanceItsSuccessors", func(t *testing.T, s oauth.Store) {
		now := start()
		sp := spendOnce(t, s, now)
		if !sp.token.Spent || !sp.token.SpentAt.Equal(now) {
			t.Errorf("spent token: Spent %v SpentAt %v, want true and %v", sp.token.Spent, sp.token.SpentAt, now)
		}
		if !slices.Equal(sp.token.Successors, pair(sp.next)) || sp.token.Retried {
			t.Errorf("spent token: Successors %.8q Retried %v, want %.8q and false", sp.token.Successors, sp.token.Retried, pair(sp.next))
		}
		// A later replay does not move the spend's time: the window never restarts.
		later := replay(t, s, sp.first, now.Add(time.Minute))
		if !later.SpentAt.Equal(now) {
			t.Errorf("SpentAt after a replay = %v, want %v", later.SpentAt, now)
		}
	}},
	{"RetryWithinTheWindowRotatesAndRetiresTheSuccessors", func(t *testing.T, s oauth.Store) {
		now := start()
		sp := spendOnce(t, s, now)
		at := now.Add(window)
		in := retryIssue(sp.first, sp.token, at)
		mustNil(t, s.IssueTokens(t.Context(), in, at), "retry at the end of the window")
		wantNoTokens(t, s, at, pair(sp.next)...)
		wantLiveTokens(t, s, at, in.Access, in.Refresh)
		wantGrantTokens(t, s, in.Grant, at, in.Tokens)
		tok := replay(t, s, sp.first, at)
		if !tok.Retried || !slices.Equal(tok.Successors, pair(in)) || !tok.SpentAt.Equal(now) {
			t.Errorf("retried token: Retried %v Successors %.8q SpentAt %v, want true, %.8q, %v", tok.Retried, tok.Successors, tok.SpentAt, pair(in), now)
		}
	}},
	{"RetryAfterTheWindowIsErrUsedAndWritesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		sp := spendOnce(t, s, now)
		at := now.Add(window + time.Second)
		in := retryIssue(sp.first, sp.token, at)
		wantErr(t, s.IssueTokens(t.Context(), in, at), oauth.ErrUsed, "retry after the window")
		wantLiveTokens(t, s, at, sp.next.Access, sp.next.Refresh)
		wantNoTokens(t, s, at, pair(in)...)
		wantGrantTokens(t, s, in.Grant, at, sp.next.Tokens)
	}},
	{"RetryAfterTheSuccessorWasSpentIsErrUsedAndWritesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		sp := spendOnce(t, s, now)
		used := refresh(t, s, sp.next, now) // the client got the first answer and used it
		in := retryIssue(sp.first, sp.token, now)
		wantErr(t, s.IssueTokens(t.Context(), in, now), oauth.ErrUsed, "retry after the successor was used")
		wantLiveTokens(t, s, now, sp.next.Access, used.Access, used.Refresh)
		wantNoTokens(t, s, now, pair(in)...)
		wantGrantTokens(t, s, in.Grant, now, used.Tokens)
	}},
	{"SecondRetryIsErrConflictWhileTheFirstRetrysTokenIsUnspent", func(t *testing.T, s oauth.Store) {
		now := start()
		sp := spendOnce(t, s, now)
		first := retryIssue(sp.first, sp.token, now)
		mustNil(t, s.IssueTokens(t.Context(), first, now), "first retry")
		// A second retry, whether it read the token before the first retry (stale successors)
		// or after it (Retried set), is a duplicate: refused, nothing written.
		for _, tok := range []oauth.Token{sp.token, replay(t, s, sp.first, now)} {
			in := retryIssue(sp.first, tok, now)
			wantErr(t, s.IssueTokens(t.Context(), in, now), oauth.ErrConflict, "second retry")
			wantNoTokens(t, s, now, pair(in)...)
		}
		wantLiveTokens(t, s, now, first.Access, first.Refresh)
		wantGrantTokens(t, s, first.Grant, now, first.Tokens)
	}},
	{"SecondRetryAfterTheFirstRetrysTokenWasSpentIsErrUsed", func(t *testing.T, s oauth.Store) {
		now := start()
		sp := spendOnce(t, s, now)
		first := retryIssue(sp.first, sp.token, now)
		mustNil(t, s.IssueTokens(t.Context(), first, now), "first retry")
		refresh(t, s, first, now) // spend the first retry's refresh token
		for _, tok := range []oauth.Token{sp.token, replay(t, s, sp.first, now)} {
			in := retryIssue(sp.first, tok, now)
			wantErr(t, s.IssueTokens(t.Context(), in, now), oauth.ErrUsed, "second retry")
			wantNoTokens(t, s, now, pair(in)...)
		}
	}},
	{"RetryOfARevokedGrantIsErrRevokedAndWritesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		sp := spendOnce(t, s, now)
		mustNil(t, s.RevokeGrant(t.Context(), sp.first.Grant.ID, now), "RevokeGrant")
		in := retryIssue(sp.first, sp.token, now)
		wantErr(t, s.IssueTokens(t.Context(), in, now), oauth.ErrRevoked, "retry of a revoked grant")
		wantNoTokens(t, s, now, pair(in)...)
	}},
	{"RetryOfADeletedSpentTokenIsErrRevokedAndWritesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		sp := spendOnce(t, s, now)
		mustNil(t, s.RevokeToken(t.Context(), sp.first.Refresh.Hash), "RevokeToken")
		in := retryIssue(sp.first, sp.token, now)
		wantErr(t, s.IssueTokens(t.Context(), in, now), oauth.ErrRevoked, "retry whose spent token is gone")
		wantNoTokens(t, s, now, pair(in)...)
		wantLiveTokens(t, s, now, sp.next.Access, sp.next.Refresh)
	}},
	{"RacingRetriesHaveOneWinnerAndTheGrantStaysLive", func(t *testing.T, s oauth.Store) {
		now := start()
		sp := spendOnce(t, s, now)
		ins := make([]oauth.Issue, racers)
		errs := race(racers, func(i int) error {
			tok, err := s.GetToken(t.Context(), sp.first.Refresh.Hash, now)
			if err != nil {
				return err
			}
			ins[i] = retryIssue(sp.first, tok, now)
			return s.IssueTokens(t.Context(), ins[i], now)
		})
		wantOneWinner(t, errs, oauth.ErrConflict, "racing retries")
		for i, err := range errs {
			if err != nil {
				wantNoTokens(t, s, now, pair(ins[i])...)
				continue
			}
			wantLiveTokens(t, s, now, ins[i].Access, ins[i].Refresh)
			wantGrantTokens(t, s, ins[i].Grant, now, ins[i].Tokens)
		}
		wantNoTokens(t, s, now, pair(sp.next)...)
	}},
}
