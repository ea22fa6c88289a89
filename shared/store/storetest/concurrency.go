package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// racers is how many goroutines race on one item.
const racers = 50

// race runs fn(i) in n goroutines released together and returns their errors by index.
func race(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	var ready, done sync.WaitGroup
	gate := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-gate
			errs[i] = fn(i)
		}()
	}
	ready.Wait()
	close(gate)
	done.Wait()
	return errs
}

// wantOneWinner checks that exactly one error is nil and every other one is loser.
func wantOneWinner(t *testing.T, errs []error, loser error, what string) {
	t.Helper()
	wins := 0
	for i, err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, loser):
			t.Errorf("%s: racer %d got %v, want nil or %v", what, i, err, loser)
		}
	}
	if wins != 1 {
		t.Errorf("%s: %d of %d racers succeeded, want exactly 1", what, wins, len(errs))
	}
}

// concurrencyTests prove single use and compare-and-swap under real contention.
var concurrencyTests = []test{
	{"RacingConsumeCodeHasOneWinner", func(t *testing.T, s oauth.Store) {
		now := start()
		c := newCode(anyGrant(now), now)
		mustNil(t, s.CreateCode(t.Context(), c), "CreateCode")
		got := make([]oauth.Code, racers)
		errs := race(racers, func(i int) (err error) {
			got[i], err = s.ConsumeCode(t.Context(), c.Hash, c.Grant.ClientID, now)
			return err
		})
		wantOneWinner(t, errs, oauth.ErrUsed, "ConsumeCode")
		for i := range got {
			if got[i].Hash != c.Hash || got[i].Grant.ID != c.Grant.ID {
				t.Errorf("racer %d got code %.8s… of grant %s, want the raced code with its grant", i, got[i].Hash, got[i].Grant.ID)
			}
		}
	}},
	{"RacingRefreshesOfOneTokenHaveOneWinner", func(t *testing.T, s oauth.Store) {
		now := start()
		in := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), in, now), "IssueTokens")
		ins := make([]oauth.Issue, racers)
		for i := range ins {
			ins[i] = nextIssue(in, now)
		}
		errs := race(racers, func(i int) error { return s.IssueTokens(t.Context(), ins[i], now) })
		wantOneWinner(t, errs, oauth.ErrConflict, "racing refreshes")
		for i, err := range errs {
			if err != nil {
				wantNoTokens(t, s, now, ins[i].Access.Hash, ins[i].Refresh.Hash)
				continue
			}
			wantLiveTokens(t, s, now, ins[i].Access, ins[i].Refresh)
			wantGrantTokens(t, s, in.Grant, now, ins[i].Tokens)
			tok, err := s.GetToken(t.Context(), in.Refresh.Hash, now)
			mustNil(t, err, "GetToken of the spent token")
			if !tok.Spent || !slices.Equal(tok.Successors, []string{ins[i].Access.Hash, ins[i].Refresh.Hash}) {
				t.Errorf("spent token: Spent %v Successors %.8q, want the winner's pair", tok.Spent, tok.Successors)
			}
		}
	}},
	{"RacingTakeAuthRequestHasOneWinner", func(t *testing.T, s oauth.Store) {
		now := start()
		r := newAuthRequest(now)
		mustNil(t, s.PutAuthRequest(t.Context(), r), "PutAuthRequest")
		errs := race(racers, func(int) error {
			_, err := s.TakeAuthRequest(t.Context(), r.ID, now)
			return err
		})
		wantOneWinner(t, errs, oauth.ErrNotFound, "TakeAuthRequest")
	}},
	{"RacingUpdateKeysFromOneVersionHasOneWinner", func(t *testing.T, s oauth.Store) {
		now := start()
		// Every fn waits until all racers have read the set, so all of them start from the
		// same version; an adapter that holds a lock across fn would never release them.
		var read sync.WaitGroup
		read.Add(racers)
		allRead := make(chan struct{})
		go func() { read.Wait(); close(allRead) }()
		keys := make([]oauth.SigningKey, racers)
		for i := range keys {
			keys[i] = newSigningKey(oauth.KeyCurrent, now)
		}
		seen := make([]int64, racers)
		errs := race(racers, func(i int) error {
			calls := 0
			return s.UpdateKeys(t.Context(), func(old oauth.KeySet) (oauth.KeySet, error) {
				calls++
				if calls > 1 {
					return old, fmt.Errorf("UpdateKeys called fn %d times, want once", calls)
				}
				seen[i] = old.Version
				read.Done()
				select {
				case <-allRead:
				case <-time.After(30 * time.Second):
					return old, errors.New("fn calls never overlapped: UpdateKeys must not hold a lock while fn runs")
				}
				return oauth.KeySet{Keys: []oauth.SigningKey{keys[i]}, Version: old.Version}, nil
			})
		})
		for i, v := range seen {
			if v != 0 {
				t.Errorf("racer %d read version %d, want 0", i, v)
			}
		}
		wantOneWinner(t, errs, oauth.ErrConflict, "UpdateKeys")
		set, err := s.Keys(t.Context())
		mustNil(t, err, "Keys")
		if set.Version != 1 || len(set.Keys) != 1 {
			t.Fatalf("Keys after the race = version %d with %d keys, want version 1 with 1 key", set.Version, len(set.Keys))
		}
		winner := slices.IndexFunc(errs, func(err error) bool { return err == nil })
		if winner >= 0 {
			wantEqual(t, set.Keys[0], keys[winner], "the winner's key")
		}
	}},
	{"RacingUpdateClientLosesNoUpdate", func(t *testing.T, s oauth.Store) {
		const n = 20
		c := newClient(start())
		mustNil(t, s.CreateClient(t.Context(), c), "CreateClient")
		uris := make([]string, n)
		for i := range uris {
			uris[i] = fmt.Sprintf("https://ledger.example.com/cb/%d", i)
		}
		errs := race(n, func(i int) error {
			return s.UpdateClient(t.Context(), c.ID, func(old oauth.Client) (oauth.Client, error) {
				old.RedirectURIs = append(old.RedirectURIs, uris[i])
				return old, nil
			})
		})
		got, err := s.GetClient(t.Context(), c.ID)
		mustNil(t, err, "GetClient")
		want := slices.Clone(c.RedirectURIs)
		for i, err := range errs {
			switch {
			case err == nil:
				want = append(want, uris[i])
			case !errors.Is(err, oauth.ErrConflict):
				t.Errorf("UpdateClient racer %d: %v, want nil or ErrConflict", i, err)
			}
		}
		slices.Sort(want)
		slices.Sort(got.RedirectURIs)
		if !slices.Equal(got.RedirectURIs, want) {
			t.Errorf("redirect URIs after %d racing updates = %v, want those of the successful ones %v", n, got.RedirectURIs, want)
		}
	}},
	{"RacingUpdateUserLosesNoUpdate", func(t *testing.T, s oauth.Store) {
		const n = 20
		u := newUser(start())
		mustNil(t, s.CreateUser(t.Context(), u), "CreateUser")
		errs := race(n, func(i int) error {
			return s.UpdateUser(t.Context(), u.UID, func(old oauth.User) (oauth.User, error) {
				old.Claims.UpdatedAt++
				return old, nil
			})
		})
		wins := int64(0)
		for i, err := range errs {
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, oauth.ErrConflict):
				t.Errorf("UpdateUser racer %d: %v, want nil or ErrConflict", i, err)
			}
		}
		got, err := s.GetUser(t.Context(), u.UID)
		mustNil(t, err, "GetUser")
		if got.Claims.UpdatedAt != u.Claims.UpdatedAt+wins {
			t.Errorf("after %d successful increments updated_at moved by %d", wins, got.Claims.UpdatedAt-u.Claims.UpdatedAt)
		}
	}},
	{"RacingCreateUserWithOneUsernameHasOneWinner", func(t *testing.T, s oauth.Store) {
		const n = 20
		now := start()
		users := make([]oauth.User, n)
		username := id("race.")
		for i := range users {
			users[i] = newUser(now)
			users[i].Username = username
		}
		errs := race(n, func(i int) error { return s.CreateUser(t.Context(), users[i]) })
		wantOneWinner(t, errs, oauth.ErrAlreadyExists, "CreateUser")
		winner := slices.IndexFunc(errs, func(err error) bool { return err == nil })
		got, err := s.GetUserByUsername(t.Context(), username)
		mustNil(t, err, "GetUserByUsername")
		if winner >= 0 && got.UID != users[winner].UID {
			t.Errorf("username belongs to %s, want the winner %s", got.UID, users[winner].UID)
		}
		for i, u := range users {
			if i == winner {
				continue
			}
			if _, err := s.GetUser(t.Context(), u.UID); !errors.Is(err, oauth.ErrNotFound) {
				t.Errorf("loser %d's user exists after a refused create: %v", i, err)
			}
		}
	}},
	{"RacingCountFailureCountsEveryFailure", func(t *testing.T, s oauth.Store) {
		now := start()
		key := id("login:")
		counts := make([]int, racers)
		errs := race(racers, func(i int) (err error) {
			counts[i], err = s.CountFailure(t.Context(), key, time.Hour, now)
			return err
		})
		for i, err := range errs {
			if err != nil {
				t.Errorf("CountFailure racer %d: %v", i, err)
			}
		}
		slices.Sort(counts)
		for i, c := range counts {
			if c != i+1 {
				t.Fatalf("racing CountFailure returned %v, want each of 1..%d once", counts, racers)
			}
		}
		n, err := s.Failures(t.Context(), key, now)
		mustNil(t, err, "Failures")
		if n != racers {
			t.Errorf("Failures after %d racing failures = %d", racers, n)
		}
	}},
	{"RevokeGrantRacingRefreshLeavesNoUsableToken", func(t *testing.T, s oauth.Store) {
		// Repeated, since the interleaving that loses a token is a narrow one.
		const rounds = 20
		now := start()
		for round := range rounds {
			i1 := firstIssue(anyGrant(now), now)
			mustNil(t, s.IssueTokens(t.Context(), i1, now), "IssueTokens from code")
			i2 := nextIssue(i1, now)
			errs := race(2, func(i int) error {
				if i == 0 {
					return s.RevokeGrant(t.Context(), i1.Grant.ID, now)
				}
				return s.IssueTokens(t.Context(), i2, now)
			})
			if errs[0] != nil {
				t.Errorf("round %d: RevokeGrant: %v", round, errs[0])
			}
			if errs[1] != nil && !errors.Is(errs[1], oauth.ErrRevoked) {
				t.Errorf("round %d: IssueTokens racing RevokeGrant: %v, want nil or ErrRevoked", round, errs[1])
			}
			wantNoTokens(t, s, now, i2.Tokens...)
			rec, err := s.GetGrant(t.Context(), i1.Grant.ID, now)
			if err != nil || !rec.Revoked {
				t.Errorf("round %d: GetGrant after the race = %+v, %v; want it revoked", round, rec, err)
			}
			if t.Failed() {
				return
			}
		}
	}},
	{"RevokeGrantRacingFirstIssueLeavesNoUsableToken", func(t *testing.T, s oauth.Store) {
		// A code replayed while its first exchange is in flight revokes a grant that may not
		// be written yet: whichever lands first, no token may survive.
		const rounds = 20
		now := start()
		for round := range rounds {
			in := firstIssue(anyGrant(now), now)
			errs := race(2, func(i int) error {
				if i == 0 {
					return s.RevokeGrant(t.Context(), in.Grant.ID, now)
				}
				return s.IssueTokens(t.Context(), in, now)
			})
			if errs[0] != nil {
				t.Errorf("round %d: RevokeGrant: %v", round, errs[0])
			}
			if errs[1] != nil && !errors.Is(errs[1], oauth.ErrRevoked) {
				t.Errorf("round %d: IssueTokens racing RevokeGrant: %v, want nil or ErrRevoked", round, errs[1])
			}
			wantNoTokens(t, s, now, in.Tokens...)
			wantNoLiveGrant(t, s, in.Grant, now)
			if t.Failed() {
				return
			}
		}
	}},
	{"RacingWritersSomeRefusedEachKeepOnlyTheirOwnWrites", func(t *testing.T, s oauth.Store) {
		// 50 writers at once, of six kinds: two accepted (a fresh code, a first issuance) and
		// four refused (a used code, a replayed value, a revoked grant, a spent refresh token).
		// A store that shares commits among writers must store every accepted write whole and
		// nothing of a refused one, whatever shares its transaction.
		now := start()
		ctx := t.Context()
		type racer struct {
			code oauth.Code
			in   oauth.Issue
			once []oauth.Once
			want error
		}
		used, replayed := newCode(anyGrant(now), now), once("dpop:", now)
		mustNil(t, s.CreateCode(ctx, used), "CreateCode")
		_, err := s.ConsumeCode(ctx, used.Hash, used.Grant.ClientID, now)
		mustNil(t, err, "ConsumeCode before the race")
		mustNil(t, s.UseOnce(ctx, replayed.Key, replayed.Expires, now), "UseOnce before the race")
		spent := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(ctx, spent, now), "IssueTokens before the race")
		refresh(t, s, spent, now)
		racers := make([]racer, racers)
		for i := range racers {
			r := &racers[i]
			r.once = []oauth.Once{once("assertion:", now), once("dpop:", now)}
			switch i % 6 {
			case 0: // accepted: a fresh code
				r.code = newCode(anyGrant(now), now)
				mustNil(t, s.CreateCode(ctx, r.code), "CreateCode")
			case 1: // refused: the code was used
				r.code, r.want = used, oauth.ErrUsed
			case 2: // refused: a value was used, the code is fresh
				r.code, r.want = newCode(anyGrant(now), now), oauth.ErrReplayed
				mustNil(t, s.CreateCode(ctx, r.code), "CreateCode")
				r.once = append(r.once, replayed)
			case 3: // accepted: a first issuance
				r.in = firstIssue(anyGrant(now), now)
			case 4: // refused: the grant was revoked before its first issuance
				r.in, r.want = firstIssue(anyGrant(now), now), oauth.ErrRevoked
				mustNil(t, s.RevokeGrant(ctx, r.in.Grant.ID, now), "RevokeGrant")
			case 5: // refused: a refresh of a token spent before the race
				r.in, r.want = nextIssue(spent, now), oauth.ErrConflict
			}
		}
		errs := race(len(racers), func(i int) error {
			r := &racers[i]
			if r.in.Grant.ID == "" {
				_, err := s.ConsumeCode(ctx, r.code.Hash, r.code.Grant.ClientID, now, r.once...)
				return err
			}
			r.in.Once = r.once
			return s.IssueTokens(ctx, r.in, now)
		})
		for i, r := range racers {
			err := errs[i]
			switch {
			case r.want == nil && err != nil:
				t.Errorf("racer %d (kind %d): %v, want it accepted", i, i%6, err)
			case r.want != nil && !errors.Is(err, r.want):
				t.Errorf("racer %d (kind %d): %v, want %v", i, i%6, err, r.want)
			}
			// Its values are recorded if and only if it was accepted.
			for _, o := range r.once {
				if o.Key == replayed.Key {
					continue
				}
				err := s.UseOnce(ctx, o.Key, o.Expires, now)
				if r.want == nil && !errors.Is(err, oauth.ErrUsed) {
					t.Errorf("racer %d (kind %d): UseOnce of its value: %v, want ErrUsed (recorded with the write)", i, i%6, err)
				}
				if r.want != nil && err != nil {
					t.Errorf("racer %d (kind %d): UseOnce of its value: %v, want nil (a refused write records nothing)", i, i%6, err)
				}
			}
			switch i % 6 {
			case 0:
				_, err := s.ConsumeCode(ctx, r.code.Hash, r.code.Grant.ClientID, now)
				wantErr(t, err, oauth.ErrUsed, fmt.Sprintf("racer %d: its code consumed again", i))
			case 2:
				_, err := s.ConsumeCode(ctx, r.code.Hash, r.code.Grant.ClientID, now)
				mustNil(t, err, fmt.Sprintf("racer %d: its code, left unconsumed by the refusal", i))
			case 3:
				wantLiveTokens(t, s, now, r.in.Access, r.in.Refresh)
			case 4, 5:
				wantNoTokens(t, s, now, r.in.Access.Hash, r.in.Refresh.Hash)
			}
		}
	}},
}
