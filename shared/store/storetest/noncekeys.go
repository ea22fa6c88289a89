package storetest

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

func newNonceKey(n int64, now time.Time) oauth.NonceKey {
	return oauth.NonceKey{ID: n, Wrapped: []byte(id("wrapped-")), CreatedAt: now.Add(millis)}
}

// nonceKeyTests prove the versioned set of DPoP nonce keys, kept apart from the signing-key
// registry, and its compare-and-swap.
var nonceKeyTests = []test{
	{"EmptySetIsVersionZero", func(t *testing.T, s oauth.Store) {
		set, err := s.NonceKeys(t.Context())
		mustNil(t, err, "NonceKeys")
		if set.Version != 0 || len(set.Keys) != 0 {
			t.Errorf("NonceKeys of a fresh store = %+v, want an empty set at version 0", set)
		}
	}},
	{"UpdateWritesIncrementsVersionAndLeavesSigningKeysAlone", func(t *testing.T, s oauth.Store) {
		now := start()
		keys := []oauth.NonceKey{newNonceKey(1, now)}
		mustNil(t, s.UpdateNonceKeys(t.Context(), func(old oauth.NonceKeySet) (oauth.NonceKeySet, error) {
			return oauth.NonceKeySet{Keys: keys, Version: 41}, nil
		}), "first UpdateNonceKeys")
		keys = append(keys, newNonceKey(2, now.Add(time.Hour)))
		mustNil(t, s.UpdateNonceKeys(t.Context(), func(old oauth.NonceKeySet) (oauth.NonceKeySet, error) {
			if old.Version != 1 || len(old.Keys) != 1 {
				t.Errorf("fn given %+v, want version 1 with one key", old)
			}
			return oauth.NonceKeySet{Keys: keys, Version: old.Version}, nil
		}), "second UpdateNonceKeys")
		set, err := s.NonceKeys(t.Context())
		mustNil(t, err, "NonceKeys")
		wantEqual(t, set, oauth.NonceKeySet{Keys: keys, Version: 2}, "nonce keys after two updates")
		reg, err := s.Keys(t.Context())
		mustNil(t, err, "Keys")
		if reg.Version != 0 || len(reg.Keys) != 0 {
			t.Errorf("signing-key registry after nonce key updates = %+v, want untouched", reg)
		}
	}},
	{"FnErrorOrStaleUpdateWritesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		err := s.UpdateNonceKeys(t.Context(), func(old oauth.NonceKeySet) (oauth.NonceKeySet, error) {
			return oauth.NonceKeySet{Keys: []oauth.NonceKey{newNonceKey(1, now)}}, errFn
		})
		wantErr(t, err, errFn, "UpdateNonceKeys with a failing fn")
		winner := []oauth.NonceKey{newNonceKey(1, now)}
		err = s.UpdateNonceKeys(t.Context(), func(old oauth.NonceKeySet) (oauth.NonceKeySet, error) {
			mustNil(t, s.UpdateNonceKeys(t.Context(), func(old oauth.NonceKeySet) (oauth.NonceKeySet, error) {
				return oauth.NonceKeySet{Keys: winner, Version: old.Version}, nil
			}), "concurrent UpdateNonceKeys")
			return oauth.NonceKeySet{Keys: []oauth.NonceKey{newNonceKey(1, now)}, Version: old.Version}, nil
		})
		wantErr(t, err, oauth.ErrConflict, "stale UpdateNonceKeys")
		set, err := s.NonceKeys(t.Context())
		mustNil(t, err, "NonceKeys")
		wantEqual(t, set, oauth.NonceKeySet{Keys: winner, Version: 1}, "nonce keys after the lost race")
	}},
	{"FiftyRacingUpdatesLoseNoWrite", func(t *testing.T, s oauth.Store) {
		now := start()
		var wg sync.WaitGroup
		var won atomic.Int64
		start := make(chan struct{})
		for i := range 50 {
			wg.Go(func() {
				<-start
				err := s.UpdateNonceKeys(t.Context(), func(old oauth.NonceKeySet) (oauth.NonceKeySet, error) {
					return oauth.NonceKeySet{Keys: []oauth.NonceKey{newNonceKey(int64(i+1), now)}}, nil
				})
				switch {
				case err == nil:
					won.Add(1)
				case !errors.Is(err, oauth.ErrConflict):
					t.Errorf("racing UpdateNonceKeys: %v, want nil or ErrConflict", err)
				}
			})
		}
		close(start)
		wg.Wait()
		set, err := s.NonceKeys(t.Context())
		mustNil(t, err, "NonceKeys")
		if set.Version != won.Load() || len(set.Keys) != 1 {
			t.Fatalf("after 50 racing first updates: version %d, %d winners, keys %d; want the version to count the winners", set.Version, won.Load(), len(set.Keys))
		}
	}},
}
