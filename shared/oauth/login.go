package oauth

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
)

// ErrLoginFailed is the one answer to every failed login: unknown user, wrong password,
// disabled user, or too many failures. The page shows one generic message for all.
var ErrLoginFailed = errors.New("login failed")

// dummyHashes holds, per hasher configuration, the hash verified for unknown usernames (and
// refused attempts), so that they cost as much as a known user's: made with the service's own
// parameters, since a hash of other parameters would take another time and tell them apart.
var dummyHashes sync.Map // PasswordHasher → string

func (s *Service) dummyHash() string {
	if h, ok := dummyHashes.Load(s.Passwords); ok {
		return h.(string)
	}
	h, _ := dummyHashes.LoadOrStore(s.Passwords, s.Passwords.Hash("not a password"))
	return h.(string)
}

// failureKey is the counter key of a username or address. It is hashed: people type their
// password into the username field, and a counter must not keep it in the store.
func failureKey(kind, value string) string { return kind + ":" + HashToken(value) }

// NormalizeUsername is how usernames are compared: trimmed and case-folded.
func NormalizeUsername(u string) string { return strings.ToLower(strings.TrimSpace(u)) }

// Login checks a username and password, with brute-force protection: failures are counted per
// username and per client IP in windows that expire; past the threshold the login is refused
// whatever the password. On success it opens a new session (a new id each login: no fixation)
// and returns it with the cookie value to set.
func (s *Service) Login(ctx context.Context, username, password, clientIP string) (*User, *Session, string, error) {
	username = NormalizeUsername(username)
	if username == "" || password == "" || len(username) > 256 || len(password) > 1024 {
		return nil, nil, "", ErrLoginFailed
	}
	now := s.now()
	userKey, ipKey := failureKey("user", username), failureKey("ip", clientIP)
	userFailures := 0
	if s.LoginPolicy.MaxFailures > 0 {
		n, err := s.Interactions.Failures(ctx, userKey, now)
		if err != nil {
			return nil, nil, "", AsError(err)
		}
		m := 0
		if clientIP != "" {
			if m, err = s.Interactions.Failures(ctx, ipKey, now); err != nil {
				return nil, nil, "", AsError(err)
			}
		}
		userFailures = n
		if n >= s.LoginPolicy.MaxFailures || m >= 4*s.LoginPolicy.MaxFailures {
			s.Passwords.Verify(password, s.dummyHash()) // same time as a real attempt
			s.Log.LogAttrs(ctx, slog.LevelWarn, "audit", slog.String("event", "login_locked"), slog.String("ip", clientIP))
			return nil, nil, "", ErrLoginFailed
		}
	}
	u, err := s.Users.GetUserByUsername(ctx, username)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, nil, "", AsError(err)
	}
	hash := u.PasswordHash
	if err != nil {
		hash = s.dummyHash()
	}
	ok, verr := s.Passwords.Verify(password, hash)
	if err != nil || verr != nil || !ok || u.Disabled {
		if s.LoginPolicy.MaxFailures > 0 {
			if _, cerr := s.Interactions.CountFailure(ctx, userKey, s.LoginPolicy.Window, now); cerr != nil {
				return nil, nil, "", AsError(cerr)
			}
			if clientIP != "" {
				if _, cerr := s.Interactions.CountFailure(ctx, ipKey, s.LoginPolicy.Window, now); cerr != nil {
					return nil, nil, "", AsError(cerr)
				}
			}
		}
		s.Log.LogAttrs(ctx, slog.LevelInfo, "audit", slog.String("event", "login_failed"), slog.String("ip", clientIP))
		return nil, nil, "", ErrLoginFailed
	}
	if userFailures > 0 { // a write only when there is something to forget
		if err := s.Interactions.ResetFailures(ctx, userKey); err != nil {
			return nil, nil, "", AsError(err)
		}
	}
	token := NewSecret(PrefixSession)
	sess := &Session{Hash: HashToken(token), UID: u.UID, AuthTime: now, ExpiresAt: now.Add(s.Lifetimes.Session)}
	if err := s.Interactions.PutSession(ctx, *sess); err != nil {
		return nil, nil, "", AsError(err)
	}
	s.Log.LogAttrs(ctx, slog.LevelInfo, "audit", slog.String("event", "login_succeeded"), slog.String("uid", u.UID))
	return &u, sess, token, nil
}

// SessionUser returns the session a cookie names and its user, or nil when there is no valid
// session (unknown, expired, or the user was disabled or deleted since).
func (s *Service) SessionUser(ctx context.Context, cookie string) (*Session, *User, error) {
	if cookie == "" || len(cookie) > 200 {
		return nil, nil, nil
	}
	sess, err := s.Interactions.GetSession(ctx, HashToken(cookie), s.now())
	if errors.Is(err, ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, AsError(err)
	}
	u, err := s.Users.GetUser(ctx, sess.UID)
	if errors.Is(err, ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, AsError(err)
	}
	if u.Disabled {
		return nil, nil, nil
	}
	return &sess, &u, nil
}

// Logout ends a session.
func (s *Service) Logout(ctx context.Context, cookie string) error {
	if cookie == "" {
		return nil
	}
	return s.Interactions.DeleteSession(ctx, HashToken(cookie))
}
