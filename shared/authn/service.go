// Package authn is the user's authentication on the sign-in pages: passwords and the login
// lockout, sessions, TOTP and recovery codes, passkeys (WebAuthn, through go-webauthn, which no
// other package links), and the strong customer authentication policy. The records it reads
// and writes (users, sessions, factors, counters) are the store ports of package oauth; the
// sign-in state machine (package signin) drives it. The token domain (package oauth) knows
// nothing of it, so the functions that serve no page link none of it.
package authn

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// Deps are what a Service is built from. Users, Interactions, Factors, Clock, Passwords, Log
// and a positive SessionLifetime are required; the others are optional, as each says.
type Deps struct {
	// Users are the users who sign in.
	Users oauth.UserStore
	// Interactions keep the sessions and the login-failure counters.
	Interactions oauth.InteractionStore
	// Factors keep the users' second factors.
	Factors oauth.FactorStore
	Clock   oauth.Clock
	// Passwords hashes and verifies passwords (PasswordHasher in deployments).
	Passwords Hasher
	// SessionLifetime is how long a session lasts from its sign-in (oauth.Lifetimes.Session).
	SessionLifetime time.Duration
	// Log receives the operational messages.
	Log *slog.Logger

	// Hashing bounds the password checks running at once (optional: nil is unbounded).
	Hashing *HashGate
	// LoginPolicy is the brute-force protection (optional: zero MaxFailures counts nothing).
	LoginPolicy LoginPolicy
	// Passkeys is the WebAuthn relying party (optional: nil turns passkeys off).
	Passkeys *Passkeys
	// SCA says when a sign-in must be strong (optional: the zero policy asks it only of
	// requests whose acr_values ask for it).
	SCA oauth.SCAPolicy
	// PaymentFactors are the factors that may authorize a payment (oauth.PaymentFactor*,
	// AUTH_PAYMENT_FACTORS; optional: nil is oauth.DefaultPaymentFactors, passkeys).
	PaymentFactors []string
	// Audit receives the security events (logins, factors), with ids only, never a password
	// or code (optional: nil sends them to Log).
	Audit *slog.Logger
}

// Service is the user's authentication. Build it with New.
type Service struct {
	users           oauth.UserStore
	interactions    oauth.InteractionStore
	factors         oauth.FactorStore
	clock           oauth.Clock
	passwords       Hasher
	sessionLifetime time.Duration
	log             *slog.Logger
	hashing         *HashGate
	loginPolicy     LoginPolicy
	passkeys        *Passkeys
	sca             oauth.SCAPolicy
	paymentFactors  []string
	audit           *slog.Logger
}

// LoginPolicy is the brute-force protection of the login page: after MaxFailures failures for
// a username (or 4x that from one client IP) within Window, further attempts are refused with
// the same generic message until the window ends.
type LoginPolicy struct {
	MaxFailures int
	Window      time.Duration
}

// New returns the Service of d, or an error naming every required dependency d lacks.
func New(d Deps) (*Service, error) {
	var missing []error
	need := func(ok bool, what string) {
		if !ok {
			missing = append(missing, errors.New("authn: missing "+what))
		}
	}
	need(d.Users != nil, "Users (the user store)")
	need(d.Interactions != nil, "Interactions (the session and counter store)")
	need(d.Factors != nil, "Factors (the factor store)")
	need(d.Clock != nil, "Clock")
	need(d.Passwords != nil, "Passwords (the password hasher)")
	need(d.SessionLifetime > 0, "SessionLifetime (a positive duration)")
	need(d.Log != nil, "Log")
	if err := errors.Join(missing...); err != nil {
		return nil, err
	}
	audit := d.Audit
	if audit == nil {
		audit = d.Log
	}
	payment := d.PaymentFactors
	if payment == nil {
		payment = oauth.DefaultPaymentFactors
	}
	return &Service{
		users: d.Users, interactions: d.Interactions, factors: d.Factors, clock: d.Clock,
		passwords: d.Passwords, sessionLifetime: d.SessionLifetime, log: d.Log, hashing: d.Hashing,
		loginPolicy: d.LoginPolicy, passkeys: d.Passkeys, sca: d.SCA, paymentFactors: payment, audit: audit,
	}, nil
}

func (s *Service) now() time.Time { return s.clock.Now() }

// PasskeysOn reports whether passkeys are on (the Service has a relying party).
func (s *Service) PasskeysOn() bool { return s.passkeys != nil }

// Factors returns the user's second factors (an empty set when none was ever written).
func (s *Service) Factors(ctx context.Context, uid string) (oauth.UserFactors, error) {
	return s.factors.Factors(ctx, uid)
}

// writeAudit records one security event in the audit format of every other (oauth.WriteAudit).
func (s *Service) writeAudit(ctx context.Context, event string, g *oauth.Grant, attrs ...slog.Attr) {
	oauth.WriteAudit(ctx, s.audit, event, g, attrs...)
}
