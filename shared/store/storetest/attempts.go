package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// attemptTests prove what the login's attempt accounting relies on: CountFailure is an atomic
// increment that hands every racing caller its own count, also when the counter's window has
// just ended and the racers must agree on who starts the new one. The login counts an attempt
// before verifying its password and lets only counts within the limit through, so a count
// returned twice would let a burst of guesses past the limit.
var attemptTests = []test{
	{"RacingCountFailureOnAnEndedWindowStartsOneNewCounter", func(t *testing.T, s oauth.Store) {
		const window = time.Minute
		now := start()
		key := id("login:")
		for range 3 {
			_, err := s.CountFailure(t.Context(), key, window, now)
			mustNil(t, err, "CountFailure")
		}
		later := now.Add(window) // the first window has just ended
		counts := make([]int, racers)
		errs := race(racers, func(i int) (err error) {
			counts[i], err = s.CountFailure(t.Context(), key, window, later)
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
				t.Fatalf("racing CountFailure on an ended window returned %v, want each of 1..%d once", counts, racers)
			}
		}
		n, err := s.Failures(t.Context(), key, later.Add(window-time.Second))
		mustNil(t, err, "Failures")
		if n != racers {
			t.Errorf("Failures in the new window = %d, want %d", n, racers)
		}
	}},
}
