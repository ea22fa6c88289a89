package oauth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
)

// Prefixes of the opaque secrets the service hands out, so that a leaked one is recognisable
// (by people and by secret scanners) and one kind is never taken for another.
const (
	PrefixCode     = "ac_"
	PrefixAccess   = "at_"
	PrefixRefresh  = "rt_"
	PrefixSession  = "ss_"
	PrefixCSRF     = "cs_"
	PrefixSecret   = "cs1_"
	PrefixRequest  = "ar_"
	PrefixGrant    = "gr_"
	PrefixClientID = "cl_"
)

// NewSecret returns prefix followed by 256 random bits, base64url-encoded.
func NewSecret(prefix string) string {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return encodeB64(prefix, b[:])
}

// NewID returns prefix followed by 128 random bits: identifiers that are not secrets.
func NewID(prefix string) string {
	var b [16]byte
	rand.Read(b[:])
	return encodeB64(prefix, b[:])
}

// HashToken is how a store keys a code, token or session: base64url SHA-256 of the whole
// string. Stores never see the secret itself.
func HashToken(token string) string {
	sum := sha256String(token)
	return encodeB64("", sum[:])
}

// encodeB64 returns prefix followed by raw in unpadded base64url, built on the stack so that
// the result is the only allocation (these run several times per token request).
func encodeB64(prefix string, raw []byte) string {
	var buf [96]byte
	b := append(buf[:0], prefix...)
	return string(base64.RawURLEncoding.AppendEncode(b, raw))
}

// sha256String is the SHA-256 of s without converting s to a heap-allocated []byte: tokens and
// secrets up to 256 bytes (all of ours) are copied to the stack first.
func sha256String(s string) [sha256.Size]byte {
	var buf [256]byte
	if len(s) <= len(buf) {
		n := copy(buf[:], s)
		return sha256.Sum256(buf[:n])
	}
	return sha256.Sum256([]byte(s))
}
