package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// rewriteIssue is the first issuance of a merge's or a replace's code for the stored grant
// old, built as the domain builds it (oauth.Service.rewrite): the same id, client, user and
// creation, the scopes given, the next revision, and Rewrite naming old's revision.
func rewriteIssue(old oauth.Grant, scopes oauth.Scopes, now time.Time) oauth.Issue {
	g := old
	g.Scopes = scopes
	g.Revision = old.Revision + 1
	g.UpdatedAt = now.Add(millis)
	g.Managed = true
	g.ExpiresAt = now.Add(grantTTL)
	in := firstIssue(g, now)
	in.Rewrite = &oauth.Rewrite{Action: oauth.GrantActionMerge, Revision: old.Revision}
	return in
}

// wantTokensGone checks that none of the hashes is a live token any more.
func wantTokensGone(t *testing.T, s oauth.Store, hashes []string, now time.Time, what string) {
	t.Helper()
	for _, h := range hashes {
		if _, err := s.GetToken(t.Context(), h, now); !errors.Is(err, oauth.ErrNotFound) {
			t.Errorf("%s: token %s: %v, want ErrNotFound", what, h, err)
		}
	}
}

// wantTokensLive checks that every hash is a live token.
func wantTokensLive(t *testing.T, s oauth.Store, hashes []string, now time.Time, what string) {
	t.Helper()
	for _, h := range hashes {
		if _, err := s.GetToken(t.Context(), h, now); err != nil {
			t.Errorf("%s: token %s: %v, want it live", what, h, err)
		}
	}
}

