package authn

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// ErrLoginFailed is the one answer to every failed login: unknown user, wrong password,
// disabled user, or too many failures. The page shows one generic message for all.
var ErrLoginFailed = errors.New("login failed")

// dummyHashes holds, per hasher configuration, the hash verified for unknown usernames (and
// refused attempts), so that they cost as much as a known user's: made with the service's own
// parameters, since a hash of other parameters would take another time and tell them apart.
var dummyHashes sync.Map // Hasher → string

func (s *Service) dummyHash() string {
	if h, ok := dummyHashes.Load(s.passwords); ok {
		return h.(string)
	}
	h, _ := dummyHashes.LoadOrStore(s.passwords, s.passwords.Hash("not a password"))
	return h.(string)
}

// failureKey is the counter key of a username or address. It is hashed: people type their
// password into the username field, and a counter must not keep it in the store.
func failureKey(kind, value string) string { return kind + ":" + oauth.HashToken(value) }

// NormalizeUsername is how usernames are compared: trimmed and case-folded.
func NormalizeUsername(u string) string { return strings.ToLower(strings.TrimSpace(u)) }

// CheckPassword checks a username and password, with brute-force protection: every attempt is
// counted per username and per client address before its password is verified, with the
// store's atomic counter, so N concurrent attempts are N distinct counts and at most
// MaxFailures of them (per username; 4x that per address) reach a password check in a window.
// Attempts past the limit get the same generic failure after the same work (a check against a
// dummy hash). A success resets the username's counter; the address counter keeps counting
// attempts, successful ones too, until its window ends. It opens no session: the sign-in
// (package signin) opens one once the request it answers is its own.
func (s *Service) CheckPassword(ctx context.Context, username, password, clientIP string) (*oauth.User, error) {
	username = NormalizeUsername(username)
	if username == "" || password == "" || len(username) > 256 || len(password) > 1024 {
		return nil, ErrLoginFailed
	}
	now := s.now()
	// The slot is taken before the attempt is counted: an attempt answered busy has cost the
	// user nothing of the limit, and changed nothing stored.
	release, err := s.hashing.acquire(ctx)
	if err != nil {
		s.auditLogin(ctx, "login_busy", "", clientIP, "password_checks_saturated")
		return nil, err
	}
	u, err := s.authenticate(ctx, username, password, clientIP, now)
	release()
	if err != nil {
		return nil, err
	}
	s.auditLogin(ctx, "login_succeeded", u.UID, clientIP, "")
	return u, nil
}

// authenticate counts the attempt, then checks the password of an attempt within the limits
// (a dummy hash's for one past them or an unknown username); it runs holding a HashGate slot.
func (s *Service) authenticate(ctx context.Context, username, password, clientIP string, now time.Time) (*oauth.User, error) {
	userKey := failureKey("user", username)
	if s.loginPolicy.MaxFailures > 0 {
		allowed, err := s.countAttempt(ctx, userKey, clientIP, now)
		if err != nil {
			return nil, err
		}
		if !allowed {
			s.passwords.Verify(password, s.dummyHash()) // same work as a real attempt
			s.auditLogin(ctx, "login_locked", "", clientIP, "too_many_attempts")
			return nil, ErrLoginFailed
		}
	}
	u, err := s.users.GetUserByUsername(ctx, username)
	if err != nil && !errors.Is(err, oauth.ErrNotFound) {
		return nil, oauth.AsError(err)
	}
	known := err == nil
	hash := u.PasswordHash
	if !known {
		hash = s.dummyHash()
	}
	ok, verr := s.passwords.Verify(password, hash)
	if !known || verr != nil || !ok || u.Disabled {
		reason := "bad_credentials"
		if known && ok && u.Disabled {
			reason = "user_disabled"
		}
		s.auditLogin(ctx, "login_failed", u.UID, clientIP, reason)
		return nil, ErrLoginFailed
	}
	if s.loginPolicy.MaxFailures > 0 {
		if err := s.interactions.ResetFailures(ctx, userKey); err != nil {
			return nil, oauth.AsError(err)
		}
		s.addressSucceeded(ctx, clientIP, now)
	}
	return &u, nil
}

