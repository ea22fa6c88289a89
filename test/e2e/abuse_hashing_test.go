package e2e

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/authn"
)

// slowHasher is argon2id that takes a while and records how many checks ran at once.
type slowHasher struct {
	authn.PasswordHasher
	delay         time.Duration
	running, peak atomic.Int64
}

func (h *slowHasher) Verify(password, encoded string) (bool, error) {
	n := h.running.Add(1)
	defer h.running.Add(-1)
	for p := h.peak.Load(); n > p && !h.peak.CompareAndSwap(p, n); p = h.peak.Load() {
	}
	time.Sleep(h.delay)
	return h.PasswordHasher.Verify(password, encoded)
}

// TestLogin_PasswordChecksBoundedBusyAnswered: with one password check allowed at a time and
// checks slower than the wait for a slot, a burst of logins runs one check at a time, and the
// logins that could not get a slot are told to try again (503, Retry-After, the busy page),
// with nothing counted against the user: the same user signs in right after.
func TestLogin_PasswordChecksBoundedBusyAnswered(t *testing.T) {
	const logins = 8
	e := newEnv(t)
	h := &slowHasher{PasswordHasher: cheapHasher, delay: 300 * time.Millisecond}
	e.withAuthn(func(d *authn.Deps) {
		d.Passwords = h
		d.Hashing = authn.NewHashGate(1, 100*time.Millisecond)
	})
	browsers := make([]*browser, logins)
	for i := range browsers {
		browsers[i] = newBrowser(t)
		browsers[i].open(e.authorizeURL(nil))
	}
	resps := make([]*http.Response, logins)
	var wg sync.WaitGroup
	for i, b := range browsers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resps[i] = b.login(e, username, "a-wrong-password")
		}()
	}
	wg.Wait()
	if p := h.peak.Load(); p > 1 {
		t.Errorf("%d password checks ran at once, limit 1", p)
	}
	busy := 0
	for i, resp := range resps {
		switch resp.StatusCode {
		case http.StatusServiceUnavailable:
			busy++
			if resp.Header.Get("Retry-After") == "" {
				t.Errorf("login %d: 503 without Retry-After", i)
			}
			if !strings.Contains(browsers[i].last, "Too many people are signing in") {
				t.Errorf("login %d: the busy answer does not ask to try again: %.300s", i, browsers[i].last)
			}
		case http.StatusOK:
		default:
			t.Errorf("login %d answered %d", i, resp.StatusCode)
		}
	}
	if busy == 0 {
		t.Fatalf("none of %d logins at once was answered busy with one check allowed", logins)
	}
	t.Logf("%d of %d logins answered busy", busy, logins)
	// Busy attempts were not counted: the user is below the limit (5) and signs in.
	b := newBrowser(t)
	e.loginAttempt(t, b, username, password)
	if !onConsent(b) {
		t.Fatalf("the user could not sign in after the burst: %.300s", b.last)
	}
}

// TestHashConcurrency_SizedFromCPUsAndMemory: one check per CPU, within half the memory limit.
func TestHashConcurrency_SizedFromCPUsAndMemory(t *testing.T) {
	for _, c := range []struct {
		cpus     int
		kib      uint32
		memLimit int64
		want     int
	}{
		{cpus: 8, kib: 19 * 1024, memLimit: 0, want: 8},         // memory unknown: the CPUs
		{cpus: 8, kib: 19 * 1024, memLimit: 128 << 20, want: 3}, // a 128 MB Lambda: 64 MB / 19 MiB
		{cpus: 2, kib: 19 * 1024, memLimit: 24 << 30, want: 2},  // plenty of memory: the CPUs
		{cpus: 4, kib: 19 * 1024, memLimit: 16 << 20, want: 1},  // never less than one
		{cpus: 0, kib: 19 * 1024, memLimit: 1 << 30, want: 1},
	} {
		if got := authn.HashConcurrency(c.cpus, c.kib, c.memLimit); got != c.want {
			t.Errorf("HashConcurrency(%d CPUs, %d KiB, %d) = %d, want %d", c.cpus, c.kib, c.memLimit, got, c.want)
		}
	}
}
