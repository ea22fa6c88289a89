package e2e

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/authn"
)

// Abuse of the login under concurrency: a burst of guesses must be counted before any of them
// is verified, on every store.

// abuseRacers is how many attempts race in one burst.
const abuseRacers = 60

// countingHasher is the test's argon2id hasher that counts the verifications run against one
// stored hash (the target user's), so a test sees how many guesses reached a real check.
type countingHasher struct {
	authn.PasswordHasher
	target   string
	verified atomic.Int64
}

func (h *countingHasher) Verify(password, encoded string) (bool, error) {
	if encoded == h.target {
		h.verified.Add(1)
	}
	return h.PasswordHasher.Verify(password, encoded)
}

// countVerifications makes e's service count the checks against username's stored hash.
func countVerifications(t *testing.T, e *env, username string) *countingHasher {
	t.Helper()
	u, err := e.app.Store.GetUserByUsername(context.Background(), username)
	if err != nil {
		t.Fatal(err)
	}
	h := &countingHasher{PasswordHasher: cheapHasher, target: u.PasswordHash}
	e.withAuthn(func(d *authn.Deps) { d.Passwords = h })
	return h
}

// burst runs n logins at once, released together, and returns their errors.
func burst(e *env, n int, login func(i int) (string, string, string)) []error {
	errs := make([]error, n)
	var ready, done sync.WaitGroup
	gate := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			user, pass, ip := login(i)
			ready.Done()
			<-gate
			_, errs[i] = e.app.Users.CheckPassword(context.Background(), user, pass, ip)
		}()
	}
	ready.Wait()
	close(gate)
	done.Wait()
	return errs
}

// bothStores runs a test on the embedded store and on DynamoDB Local (skipped without it).
func bothStores(t *testing.T, vars map[string]string, run func(t *testing.T, e *env)) {
	t.Run("embedded", func(t *testing.T) { run(t, newEnvFrom(t, envSetup{vars: vars})) })
	t.Run("dynamodb", func(t *testing.T) {
		e, _, _ := newAWSEnvWith(t, vars)
		run(t, e)
	})
}

// TestLogin_ConcurrentGuessesCountedBeforeVerifying: 60 wrong passwords for one username sent
// at once reach at most the limit's number of password checks, and the right password sent
// after them is refused until the window ends.
func TestLogin_ConcurrentGuessesCountedBeforeVerifying(t *testing.T) {
	const limit = 5
	bothStores(t, map[string]string{"AUTH_LOGIN_MAX_FAILURES": fmt.Sprint(limit), "AUTH_LOGIN_FAILURE_WINDOW": "10m"}, func(t *testing.T, e *env) {
		h := countVerifications(t, e, username)
		errs := burst(e, abuseRacers, func(i int) (string, string, string) {
			return username, fmt.Sprintf("guess-%d", i), fmt.Sprintf("198.51.100.%d", i) // many addresses: the username limit binds
		})
		for i, err := range errs {
			if !errors.Is(err, authn.ErrLoginFailed) {
				t.Fatalf("guess %d: %v, want the generic login failure", i, err)
			}
		}
		if n := h.verified.Load(); n > limit {
			t.Fatalf("%d of %d concurrent guesses were verified against the password, limit %d", n, abuseRacers, limit)
		}
		t.Logf("%d of %d concurrent guesses verified (limit %d)", h.verified.Load(), abuseRacers, limit)
		if _, err := e.app.Users.CheckPassword(context.Background(), username, password, "192.0.2.1"); !errors.Is(err, authn.ErrLoginFailed) {
			t.Fatalf("the right password after the burst: %v, want refused", err)
		}
		e.clock.Advance(11 * time.Minute)
		if _, err := e.app.Users.CheckPassword(context.Background(), username, password, "192.0.2.1"); err != nil {
			t.Fatalf("the right password after the window: %v", err)
		}
	})
}

// TestLogin_ConcurrentSprayCountedPerAddress: 60 guesses from one address at once, each for
// another username, lock that address out (4x the limit) even for a right password, while
// another address still signs in.
func TestLogin_ConcurrentSprayCountedPerAddress(t *testing.T) {
	const limit = 2
	bothStores(t, map[string]string{"AUTH_LOGIN_MAX_FAILURES": fmt.Sprint(limit), "AUTH_LOGIN_FAILURE_WINDOW": "10m"}, func(t *testing.T, e *env) {
		const ip = "203.0.113.9"
		errs := burst(e, abuseRacers, func(i int) (string, string, string) { return fmt.Sprintf("sprayed-%d", i), "guess", ip })
		for i, err := range errs {
			if !errors.Is(err, authn.ErrLoginFailed) {
				t.Fatalf("guess %d: %v, want the generic login failure", i, err)
			}
		}
		h := countVerifications(t, e, username)
		if _, err := e.app.Users.CheckPassword(context.Background(), username, password, ip); !errors.Is(err, authn.ErrLoginFailed) {
			t.Fatalf("the right password from the spraying address: %v, want refused", err)
		}
		if n := h.verified.Load(); n != 0 {
			t.Fatalf("a refused attempt was verified against the password (%d)", n)
		}
		if _, err := e.app.Users.CheckPassword(context.Background(), username, password, "192.0.2.1"); err != nil {
			t.Fatalf("another address: %v", err)
		}
	})
}

// TestLogin_SuccessesFromOneAddressDoNotLockItOut: many people signing in from one address (a
// company's NAT) are not refused for their own successes; only failed or unfinished attempts
// count against the address.
func TestLogin_SuccessesFromOneAddressDoNotLockItOut(t *testing.T) {
	e := newEnvFrom(t, envSetup{vars: map[string]string{"AUTH_LOGIN_MAX_FAILURES": "2", "AUTH_LOGIN_FAILURE_WINDOW": "10m"}})
	const ip = "203.0.113.10"
	for i := range 20 {
		if _, err := e.app.Users.CheckPassword(context.Background(), username, password, ip); err != nil {
			t.Fatalf("login %d from one address: %v", i, err)
		}
	}
	for i := range 8 { // the address's allowance: 4x the limit
		e.app.Users.CheckPassword(context.Background(), fmt.Sprintf("someone-%d", i), "guess", ip)
	}
	if _, err := e.app.Users.CheckPassword(context.Background(), username, password, ip); !errors.Is(err, authn.ErrLoginFailed) {
		t.Fatalf("past the address's failures: %v, want refused", err)
	}
}
