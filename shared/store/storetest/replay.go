package storetest

import (
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// replayTests prove what the DPoP proof and client assertion checks rely on: a one-time value
// is accepted once until it expires, whoever races for it, and other values are independent.
var replayTests = []test{
	{"SecondUseBeforeExpiryIsErrUsed", func(t *testing.T, s oauth.Store) {
		now := start()
		key, exp := id("dpop:"), now.Add(time.Minute)
		mustNil(t, s.UseOnce(t.Context(), key, exp, now), "first UseOnce")
		wantErr(t, s.UseOnce(t.Context(), key, exp, now.Add(59*time.Second)), oauth.ErrUsed, "UseOnce again before expiry")
		mustNil(t, s.UseOnce(t.Context(), id("dpop:"), exp, now), "UseOnce of another value")
	}},
	{"ValueIsUsableAgainOnceExpired", func(t *testing.T, s oauth.Store) {
		now := start()
		key := id("assertion:")
		mustNil(t, s.UseOnce(t.Context(), key, now.Add(time.Minute), now), "first UseOnce")
		later := now.Add(time.Minute) // at its expiry the record is gone
		mustNil(t, s.UseOnce(t.Context(), key, later.Add(time.Minute), later), "UseOnce at the first record's expiry")
		wantErr(t, s.UseOnce(t.Context(), key, later.Add(time.Minute), later.Add(time.Second)), oauth.ErrUsed, "UseOnce within the second record")
	}},
	{"OfRacingUsesExactlyOneWins", func(t *testing.T, s oauth.Store) {
		now := start()
		key := id("dpop:")
		errs := race(racers, func(int) error { return s.UseOnce(t.Context(), key, now.Add(time.Minute), now) })
		wantOneWinner(t, errs, oauth.ErrUsed, "racing UseOnce")
	}},
}
