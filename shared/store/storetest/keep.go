package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// keepIssue returns the refresh of prev's grant that keeps prev's refresh token (oauth.Issue.Keep,
// a client whose refresh tokens do not rotate), built as the domain builds it: a new access
// token, the previous one still live, any older one retired, and the kept token's Live
// replaced.
func keepIssue(prev oauth.Issue, kept oauth.Token, now time.Time) oauth.Issue {
	g := prev.Grant
	a := newToken(oauth.KindAccess, g, now)
	var live, retire []string
	if len(kept.Live) > 0 {
		live, retire = kept.Live[:1], kept.Live[1:]
	}
	newLive := append([]string{a.Hash}, live...)
	return oauth.Issue{
		Grant: g, Access: a, Retire: retire, Tokens: append(slices.Clone(newLive), kept.Hash),
		Keep: &oauth.Keep{Hash: kept.Hash, Read: slices.Clone(kept.Live), Live: newLive},
	}
}

// keepTests prove the store contract of a refresh that does not rotate
// (oauth.GrantStore.IssueTokens with Issue.Keep).
var keepTests = []test{
	{"KeepIssuesAnAccessTokenAndLeavesTheRefreshTokenUnspent", func(t *testing.T, s oauth.Store) {
		now := start()
		in := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), in, now), "IssueTokens")
		kept := in.Refresh
		var issued []oauth.Issue
		for range 3 {
			next := keepIssue(in, kept, now)
			mustNil(t, s.IssueTokens(t.Context(), next, now), "refresh that keeps its token")
			issued = append(issued, next)
			got, err := s.GetToken(t.Context(), kept.Hash, now)
			mustNil(t, err, "GetToken of the kept refresh token")
			if got.Spent || !slices.Equal(got.Live, next.Keep.Live) {
				t.Fatalf("kept token: Spent %v Live %.8q, want unspent with %.8q", got.Spent, got.Live, next.Keep.Live)
			}
			wantGrantTokens(t, s, in.Grant, now, next.Tokens)
			kept = got
		}
		// The grant keeps two live access tokens: the two newest; the first ones are gone.
		wantNoTokens(t, s, now, in.Access.Hash, issued[0].Access.Hash)
		wantLiveTokens(t, s, now, issued[1].Access, issued[2].Access)
	}},
	{"KeepOfAStaleListConflictsAndWritesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		in := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), in, now), "IssueTokens")
		first := keepIssue(in, in.Refresh, now)
		stale := keepIssue(in, in.Refresh, now)
		mustNil(t, s.IssueTokens(t.Context(), first, now), "first refresh")
		wantErr(t, s.IssueTokens(t.Context(), stale, now), oauth.ErrConflict, "refresh of a list changed since read")
		wantNoTokens(t, s, now, stale.Access.Hash)
		wantGrantTokens(t, s, in.Grant, now, first.Tokens)
	}},
	{"KeepOfASpentOrRevokedTokenWritesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		in := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), in, now), "IssueTokens")
		mustNil(t, s.IssueTokens(t.Context(), nextIssue(in, now), now), "rotation spends the token")
		k := keepIssue(in, in.Refresh, now)
		wantErr(t, s.IssueTokens(t.Context(), k, now), oauth.ErrConflict, "keep of a spent token")
		wantNoTokens(t, s, now, k.Access.Hash)

		other := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), other, now), "IssueTokens")
		mustNil(t, s.RevokeGrant(t.Context(), other.Grant.ID, now), "RevokeGrant")
		k = keepIssue(other, other.Refresh, now)
		wantErr(t, s.IssueTokens(t.Context(), k, now), oauth.ErrRevoked, "keep of a revoked grant")
		wantNoTokens(t, s, now, k.Access.Hash)
	}},
	{"RacingKeepsOfOneTokenHaveOneWinnerAndRevocationEndsThemAll", func(t *testing.T, s oauth.Store) {
		now := start()
		in := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), in, now), "IssueTokens")
		ins := make([]oauth.Issue, racers)
		for i := range ins {
			ins[i] = keepIssue(in, in.Refresh, now)
		}
		errs := race(racers, func(i int) error { return s.IssueTokens(t.Context(), ins[i], now) })
		wantOneWinner(t, errs, oauth.ErrConflict, "racing refreshes of a kept token")
		for i, err := range errs {
			if err != nil {
				wantNoTokens(t, s, now, ins[i].Access.Hash)
				continue
			}
			wantLiveTokens(t, s, now, ins[i].Access, in.Access)
			wantGrantTokens(t, s, in.Grant, now, ins[i].Tokens)
		}
		mustNil(t, s.RevokeGrant(t.Context(), in.Grant.ID, now), "RevokeGrant")
		all := []string{in.Access.Hash, in.Refresh.Hash}
		for _, x := range ins {
			all = append(all, x.Access.Hash)
		}
		wantNoTokens(t, s, now, all...)
	}},
}
