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
	PrefixSID      = "sid_"
)

// NewSecret returns prefix followed by 256 random bits, base64url-encoded.
func NewSecret(prefix string) string {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// NewID returns prefix followed by 128 random bits: identifiers that are not secrets.
func NewID(prefix string) string {
	var b [16]byte
	rand.Read(b[:])
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// HashToken is how a store keys a code, token or session: base64url SHA-256 of the whole
// string. Stores never see the secret itself.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}
