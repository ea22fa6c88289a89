// Package admin is what the operator's tool (cmd/authctl) does, apart from its command line:
// register and manage clients and users, list and revoke grants. It works on the store port
// alone, so it runs against the embedded store and DynamoDB alike, and tests call it directly.
//
// It is deliberately thin: validation rules come from the domain and the seed loader
// (oauth.IsKnownScope, seed.ValidateRedirectURI, seed.Load), revocation goes through
// oauth.Service.RevokeGrantByOperator so it is audited like every other revocation. Every change
// an operator makes is audited too (event operator_action), with who (Actor) and what (the
// client_id or uid).
//
// Disabling or deleting a client or a user revokes every live grant of it, so its access and
// refresh tokens fail at once: a bearer token is validated by one read of its token record,
// which the grant's revocation deletes. The disabled flag itself stops new logins (users) and
// new client authentications (clients; a running server may serve a cached client for up to
// AUTH_CLIENT_CACHE_TTL).
package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/oauth"
)

// Service runs the operator's actions over a store.
type Service struct {
	Store oauth.Store
	Clock oauth.Clock
	// Passwords hashes new passwords; it should be the server's hasher (same argon2id cost).
	Passwords authn.PasswordHasher
	// Log receives the audit events of the operator's actions and revocations (ids only); it
	// should be the audit sink, written whatever the service's log level. nil discards them.
	Log *slog.Logger
	// Actor names the operator in every audit record (the OS user, or authctl --actor).
	Actor string
	// Sleep waits d or until ctx ends (Resweep); nil is a real wait. Tests replace it.
	Sleep func(ctx context.Context, d time.Duration) error
	// IDTokenAlgs are the id_token algorithms the deployment keeps keys for
	// (AUTH_ID_TOKEN_ALGS); a client may register only one of them. nil is keys.Algs.
	IDTokenAlgs []string
	// JWKS fetches a client's jwks_uri when it is registered (boot.JWKSFetcher); nil refuses
	// every jwks_uri.
	JWKS oauth.JWKSFetcher
}

// New returns a Service with the wall clock and a discarding log where none is given.
func New(store oauth.Store, passwords authn.PasswordHasher, clock oauth.Clock, log *slog.Logger) *Service {
	if clock == nil {
		clock = oauth.SystemClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{Store: store, Clock: clock, Passwords: passwords, Log: log}
}

// ErrInvalid marks input the operator must correct (a bad redirect URI, an unknown scope, a
// short password): errors.Is(err, ErrInvalid) tells it from a store failure.
var ErrInvalid = errors.New("invalid input")

// inputError is an ErrInvalid with its own message, so the operator reads what is wrong and
// not the sentinel's text.
type inputError struct{ msg string }

func (e *inputError) Error() string        { return e.msg }
func (e *inputError) Is(target error) bool { return target == ErrInvalid }

func invalid(format string, args ...any) error {
	return &inputError{msg: fmt.Sprintf(format, args...)}
}

// now is the service's clock reading; a zero Service uses the wall clock.
func (s *Service) now() time.Time {
	if s.Clock == nil {
		return time.Now()
	}
	return s.Clock.Now()
}

// revoker is the domain service reduced to what an operator's revocation needs, so revocations
// are audited the same way wherever they come from.
func (s *Service) revoker() *oauth.Service {
	log := s.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	clock := s.Clock
	if clock == nil {
		clock = oauth.SystemClock{}
	}
	return &oauth.Service{Grants: s.Store, Clock: clock, Log: log, Audit: log}
}

// operatorCtx carries the operator's name to the audit records of what ctx does.
func (s *Service) operatorCtx(ctx context.Context) context.Context {
	return oauth.WithAuditInfo(ctx, oauth.AuditInfo{Actor: s.Actor})
}

// audit records one operator action that succeeded: who (Actor) did what (action) to which
// client or user, in the fields of the service's audit records.
func (s *Service) audit(ctx context.Context, action, clientID, uid string) {
	if s.Log == nil {
		return
	}
	s.Log.LogAttrs(ctx, slog.LevelInfo, "audit", slog.String("event", "operator_action"), slog.String("client_id", clientID),
		slog.String("uid", uid), slog.String("grant_id", ""), slog.String("ip", ""), slog.String("reason", ""),
		slog.String("actor", s.Actor), slog.String("action", action))
}
