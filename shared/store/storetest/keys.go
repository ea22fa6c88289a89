package storetest

import (
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

func newSigningKey(state string, now time.Time) oauth.SigningKey {
	k := oauth.SigningKey{
		Kid:       id("kid-"),
		Ref:       "arn:aws:kms:eu-west-1:111122223333:key/" + id(""),
		State:     state,
		N:         "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw",
		E:         "AQAB",
		CreatedAt: now.Add(millis),
	}
	if state != oauth.KeyNext {
		k.ActivatedAt = now.Add(time.Hour + millis)
	}
	if state == oauth.KeyRetired || state == oauth.KeyDeleted {
		k.RetiredAt = now.Add(2*time.Hour + millis)
	}
	if state == oauth.KeyDeleted {
		k.DeletedAt = now.Add(3*time.Hour + millis)
	}
	return k
}

// keyTests prove the versioned key registry and its compare-and-swap.
var keyTests = []test{
	{"EmptyRegistryIsVersionZero", func(t *testing.T, s oauth.Store) {
		set, err := s.Keys(t.Context())
		mustNil(t, err, "Keys")
		if set.Version != 0 || len(set.Keys) != 0 {
			t.Errorf("Keys of a fresh store = %+v, want an empty set at version 0", set)
		}
	}},
	{"UpdateWritesAndIncrementsVersion", func(t *testing.T, s oauth.Store) {
		now := start()
		keys := []oauth.SigningKey{newSigningKey(oauth.KeyCurrent, now), newSigningKey(oauth.KeyNext, now)}
		mustNil(t, s.UpdateKeys(t.Context(), func(old oauth.KeySet) (oauth.KeySet, error) {
			if old.Version != 0 || len(old.Keys) != 0 {
				t.Errorf("fn given %+v, want the empty set", old)
			}
			return oauth.KeySet{Keys: keys, Version: old.Version}, nil
		}), "first UpdateKeys")
		set, err := s.Keys(t.Context())
		mustNil(t, err, "Keys")
		wantEqual(t, set, oauth.KeySet{Keys: keys, Version: 1}, "key set after one update")

		keys[0].State, keys[0].RetiredAt = oauth.KeyRetired, now.Add(time.Hour)
		keys[1].State, keys[1].ActivatedAt = oauth.KeyCurrent, now.Add(time.Hour)
		keys = append(keys, newSigningKey(oauth.KeyDeleted, now))
		mustNil(t, s.UpdateKeys(t.Context(), func(old oauth.KeySet) (oauth.KeySet, error) {
			if old.Version != 1 {
				t.Errorf("fn given version %d, want 1", old.Version)
			}
			return oauth.KeySet{Keys: keys, Version: old.Version}, nil
		}), "second UpdateKeys")
		set, err = s.Keys(t.Context())
		mustNil(t, err, "Keys")
		wantEqual(t, set, oauth.KeySet{Keys: keys, Version: 2}, "key set after two updates")
	}},
	{"UpdateFnErrorIsReturnedAndNothingWritten", func(t *testing.T, s oauth.Store) {
		now := start()
		err := s.UpdateKeys(t.Context(), func(old oauth.KeySet) (oauth.KeySet, error) {
			return oauth.KeySet{Keys: []oauth.SigningKey{newSigningKey(oauth.KeyCurrent, now)}}, errFn
		})
		wantErr(t, err, errFn, "UpdateKeys with a failing fn")
		set, err := s.Keys(t.Context())
		mustNil(t, err, "Keys")
		if set.Version != 0 || len(set.Keys) != 0 {
			t.Errorf("Keys after a failed update = %+v, want the empty set", set)
		}
	}},
	{"StaleUpdateIsErrConflictAndWritesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		winner := []oauth.SigningKey{newSigningKey(oauth.KeyCurrent, now)}
		loser := []oauth.SigningKey{newSigningKey(oauth.KeyCurrent, now)}
		err := s.UpdateKeys(t.Context(), func(old oauth.KeySet) (oauth.KeySet, error) {
			// Another rotation completes while this one is deciding.
			mustNil(t, s.UpdateKeys(t.Context(), func(old oauth.KeySet) (oauth.KeySet, error) {
				return oauth.KeySet{Keys: winner, Version: old.Version}, nil
			}), "concurrent UpdateKeys")
			return oauth.KeySet{Keys: loser, Version: old.Version}, nil
		})
		wantErr(t, err, oauth.ErrConflict, "stale UpdateKeys")
		set, err := s.Keys(t.Context())
		mustNil(t, err, "Keys")
		wantEqual(t, set, oauth.KeySet{Keys: winner, Version: 1}, "key set after the lost race")

		// The same holds from a non-zero version.
		err = s.UpdateKeys(t.Context(), func(old oauth.KeySet) (oauth.KeySet, error) {
			mustNil(t, s.UpdateKeys(t.Context(), func(old oauth.KeySet) (oauth.KeySet, error) {
				return oauth.KeySet{Keys: winner[:0], Version: old.Version}, nil
			}), "concurrent UpdateKeys")
			return oauth.KeySet{Keys: loser, Version: old.Version}, nil
		})
		wantErr(t, err, oauth.ErrConflict, "stale UpdateKeys from version 1")
		set, err = s.Keys(t.Context())
		mustNil(t, err, "Keys")
		wantEqual(t, set, oauth.KeySet{Version: 2}, "key set after the second lost race")
	}},
	{"VersionReturnedByFnIsIgnored", func(t *testing.T, s oauth.Store) {
		now := start()
		keys := []oauth.SigningKey{newSigningKey(oauth.KeyCurrent, now)}
		mustNil(t, s.UpdateKeys(t.Context(), func(old oauth.KeySet) (oauth.KeySet, error) {
			return oauth.KeySet{Keys: keys, Version: 41}, nil
		}), "UpdateKeys")
		set, err := s.Keys(t.Context())
		mustNil(t, err, "Keys")
		wantEqual(t, set, oauth.KeySet{Keys: keys, Version: 1}, "key set")
	}},
}
