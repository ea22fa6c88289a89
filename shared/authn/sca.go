package authn

import (
	"context"
	"slices"
	"strings"

	"github.com/acmebank/authserver/shared/oauth"
)

// NeedsStrongAuth reports whether the request must be answered by a strong sign-in that the
// session does not hold yet: the policy says so for every sign-in, the request asks for a
// scope that requires it or for acr ACRStrong, or the user's last strong authentication is
// older than the policy allows. A session is strong from its second factor until the operator
// removes or resets one of the user's factors (UserFactors.RemovedAt).
func (s *Service) NeedsStrongAuth(req *oauth.AuthRequest, sess *oauth.Session, f oauth.UserFactors) bool {
	if sess != nil && oauth.AMRStrong(sess.AMR) && sess.AuthTime.After(f.RemovedAt) {
		return false
	}
	p := s.sca
	switch {
	case p.Always, slices.Contains(strings.Fields(req.ACRValues), oauth.ACRStrong):
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
func (s *Service) StepUp(ctx context.Context, sess *oauth.Session, methods ...string) error {
	sess.AMR = addAMR(sess.AMR, methods...)
	sess.AuthTime = s.now()
	if err := s.interactions.PutSession(ctx, *sess); err != nil {
		return oauth.AsError(err)
	}
	return nil
}

// StartSession opens a new session for u, signed in with methods (a passkey sign-in), and
// returns it with the cookie value to set.
func (s *Service) StartSession(ctx context.Context, u *oauth.User, methods ...string) (*oauth.Session, string, error) {
	now := s.now()
	token := oauth.NewSecret(oauth.PrefixSession)
	sess := &oauth.Session{Hash: oauth.HashToken(token), SID: oauth.NewID(oauth.PrefixSID), UID: u.UID, AuthTime: now, ExpiresAt: now.Add(s.sessionLifetime), AMR: addAMR(nil, methods...)}
	if err := s.interactions.PutSession(ctx, *sess); err != nil {
		return nil, "", oauth.AsError(err)
	}
	return sess, token, nil
}
