package oauth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// The stack-built hashes and encodings give exactly what the plain library calls give, for
// every length (below, at and above the stack buffer).
func TestHashToken_SameAsSHA256Base64URL(t *testing.T) {
	for _, n := range []int{0, 1, 31, 32, 33, 46, 255, 256, 257, 4096} {
		s := strings.Repeat("x", n)
		sum := sha256.Sum256([]byte(s))
		want := base64.RawURLEncoding.EncodeToString(sum[:])
		if got := HashToken(s); got != want {
			t.Fatalf("HashToken(len %d) = %q, want %q", n, got, want)
		}
		if got := HashSecret(s); got != want {
			t.Fatalf("HashSecret(len %d) = %q, want %q", n, got, want)
		}
		if got := S256(s); got != want {
			t.Fatalf("S256(len %d) = %q, want %q", n, got, want)
		}
		// The access token's store hash and at_hash come from one SHA-256 (OIDC Core 3.1.3.6).
		if hash, at := accessTokenHashes(s); hash != want || at != base64.RawURLEncoding.EncodeToString(sum[:16]) {
			t.Fatalf("accessTokenHashes(len %d) = %q, %q, want %q, %q", n, hash, at, want, base64.RawURLEncoding.EncodeToString(sum[:16]))
		}
	}
}

func TestNewSecret_PrefixAndEncodedBits(t *testing.T) {
	for _, c := range []struct {
		name   string
		make   func(string) string
		prefix string
		bytes  int
	}{
		{"secret", NewSecret, PrefixAccess, 32},
		{"secret_long_prefix", NewSecret, PrefixSecret, 32},
		{"id", NewID, PrefixGrant, 16},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := c.make(c.prefix), c.make(c.prefix)
			if a == b {
				t.Fatal("two secrets are equal")
			}
			rest, ok := strings.CutPrefix(a, c.prefix)
			if !ok {
				t.Fatalf("%q lacks prefix %q", a, c.prefix)
			}
			raw, err := base64.RawURLEncoding.DecodeString(rest)
			if err != nil || len(raw) != c.bytes {
				t.Fatalf("%q: %d bytes, %v", a, len(raw), err)
			}
		})
	}
}

// constantEqual and constantTimeCompareString agree with subtle.ConstantTimeCompare.
func TestConstantEqual_AgreesWithSubtle(t *testing.T) {
	for _, c := range [][2]string{{"", ""}, {"a", ""}, {"", "a"}, {"abc", "abc"}, {"abc", "abd"}, {"abc", "abcd"}, {"xbc", "abc"},
		{HashSecret("s"), HashSecret("s")}, {HashSecret("s"), HashSecret("t")}} {
		want := subtle.ConstantTimeCompare([]byte(c[0]), []byte(c[1]))
		if got := constantEqual(c[0], c[1]); got != (want == 1) {
			t.Fatalf("constantEqual(%q, %q) = %v", c[0], c[1], got)
		}
		if got := constantTimeCompareString([]byte(c[0]), c[1]); got != want {
			t.Fatalf("constantTimeCompareString(%q, %q) = %d", c[0], c[1], got)
		}
	}
}

func TestVerifySecret_CurrentAndGraceSecrets(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := Client{SecretHashes: []SecretHash{{Hash: HashSecret("new")}, {Hash: HashSecret("old"), ExpiresAt: now.Add(time.Hour)},
		{Hash: HashSecret("gone"), ExpiresAt: now}}}
	for _, tc := range []struct {
		secret string
		want   bool
	}{{"new", true}, {"old", true}, {"gone", false}, {"", false}, {"other", false}, {HashSecret("new"), false}} {
		if got := c.VerifySecret(tc.secret, now); got != tc.want {
			t.Errorf("VerifySecret(%q) = %v, want %v", tc.secret, got, tc.want)
		}
	}
}
