package authn

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/crypto/argon2"
)

// Hasher is what the service asks of a password hasher; PasswordHasher (argon2id) is the one
// deployments use, and tests wrap it to count the verifications a login runs.
type Hasher interface {
	Hash(password string) string
	Verify(password, encoded string) (bool, error)
}

// PasswordHasher hashes and verifies passwords with argon2id, storing the parameters in the
// PHC string so that a cost change applies to new hashes and old ones still verify.
type PasswordHasher struct {
	Time      uint32 // iterations
	MemoryKiB uint32
	Threads   uint8
}

// DefaultPasswordHasher follows OWASP's argon2id baseline (m=19 MiB, t=2, p=1).
var DefaultPasswordHasher = PasswordHasher{Time: 2, MemoryKiB: 19 * 1024, Threads: 1}

// Hash returns the PHC string of password: $argon2id$v=19$m=...,t=...,p=...$salt$hash.
func (h PasswordHasher) Hash(password string) string {
	salt := make([]byte, 16)
	rand.Read(salt)
	threads := max(h.Threads, 1)
	key := argon2.IDKey([]byte(password), salt, h.Time, h.MemoryKiB, threads, 32)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, h.MemoryKiB, h.Time, threads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key))
}

var errBadHash = errors.New("malformed argon2id hash")

// Verify reports whether password matches the PHC string encoded, in constant time.
func (h PasswordHasher) Verify(password, encoded string) (bool, error) {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false, errBadHash
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false, errBadHash
	}
	var m, t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil || m == 0 || t == 0 || p == 0 {
		return false, errBadHash
	}
	salt, err := base64.RawStdEncoding.DecodeString(parts[4])
	if err != nil {
		return false, errBadHash
	}
	want, err := base64.RawStdEncoding.DecodeString(parts[5])
	if err != nil || len(want) == 0 {
		return false, errBadHash
	}
	got := argon2.IDKey([]byte(password), salt, t, m, p, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// ErrBusy is a password check that found every slot of the HashGate taken for the whole wait:
// the service is saturated with logins, nothing was counted or changed, and the caller may
// retry in a moment (the login page says so; an API caller gets 503 with Retry-After).
var ErrBusy = errors.New("too many password checks at once")

// HashGate bounds the password checks (argon2id: MemoryKiB of memory each, and a CPU for their
// duration) that one process runs at once, so a burst of logins queues instead of taking the
// process's memory. Every check goes through it, dummy ones too, so that a refused attempt
// still costs what a real one does.
type HashGate struct {
	slots chan struct{}
	wait  time.Duration
}

// DefaultHashWait is how long a login waits for a free slot before it is answered busy: long
// enough to absorb a burst, short enough that the user gets an answer instead of a hang.
const DefaultHashWait = 2 * time.Second

// NewHashGate allows n checks at once (at least one); a check waits at most wait for a slot.
func NewHashGate(n int, wait time.Duration) *HashGate {
	return &HashGate{slots: make(chan struct{}, max(n, 1)), wait: wait}
}

// HashConcurrency sizes a HashGate: one check per CPU (argon2id with p=1 keeps one core busy
// for its duration, so more at once only queues inside the scheduler while holding memory), and
// no more than half of memLimit (bytes; 0 or less: unknown) divided by one check's memory, so
// that the checks running at once fit beside the rest of the process. Never less than one.
func HashConcurrency(cpus int, memoryKiB uint32, memLimit int64) int {
	n := cpus
	if per := int64(memoryKiB) * 1024; memLimit > 0 && per > 0 {
		n = min(n, int(min(memLimit/2/per, int64(n))))
	}
	return max(n, 1)
}

// Limit reports how many checks may run at once.
func (g *HashGate) Limit() int { return cap(g.slots) }

// acquire takes a slot, waiting at most the gate's wait (or until ctx ends): ErrBusy then. The
// returned function gives the slot back. A nil gate does not bound anything.
func (g *HashGate) acquire(ctx context.Context) (func(), error) {
	if g == nil {
		return func() {}, nil
	}
	release := func() { <-g.slots }
	select {
	case g.slots <- struct{}{}:
		return release, nil
	default:
	}
	timer := time.NewTimer(g.wait)
	defer timer.Stop()
	select {
	case g.slots <- struct{}{}:
		return release, nil
	case <-timer.C:
		return nil, ErrBusy
	case <-ctx.Done():
		return nil, ErrBusy
	}
}
