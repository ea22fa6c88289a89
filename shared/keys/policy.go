package keys

import (
	"errors"
	"fmt"
	"time"
)

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
//     every verifier's cached key set holds it before the first token it signs.
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
}

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
	return p
}

// Validate rejects a policy under which rotation could break a verifier: negative durations, or
// a margin shorter than the Signer's cache (a signer could then sign with a key retired longer
// ago than the rules allow for).
func (p Policy) Validate() error {
	p = p.WithDefaults()
	var errs []error
	for name, d := range map[string]time.Duration{"rotation period": p.RotationPeriod, "JWKS cache lifetime": p.JWKSCacheTTL,
		"id_token lifetime": p.IDTokenTTL, "clock skew": p.ClockSkew, "margin": p.Margin} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("key policy: negative %s %v", name, d))
		}
	}
	if p.Margin > 0 && p.Margin < DefaultSignerCacheTTL {
		errs = append(errs, fmt.Errorf("key policy: margin %v is shorter than the signer cache %v", p.Margin, DefaultSignerCacheTTL))
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
