// Package keypolicy holds the rule of the signing keys' lifecycle: the id_token algorithms and
// the timing a rotation must keep (Policy, Validate). It is a leaf (the standard library only) so
// that both sides can share one rule with the dependency going one way: shared/config validates
// the settings with it at load (config.Config.KeyPolicy), and shared/keys, which re-exports these
// names, rotates and signs by it. Neither config nor keypolicy imports shared/keys; keys and its
// backends may import config.
package keypolicy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The JWS algorithms the service signs id_tokens with (RFC 7518 3.1). A client chooses one at
// registration (id_token_signed_response_alg); every algorithm has keys of its own.
const (
	// RS256 is RSASSA-PKCS1-v1_5 with SHA-256 over an RSA 2048 key: the OIDC default.
	RS256 = "RS256"
	// PS256 is RSASSA-PSS with SHA-256, MGF1 with SHA-256 and a 32-byte salt (RFC 7518 3.5)
	// over an RSA 2048 key of its own (never the RS256 one).
	PS256 = "PS256"
	// ES256 is ECDSA over P-256 with SHA-256; the signature is R||S, 64 bytes (RFC 7518 3.4).
	ES256 = "ES256"
)

// Algs are the supported algorithms, in the order the JWKS and discovery list them.
var Algs = []string{RS256, PS256, ES256}

// Supported reports whether alg is one of Algs.
func Supported(alg string) bool { return slices.Contains(Algs, alg) }

// ErrUnsupportedAlg is a CreateKey or Sign call with an algorithm outside Algs, or Sign with an
// algorithm the key's type cannot make (an ES256 signature with an RSA key).
var ErrUnsupportedAlg = errors.New("unsupported signing algorithm")

// DefaultSignerCacheTTL is how long a Signer keeps using the current key it last read from the
// registry. A promotion reaches every signer within this time, so Policy.Margin must be at
// least this long.
const DefaultSignerCacheTTL = 60 * time.Second

// Default timing of the key lifecycle. Each is a zero-value default of Policy.
const (
	// DefaultRotationPeriod is how long a key signs before its successor takes over.
	DefaultRotationPeriod = 30 * 24 * time.Hour
	// DefaultJWKSCacheTTL is the JWKS's Cache-Control max-age: how long a verifier may keep a
	// key set it fetched.
	DefaultJWKSCacheTTL = time.Hour
	// DefaultIDTokenTTL is the lifetime of an id_token (its exp minus its iat).
	DefaultIDTokenTTL = time.Hour
	// DefaultClockSkew is how far a verifier's clock may run behind ours and still accept a
	// token (exp leeway).
	DefaultClockSkew = 5 * time.Minute
	// DefaultMargin covers what the other durations do not: the Signer's current-key cache
	// (DefaultSignerCacheTTL), a server-side or CDN cache in front of the JWKS endpoint, and
	// clock differences between our own functions.
	DefaultMargin = 15 * time.Minute
)

// Policy is the timing of the key lifecycle (DESIGN.md decision 6). Zero fields take the
// defaults above.
//
//   - A next key is published for at least JWKSCacheTTL + Margin before it becomes current, so
//     every verifier's cached key set holds it before the first token it signs. The JWKS
//     endpoint itself serves a registry up to CacheTTL old, so a verifier may fetch the key set
//     without the new key up to CacheTTL after it was published, and keep that set for
//     JWKSCacheTTL: Margin must be at least CacheTTL (Validate).
//   - The current key signs for RotationPeriod, then the oldest eligible next key replaces it.
//   - A retired key stays published for IDTokenTTL + ClockSkew + JWKSCacheTTL + Margin after it
//     stopped signing, so every token it signed expires (with the verifiers' leeway) while
//     its key is still served; then it is deleted from the JWKS and its private key is
//     scheduled for deletion.
type Policy struct {
	RotationPeriod time.Duration
	JWKSCacheTTL   time.Duration
	IDTokenTTL     time.Duration
	ClockSkew      time.Duration
	Margin         time.Duration
	// CacheTTL is how long the JWKS endpoint and a Signer keep using the registry they read
	// (AUTH_KEY_CACHE_TTL; DefaultSignerCacheTTL when zero).
	CacheTTL time.Duration
	// Algs are the algorithms the rotation keeps keys for (AUTH_ID_TOKEN_ALGS; every one of
	// Algs when empty). Each has its own keys on the timings above.
	Algs []string
}

// ErrUnpublishedSigner is the Validate error of a policy under which a key could sign (or
// keep signing) while some cache can still miss it: the margin is shorter than CacheTTL.
var ErrUnpublishedSigner = errors.New("a key could sign before every JWKS cache can have seen it published")

// DefaultPolicy returns the defaults spelled out.
func DefaultPolicy() Policy { return Policy{}.WithDefaults() }

// WithDefaults returns p with every zero field set to its default.
func (p Policy) WithDefaults() Policy {
	set := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	set(&p.RotationPeriod, DefaultRotationPeriod)
	set(&p.JWKSCacheTTL, DefaultJWKSCacheTTL)
	set(&p.IDTokenTTL, DefaultIDTokenTTL)
	set(&p.ClockSkew, DefaultClockSkew)
	set(&p.Margin, DefaultMargin)
	set(&p.CacheTTL, DefaultSignerCacheTTL)
	if len(p.Algs) == 0 {
		p.Algs = slices.Clone(Algs)
	}
	return p
}

// Validate rejects a policy under which rotation could break a verifier: negative durations, or
// a margin shorter than the registry cache (ErrUnpublishedSigner: the JWKS endpoint could hand
// out a key set without the next key so late that a verifier still holds it when that key
// signs; and a Signer could sign with a key retired longer ago than the rules allow for).
func (p Policy) Validate() error {
	p = p.WithDefaults()
	var errs []error
	for name, d := range map[string]time.Duration{"rotation period": p.RotationPeriod, "JWKS cache lifetime": p.JWKSCacheTTL,
		"id_token lifetime": p.IDTokenTTL, "clock skew": p.ClockSkew, "margin": p.Margin, "registry cache lifetime": p.CacheTTL} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("key policy: negative %s %v", name, d))
		}
	}
	for i, alg := range p.Algs {
		if !Supported(alg) {
			errs = append(errs, fmt.Errorf("key policy: %w %q: want one of %s", ErrUnsupportedAlg, alg, strings.Join(Algs, ", ")))
		} else if slices.Contains(p.Algs[:i], alg) {
			errs = append(errs, fmt.Errorf("key policy: algorithm %s listed twice", alg))
		}
	}
	if p.Margin < p.CacheTTL {
		errs = append(errs, fmt.Errorf("key policy: margin %v is shorter than the registry cache lifetime %v: %w", p.Margin, p.CacheTTL, ErrUnpublishedSigner))
	}
	return errors.Join(errs...)
}

// PublishLead is how long a next key must have been published before it may sign.
func (p Policy) PublishLead() time.Duration {
	p = p.WithDefaults()
	return p.JWKSCacheTTL + p.Margin
}

// RetiredHold is how long a retired key stays published after it stopped signing.
func (p Policy) RetiredHold() time.Duration {
	p = p.WithDefaults()
	return p.IDTokenTTL + p.ClockSkew + p.JWKSCacheTTL + p.Margin
}