// addressSucceeded counts a success on the address's counter of the window now falls in: an
// attempt countAttempt counted, which passed (see countAttempt). A failed write is logged: it
// only makes the address's limit stricter.
func (s *Service) addressSucceeded(ctx context.Context, clientIP string, now time.Time) {
	if clientIP == "" {
		return
	}
	_, successes := s.addressKeys(clientIP, now)
	if _, err := s.interactions.CountFailure(ctx, successes, s.loginPolicy.Window, now); err != nil {
		s.log.WarnContext(ctx, "count a sign-in success", slog.Any("cause", err))
	}
}

// countAttempt counts one login attempt on the username's and the address's counters and
// reports whether it is within both limits. The count comes before the password check and is
// the store's atomic increment (InteractionStore.CountFailure): reading the counter, verifying,
// then counting would let every attempt of a burst read the same low count.
//
// An address is allowed 4x MaxFailures failed or unfinished attempts per window: its attempts
// counter less its successes counter, both in the same fixed window (so that successes counted
// late in one window never discount the next), so that many people signing in from one address
// (a company's NAT, a load test) are not locked out by their own successes. The successes are
// read after the attempt is counted; a stale read is lower, which only makes the check stricter.
func (s *Service) countAttempt(ctx context.Context, userKey, clientIP string, now time.Time) (bool, error) {
	n, err := s.interactions.CountFailure(ctx, userKey, s.loginPolicy.Window, now)
	if err != nil {
		return false, oauth.AsError(err)
	}
	if n > s.loginPolicy.MaxFailures {
		return false, nil
	}
	if clientIP == "" {
		return true, nil
	}
	attempts, successes := s.addressKeys(clientIP, now)
	m, err := s.interactions.CountFailure(ctx, attempts, s.loginPolicy.Window, now)
	if err != nil {
		return false, oauth.AsError(err)
	}
	if m <= 4*s.loginPolicy.MaxFailures {
		return true, nil
	}
	ok, err := s.interactions.Failures(ctx, successes, now)
	if err != nil {
		return false, oauth.AsError(err)
	}
	return m-ok <= 4*s.loginPolicy.MaxFailures, nil
}

// addressKeys are the counter keys of an address's attempts and successes in the fixed window
// that now falls in.
func (s *Service) addressKeys(clientIP string, now time.Time) (attempts, successes string) {
	window := "@" + strconv.FormatInt(now.UnixNano()/max(int64(s.loginPolicy.Window), 1), 10)
	return failureKey("ip", clientIP) + window, failureKey("ip-ok", clientIP) + window
}

// auditLogin records a login event for the client the login is for (from the context) and the
// address it came from.
func (s *Service) auditLogin(ctx context.Context, event, uid, clientIP, reason string) {
	info := oauth.AuditInfoFrom(ctx)
	info.ClientIP = clientIP
	attrs := []slog.Attr{}
	if reason != "" {
		attrs = append(attrs, slog.String("reason", reason))
	}
	s.writeAudit(oauth.WithAuditInfo(ctx, info), event, &oauth.Grant{UID: uid}, attrs...)
}

// AuditSignIn records an event of the sign-in (package signin) for uid ("" when none is known
// yet), with the client and address of the context's AuditInfo.
func (s *Service) AuditSignIn(ctx context.Context, event, uid string, attrs ...slog.Attr) {
	s.writeAudit(ctx, event, &oauth.Grant{UID: uid}, attrs...)
}

// SessionUser returns the session a cookie names and its user, or nil when there is no valid
// session (unknown, expired, or the user was disabled or deleted since).
func (s *Service) SessionUser(ctx context.Context, cookie string) (*oauth.Session, *oauth.User, error) {
	if cookie == "" || len(cookie) > 200 {
		return nil, nil, nil
	}
	sess, err := s.interactions.GetSession(ctx, oauth.HashToken(cookie), s.now())
	if errors.Is(err, oauth.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, oauth.AsError(err)
	}
	u, err := s.users.GetUser(ctx, sess.UID)
	if errors.Is(err, oauth.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, oauth.AsError(err)
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
	return s.interactions.DeleteSession(ctx, oauth.HashToken(cookie))
}
