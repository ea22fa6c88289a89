package oauth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
)

// constantEqual compares two secrets or hashes in constant time (the time depends on their
// lengths only, as with subtle.ConstantTimeCompare).
func constantEqual(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	var v byte
	for i := 0; i < len(a); i++ {
		v |= a[i] ^ b[i]
	}
	return subtle.ConstantTimeByteEq(v, 0) == 1
}

// constantTimeCompareString is subtle.ConstantTimeCompare of a byte slice and a string, without
// converting the string: 1 when they are equal, 0 otherwise.
func constantTimeCompareString(a []byte, b string) int {
	if len(a) != len(b) {
		return 0
	}
	var v byte
	for i := 0; i < len(a); i++ {
		v |= a[i] ^ b[i]
	}
	return subtle.ConstantTimeByteEq(v, 0)
}

// S256 is the PKCE S256 transform of a code verifier (RFC 7636 4.2).
func S256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// validPKCEValue reports whether s is 43-128 characters of [A-Z a-z 0-9 - . _ ~]
// (RFC 7636 4.1 for verifiers; the same alphabet and length hold for S256 challenges).
func validPKCEValue(s string) bool {
	if len(s) < 43 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '.', c == '_', c == '~':
		default:
			return false
		}
	}
	return true
}
