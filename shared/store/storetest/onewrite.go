package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// onceTests prove that a request's one-time values (oauth.Once: a DPoP proof's and a client
// assertion's jti) commit in the same atomic write as the code's consumption or the refresh's
// issuance: recorded with it or not at all, with UseOnce's rule (absent or expired), and a
// value used before refuses the whole write.
var onceTests = []test{
	{"ConsumeCodeRecordsItsValuesWithTheCode", func(t *testing.T, s oauth.Store) {
		now := start()
		c := newCode(anyGrant(now), now)
		mustNil(t, s.CreateCode(t.Context(), c), "CreateCode")
		a, d := once("assertion:", now), once("dpop:", now)
		got, err := s.ConsumeCode(t.Context(), c.Hash, c.Grant.ClientID, now, a, d)
		mustNil(t, err, "ConsumeCode with values")
		wantEqual(t, got, c, "consumed code")
		wantErr(t, s.UseOnce(t.Context(), a.Key, a.Expires, now), oauth.ErrUsed, "UseOnce of the assertion's value")
		wantErr(t, s.UseOnce(t.Context(), d.Key, d.Expires, now), oauth.ErrUsed, "UseOnce of the proof's value")
		_, err = s.ConsumeCode(t.Context(), c.Hash, c.Grant.ClientID, now)
		wantErr(t, err, oauth.ErrUsed, "ConsumeCode again")
	}},
	{"ConsumeCodeWithAReplayedValueLeavesTheCodeUnconsumed", func(t *testing.T, s oauth.Store) {
		now := start()
		c := newCode(anyGrant(now), now)
		mustNil(t, s.CreateCode(t.Context(), c), "CreateCode")
		used, fresh := once("dpop:", now), once("assertion:", now)
		mustNil(t, s.UseOnce(t.Context(), used.Key, used.Expires, now), "UseOnce")
		_, err := s.ConsumeCode(t.Context(), c.Hash, c.Grant.ClientID, now, fresh, used)
		wantReplayed(t, err, used.Key, "ConsumeCode with a replayed value")
		mustNil(t, s.UseOnce(t.Context(), fresh.Key, fresh.Expires, now), "UseOnce of the value sent beside it (not recorded)")
		got, err := s.ConsumeCode(t.Context(), c.Hash, c.Grant.ClientID, now)
		mustNil(t, err, "ConsumeCode of the code afterwards (unconsumed)")
		wantEqual(t, got, c, "code")
	}},
	{"ConsumeCodeWithAUsedCodeAndAReplayedValueTellsTheValue", func(t *testing.T, s oauth.Store) {
		now := start()
		c := newCode(anyGrant(now), now)
		mustNil(t, s.CreateCode(t.Context(), c), "CreateCode")
		v := once("dpop:", now)
		_, err := s.ConsumeCode(t.Context(), c.Hash, c.Grant.ClientID, now, v)
		mustNil(t, err, "first ConsumeCode")
		_, err = s.ConsumeCode(t.Context(), c.Hash, c.Grant.ClientID, now, v)
		wantReplayed(t, err, v.Key, "the same request again")
	}},
	{"RefusedCodeRecordsNoValue", func(t *testing.T, s oauth.Store) {
		now := start()
		c := newCode(anyGrant(now), now)
		mustNil(t, s.CreateCode(t.Context(), c), "CreateCode")
		v := once("dpop:", now)
		_, err := s.ConsumeCode(t.Context(), hash("unknown_"), c.Grant.ClientID, now, v)
		wantErr(t, err, oauth.ErrNotFound, "ConsumeCode of an unknown code")
		_, err = s.ConsumeCode(t.Context(), c.Hash, id(oauth.PrefixClientID), now, v)
		wantErr(t, err, oauth.ErrNotFound, "ConsumeCode of another client's code")
		_, err = s.ConsumeCode(t.Context(), c.Hash, c.Grant.ClientID, now)
		mustNil(t, err, "ConsumeCode")
		got, err := s.ConsumeCode(t.Context(), c.Hash, c.Grant.ClientID, now, v)
		wantErr(t, err, oauth.ErrUsed, "ConsumeCode of a used code with a fresh value")
		wantEqual(t, got.Grant.ID, c.Grant.ID, "used code's grant")
		mustNil(t, s.UseOnce(t.Context(), v.Key, v.Expires, now), "UseOnce of the value (never recorded)")
	}},
	{"AnExpiredRecordDoesNotRefuseTheValue", func(t *testing.T, s oauth.Store) {
		now := start()
		v := once("dpop:", now)
		mustNil(t, s.UseOnce(t.Context(), v.Key, now.Add(time.Minute), now), "UseOnce")
		later := now.Add(time.Minute)
		c := newCode(anyGrant(later), later)
		mustNil(t, s.CreateCode(t.Context(), c), "CreateCode")
		v.Expires = later.Add(time.Minute)
		_, err := s.ConsumeCode(t.Context(), c.Hash, c.Grant.ClientID, later, v)
		mustNil(t, err, "ConsumeCode with a value whose record has expired")
	}},
	{"FiftyRequestsReusingOneValueOverFiftyCodesConsumeOne", func(t *testing.T, s oauth.Store) {
		now := start()
		codes := make([]oauth.Code, racers)
		for i := range codes {
			codes[i] = newCode(anyGrant(now), now)
			mustNil(t, s.CreateCode(t.Context(), codes[i]), "CreateCode")
		}
		v := once("dpop:", now)
		errs := race(racers, func(i int) error {
			_, err := s.ConsumeCode(t.Context(), codes[i].Hash, codes[i].Grant.ClientID, now, v)
			return err
		})
		wantOneWinner(t, errs, oauth.ErrReplayed, "ConsumeCode reusing one value")
		for i, err := range errs {
			if err == nil {
				continue
			}
			wantReplayed(t, err, v.Key, "loser")
			_, err := s.ConsumeCode(t.Context(), codes[i].Hash, codes[i].Grant.ClientID, now)
			mustNil(t, err, "ConsumeCode of a losing racer's code (unconsumed)")
		}
	}},
	{"RefreshRecordsItsValuesWithTheIssuance", func(t *testing.T, s oauth.Store) {
		now := start()
		first := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), first, now), "IssueTokens")
		next := nextIssue(first, now)
		a, d := once("assertion:", now), once("dpop:", now)
		next.Once = []oauth.Once{a, d}
		mustNil(t, s.IssueTokens(t.Context(), next, now), "refresh with values")
		wantErr(t, s.UseOnce(t.Context(), a.Key, a.Expires, now), oauth.ErrUsed, "UseOnce of the assertion's value")
		wantErr(t, s.UseOnce(t.Context(), d.Key, d.Expires, now), oauth.ErrUsed, "UseOnce of the proof's value")
	}},
	{"RefreshWithAReplayedValueSpendsAndIssuesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		first := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), first, now), "IssueTokens")
		used := once("dpop:", now)
		mustNil(t, s.UseOnce(t.Context(), used.Key, used.Expires, now), "UseOnce")
		next := nextIssue(first, now)
		next.Once = []oauth.Once{once("assertion:", now), used}
		wantReplayed(t, s.IssueTokens(t.Context(), next, now), used.Key, "refresh with a replayed value")
		rt, err := s.GetToken(t.Context(), first.Refresh.Hash, now)
		mustNil(t, err, "GetToken of the refresh token")
		if rt.Spent {
			t.Errorf("refresh token spent by a refresh refused for its replayed value")
		}
		_, err = s.GetToken(t.Context(), next.Access.Hash, now)
		wantErr(t, err, oauth.ErrNotFound, "GetToken of the refused refresh's access token")
		mustNil(t, s.UseOnce(t.Context(), next.Once[0].Key, now.Add(time.Minute), now), "UseOnce of the value sent beside it (not recorded)")
		next.Once = nil
		mustNil(t, s.IssueTokens(t.Context(), next, now), "the refresh without the value")
	}},
	{"KeptRefreshWithAReplayedValueChangesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		first := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), first, now), "IssueTokens")
		used := once("dpop:", now)
		mustNil(t, s.UseOnce(t.Context(), used.Key, used.Expires, now), "UseOnce")
		in := keepIssue(first, first.Refresh, now)
		in.Once = []oauth.Once{used}
		wantReplayed(t, s.IssueTokens(t.Context(), in, now), used.Key, "kept refresh with a replayed value")
		rt, err := s.GetToken(t.Context(), first.Refresh.Hash, now)
		mustNil(t, err, "GetToken of the kept token")
		wantEqual(t, rt.Live, first.Refresh.Live, "kept token's live list")
	}},
	{"RefusedRefreshRecordsNoValue", func(t *testing.T, s oauth.Store) {
		now := start()
		first := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), first, now), "IssueTokens")
		refresh(t, s, first, now)
		v := once("dpop:", now)
		late := nextIssue(first, now)
		late.Once = []oauth.Once{v}
		wantErr(t, s.IssueTokens(t.Context(), late, now), oauth.ErrConflict, "refresh of a spent token")
		mustNil(t, s.UseOnce(t.Context(), v.Key, v.Expires, now), "UseOnce of the value (never recorded)")
	}},
	{"FiftyRefreshesReusingOneValueSpendOneToken", func(t *testing.T, s oauth.Store) {
		now := start()
		firsts := make([]oauth.Issue, racers)
		for i := range firsts {
			firsts[i] = firstIssue(anyGrant(now), now)
			mustNil(t, s.IssueTokens(t.Context(), firsts[i], now), "IssueTokens")
		}
		v := once("dpop:", now)
		errs := race(racers, func(i int) error {
			next := nextIssue(firsts[i], now)
			next.Once = []oauth.Once{v}
			return s.IssueTokens(t.Context(), next, now)
		})
		wantOneWinner(t, errs, oauth.ErrReplayed, "refreshes reusing one value")
		for i, err := range errs {
			if err == nil {
				continue
			}
			rt, err := s.GetToken(t.Context(), firsts[i].Refresh.Hash, now)
			mustNil(t, err, "GetToken of a losing racer's refresh token")
			if rt.Spent {
				t.Errorf("racer %d: refresh token spent by a refresh refused for its replayed value", i)
			}
		}
	}},
}

// once returns a fresh one-time value under prefix, live for a minute from now.
func once(prefix string, now time.Time) oauth.Once {
	return oauth.Once{Key: id(prefix), Expires: now.Add(time.Minute)}
}

// wantReplayed checks that err is the *oauth.ReplayedError of key.
func wantReplayed(t *testing.T, err error, key, what string) {
	t.Helper()
	var r *oauth.ReplayedError
	if !errors.As(err, &r) || !errors.Is(err, oauth.ErrReplayed) {
		t.Errorf("%s: got %v, want the replayed value %s", what, err, key)
		return
	}
	if r.Key != key {
		t.Errorf("%s: replayed value %s, want %s", what, r.Key, key)
	}
}
