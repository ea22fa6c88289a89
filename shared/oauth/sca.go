package oauth

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// SCAPolicy says when a sign-in must be strong (two factors) before the consent page.
type SCAPolicy struct {
	// Always requires strong authentication for every sign-in.
	Always bool
	// Scopes require it when requested (by default the payment scope, both spellings).
	Scopes []string
	// Every, when set, requires it of any sign-in whose user has not completed strong
	// authentication within this long (PSD2 RTS art. 10: 180 days for account information).
	Every time.Duration
}

// DefaultSCAScopes are the scopes that require strong authentication by default: payments.
var DefaultSCAScopes = []string{ScopeTransfersWrite, ScopeTransfersWriteDotted}

// ParseSCAPolicy reads AUTH_SCA_POLICY: "payments" (the default: the scopes of
// DefaultSCAScopes), "always", or a duration ("180d") for payments plus any sign-in whose
// last strong authentication is older than that.
func ParseSCAPolicy(v string, parseDuration func(string) (time.Duration, error)) (SCAPolicy, error) {
	p := SCAPolicy{Scopes: DefaultSCAScopes}
	switch v = strings.TrimSpace(v); v {
	case "", "payments":
		return p, nil
	case "always":
		p.Always = true
		return p, nil
	}
	d, err := parseDuration(v)
	if err != nil || d <= 0 {
		return SCAPolicy{}, fmt.Errorf("want payments, always or a positive duration such as 180d, got %q", v)
	}
	p.Every = d
	return p, nil
}

// NeedsStrongAuth reports whether the request must be answered by a strong sign-in that the
// session does not hold yet: the policy says so for every sign-in, the request asks for a
// scope that requires it or for acr ACRStrong, or the user's last strong authentication is
// older than the policy allows. A session is strong from its second factor until the operator
// removes or resets one of the user's factors (UserFactors.RemovedAt).
func (s *Service) NeedsStrongAuth(req *AuthRequest, sess *Session, f UserFactors) bool {
	if sess != nil && AMRStrong(sess.AMR) && sess.AuthTime.After(f.RemovedAt) {
		return false
	}
	p := s.SCA
	switch {
	case p.Always, slices.Contains(strings.Fields(req.ACRValues), ACRStrong):
		return true
	case slices.ContainsFunc(p.Scopes, req.Scopes.Has):
		return true
	case p.Every > 0:
		return f.LastStrongAuth.IsZero() || s.now().Sub(f.LastStrongAuth) > p.Every
	}
	return false
}

// StepUp records methods (a second factor just checked) in the session: its amr, and its
// auth_time, which is the time the sign-in was completed.
func (s *Service) StepUp(ctx context.Context, sess *Session, methods ...string) error {
	sess.AMR = addAMR(sess.AMR, methods...)
	sess.AuthTime = s.now()
	if err := s.Interactions.PutSession(ctx, *sess); err != nil {
		return AsError(err)
	}
	return nil
}

// StartSession opens a new session for u, signed in with methods (a passkey sign-in), and
// returns it with the cookie value to set.
func (s *Service) StartSession(ctx context.Context, u *User, methods ...string) (*Session, string, error) {
	now := s.now()
	token := NewSecret(PrefixSession)
	sess := &Session{Hash: HashToken(token), UID: u.UID, AuthTime: now, ExpiresAt: now.Add(s.Lifetimes.Session), AMR: addAMR(nil, methods...)}
	if err := s.Interactions.PutSession(ctx, *sess); err != nil {
		return nil, "", AsError(err)
	}
	return sess, token, nil
}
