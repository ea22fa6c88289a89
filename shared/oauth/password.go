package oauth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

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
