package storetest

import (
	"bytes"
	"crypto/rand"
	"sync"
	"testing"

	"github.com/acmebank/authserver/shared/oauth"
)

func newSalt() []byte {
	b := make([]byte, oauth.PairwiseSaltLen)
	_, _ = rand.Read(b)
	return b
}

// pairwiseSaltTests prove the pairwise-subject salt is stored once and never changes: a
// changed salt would change every pairwise subject a receipt carries.
var pairwiseSaltTests = []test{
	{"FirstCallStoresItsSalt", func(t *testing.T, s oauth.Store) {
		fresh := newSalt()
		got, err := s.PairwiseSalt(t.Context(), fresh)
		mustNil(t, err, "PairwiseSalt")
		if !bytes.Equal(got, fresh) {
			t.Fatalf("PairwiseSalt of a fresh store = %x, want the salt given %x", got, fresh)
		}
	}},
	{"LaterCallsGetTheStoredSaltNotTheirs", func(t *testing.T, s oauth.Store) {
		first := newSalt()
		_, err := s.PairwiseSalt(t.Context(), first)
		mustNil(t, err, "first PairwiseSalt")
		got, err := s.PairwiseSalt(t.Context(), newSalt())
		mustNil(t, err, "second PairwiseSalt")
		if !bytes.Equal(got, first) {
			t.Fatalf("second PairwiseSalt = %x, want the stored %x", got, first)
		}
		got, err = s.PairwiseSalt(t.Context(), nil)
		mustNil(t, err, "PairwiseSalt with no fresh salt once one is stored")
		if !bytes.Equal(got, first) {
			t.Fatalf("PairwiseSalt(nil) = %x, want the stored %x", got, first)
		}
	}},
	{"WrongLengthIsRefusedAndStoresNothing", func(t *testing.T, s oauth.Store) {
		for _, bad := range [][]byte{nil, make([]byte, oauth.PairwiseSaltLen-1), make([]byte, oauth.PairwiseSaltLen+1)} {
			_, err := s.PairwiseSalt(t.Context(), bad)
			wantErr(t, err, oauth.ErrInvalidSalt, "PairwiseSalt with a salt of the wrong length")
		}
		good := newSalt()
		got, err := s.PairwiseSalt(t.Context(), good)
		mustNil(t, err, "PairwiseSalt after the refusals")
		if !bytes.Equal(got, good) {
			t.Fatalf("PairwiseSalt after refused salts = %x, want %x: a refused salt was stored", got, good)
		}
	}},
	{"FiftyRacingFirstCallsAllGetOneSalt", func(t *testing.T, s oauth.Store) {
		var wg sync.WaitGroup
		got := make([][]byte, 50)
		start := make(chan struct{})
		for i := range got {
			wg.Go(func() {
				<-start
				salt, err := s.PairwiseSalt(t.Context(), newSalt())
				if err != nil {
					t.Errorf("racing PairwiseSalt: %v", err)
				}
				got[i] = salt
			})
		}
		close(start)
		wg.Wait()
		stored, err := s.PairwiseSalt(t.Context(), newSalt())
		mustNil(t, err, "PairwiseSalt after the race")
		for i, salt := range got {
			if !bytes.Equal(salt, stored) {
				t.Fatalf("racer %d got %x, the store keeps %x: two salts were handed out", i, salt, stored)
			}
		}
	}},
}