// rewriteTests prove IssueTokens with Issue.Rewrite (Grant Management's merge and replace):
// the grant is rewritten under its id with its old tokens gone in the same write, a refused
// rewrite writes nothing, and racing rewrites of one revision have one winner.
var rewriteTests = []test{
	{"RewriteReplacesTheGrantAndDeletesItsOldTokensInOneWrite", func(t *testing.T, s oauth.Store) {
		now := start()
		first := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), first, now), "first issuance")
		second := refresh(t, s, first, now.Add(time.Second))
		later := now.Add(2 * time.Second)
		in := rewriteIssue(first.Grant, oauth.Scopes{oauth.ScopeOpenID, oauth.ScopeProfile}, later)
		mustNil(t, s.IssueTokens(t.Context(), in, later), "rewrite")

		rec, err := s.GetGrant(t.Context(), first.Grant.ID, later)
		mustNil(t, err, "GetGrant")
		wantEqual(t, rec.Grant, in.Grant, "rewritten grant")
		wantEqual(t, rec.Tokens, in.Tokens, "rewritten grant's tokens")
		wantTokensGone(t, s, second.Tokens, later, "old tokens after the rewrite")
		wantTokensLive(t, s, []string{in.Access.Hash, in.Refresh.Hash}, later, "new tokens")
		// The new tokens refresh as any grant's do, and revoking the grant ends them.
		next := refresh(t, s, in, later.Add(time.Second))
		mustNil(t, s.RevokeGrant(t.Context(), first.Grant.ID, later.Add(2*time.Second)), "RevokeGrant")
		wantTokensGone(t, s, next.Tokens, later.Add(2*time.Second), "tokens after the grant's revocation")
	}},
	{"RewriteOfAChangedRevisionIsAConflictAndWritesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		first := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), first, now), "first issuance")
		won := rewriteIssue(first.Grant, oauth.Scopes{oauth.ScopeOpenID}, now)
		mustNil(t, s.IssueTokens(t.Context(), won, now), "first rewrite")
		stale := rewriteIssue(first.Grant, oauth.Scopes{oauth.ScopeOpenID, oauth.ScopePhone}, now)
		wantErr(t, s.IssueTokens(t.Context(), stale, now), oauth.ErrConflict, "rewrite of a revision rewritten since")
		rec, err := s.GetGrant(t.Context(), first.Grant.ID, now)
		mustNil(t, err, "GetGrant")
		wantEqual(t, rec.Grant, won.Grant, "grant after the refused rewrite")
		wantTokensLive(t, s, won.Tokens, now, "the winner's tokens")
		wantTokensGone(t, s, stale.Tokens, now, "the refused rewrite's tokens")
	}},
	{"RewriteOfARevokedUnknownOrAnotherUsersGrantIsRevokedAndWritesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		revoked := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), revoked, now), "first issuance")
		mustNil(t, s.RevokeGrant(t.Context(), revoked.Grant.ID, now), "RevokeGrant")
		in := rewriteIssue(revoked.Grant, oauth.Scopes{oauth.ScopeOpenID}, now)
		wantErr(t, s.IssueTokens(t.Context(), in, now), oauth.ErrRevoked, "rewrite of a revoked grant")
		wantTokensGone(t, s, in.Tokens, now, "tokens of the refused rewrite of a revoked grant")

		unknown := rewriteIssue(anyGrant(now), oauth.Scopes{oauth.ScopeOpenID}, now)
		wantErr(t, s.IssueTokens(t.Context(), unknown, now), oauth.ErrRevoked, "rewrite of an unknown grant")
		if _, err := s.GetGrant(t.Context(), unknown.Grant.ID, now); !errors.Is(err, oauth.ErrNotFound) {
			t.Errorf("a refused rewrite of an unknown grant wrote it: %v", err)
		}

		theirs := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), theirs, now), "first issuance")
		for what, change := range map[string]func(*oauth.Grant){
			"another user's":   func(g *oauth.Grant) { g.UID = id("u_") },
			"another client's": func(g *oauth.Grant) { g.ClientID = id(oauth.PrefixClientID) },
		} {
			in := rewriteIssue(theirs.Grant, oauth.Scopes{oauth.ScopeOpenID}, now)
			change(&in.Grant)
			in.Access.Grant, in.Refresh.Grant = in.Grant, in.Grant
			wantErr(t, s.IssueTokens(t.Context(), in, now), oauth.ErrRevoked, "rewrite of "+what+" grant")
			rec, err := s.GetGrant(t.Context(), theirs.Grant.ID, now)
			mustNil(t, err, "GetGrant")
			wantEqual(t, rec.Grant, theirs.Grant, "grant after the refused rewrite as "+what)
			wantTokensLive(t, s, theirs.Tokens, now, "tokens after the refused rewrite as "+what)
		}
	}},
	{"RacingRewritesOfOneRevisionHaveOneWinnerAndOneConsistentGrant", func(t *testing.T, s oauth.Store) {
		now := start()
		first := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), first, now), "first issuance")
		extra := []string{oauth.ScopeProfile, oauth.ScopePhone, oauth.ScopeEmail}
		ins := make([]oauth.Issue, racers)
		for i := range ins {
			ins[i] = rewriteIssue(first.Grant, append(oauth.Scopes{oauth.ScopeOpenID}, extra[i%len(extra)]), now)
		}
		errs := race(racers, func(i int) error { return s.IssueTokens(t.Context(), ins[i], now) })
		wantOneWinner(t, errs, oauth.ErrConflict, "racing rewrites")
		rec, err := s.GetGrant(t.Context(), first.Grant.ID, now)
		mustNil(t, err, "GetGrant")
		for i, err := range errs {
			if err != nil {
				wantTokensGone(t, s, ins[i].Tokens, now, "a losing rewrite's tokens")
				continue
			}
			wantEqual(t, rec.Grant, ins[i].Grant, "grant after the race: the winner's")
			wantEqual(t, rec.Tokens, ins[i].Tokens, "grant's tokens after the race: the winner's")
			wantTokensLive(t, s, ins[i].Tokens, now, "the winner's tokens")
		}
		wantTokensGone(t, s, first.Tokens, now, "the grant's tokens before the race")
	}},
	{"RefreshRacingARewriteEitherCommitsFirstOrWritesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		first := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), first, now), "first issuance")
		rw := rewriteIssue(first.Grant, oauth.Scopes{oauth.ScopeOpenID}, now)
		ref := nextIssue(first, now)
		errs := race(2, func(i int) error {
			if i == 0 {
				return s.IssueTokens(t.Context(), rw, now)
			}
			return s.IssueTokens(t.Context(), ref, now)
		})
		mustNil(t, errs[0], "rewrite racing a refresh")
		if errs[1] != nil {
			wantErr(t, errs[1], oauth.ErrConflict, "refresh that lost to the rewrite")
		}
		// Whichever came first, only the rewrite's tokens are live (a refresh token spent by a
		// refresh that came first is kept, spent, for reuse detection, as after any refresh).
		wantTokensGone(t, s, append(ref.Tokens, first.Access.Hash), now, "tokens of the refresh and of before")
		wantTokensLive(t, s, rw.Tokens, now, "the rewrite's tokens")
		rec, err := s.GetGrant(t.Context(), first.Grant.ID, now)
		mustNil(t, err, "GetGrant")
		wantEqual(t, rec.Tokens, rw.Tokens, "grant's tokens")
	}},
}
