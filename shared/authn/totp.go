package authn

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base32"
	"errors"
	"fmt"
	"image/png"
	"log/slog"
	"strings"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/hotp"
	"github.com/pquerna/otp/totp"

	"github.com/acmebank/authserver/shared/oauth"
)

// TOTP (RFC 6238) as a second factor: 6 digits, 30-second steps, SHA-1 (what every
// authenticator app supports), a code accepted one step early or late, never twice.
const (
	TOTPPeriod        = 30 * time.Second
	totpSkew          = 1
	RecoveryCodeCount = 10
)

var totpOpts = hotp.ValidateOpts{Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1}

// ErrFactorFailed is every refused second-factor attempt: a wrong, replayed or expired code, a
// passkey that does not verify, too many attempts. The pages show one message for all of them.
var ErrFactorFailed = errors.New("second factor refused")

// ErrTOTPCodeUsed is a refused TOTP code that was right but whose time step was accepted
// already (a second sign-in within the same 30 seconds): the page asks the user to wait for
// the next code. It is an ErrFactorFailed, counted as a failed attempt like any other.
var ErrTOTPCodeUsed = fmt.Errorf("%w: the code of this time step was used already", ErrFactorFailed)

// ErrFactorExists refuses a first enrolment for a user who holds a second factor already: a
// factor is added by a user who passed one of theirs in the sign-in, and replaced or reset only
// by the operator (authctl). A set-up page opened before the user enrolled elsewhere gets it.
var ErrFactorExists = errors.New("the user holds a second factor already")

// TOTPEnrollment is what the enrolment page shows once: the secret (for typing), the
// otpauth:// URL, and its QR code as a PNG.
type TOTPEnrollment struct {
	Secret string
	URL    string
	QRCode []byte
}

// NewTOTP makes a secret for u's authenticator app (or, given secret, the one shown before),
// with the QR code of its otpauth URL (rendered by pquerna/otp with boombuler/barcode).
// Nothing is stored: the secret is kept in the pending request until the user proves with a
// code that the app holds it.
func (s *Service) NewTOTP(u *oauth.User, issuer, secret string) (TOTPEnrollment, error) {
	opts := totp.GenerateOpts{Issuer: issuer, AccountName: u.Username, Period: uint(TOTPPeriod / time.Second),
		Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1, Rand: rand.Reader}
	if secret != "" {
		raw, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(secret)
		if err != nil {
			return TOTPEnrollment{}, fmt.Errorf("totp: the pending secret: %w", err)
		}
		opts.Secret = raw
	}
	key, err := totp.Generate(opts)
	if err != nil {
		return TOTPEnrollment{}, fmt.Errorf("totp: %w", err)
	}
	img, err := key.Image(240, 240)
	if err != nil {
		return TOTPEnrollment{}, fmt.Errorf("totp QR code: %w", err)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return TOTPEnrollment{}, fmt.Errorf("totp QR code: %w", err)
	}
	return TOTPEnrollment{Secret: key.Secret(), URL: key.URL(), QRCode: b.Bytes()}, nil
}

// totpStep returns the time step whose code code is, within the skew around now, or -1.
func totpStep(secret, code string, now time.Time) int64 {
	code = strings.TrimSpace(code)
	if len(code) != 6 {
		return -1
	}
	cur := now.Unix() / int64(TOTPPeriod/time.Second)
	for _, step := range []int64{cur, cur - totpSkew, cur + totpSkew} {
		want, err := hotp.GenerateCodeCustom(secret, uint64(step), totpOpts)
		if err == nil && subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 {
			return step
		}
	}
	return -1
}

// EnrollTOTP stores the authenticator whose secret the user was shown, once code proves the
// app holds it, with RecoveryCodeCount new recovery codes, which are returned to be shown once
// (only their hashes are kept). It is a first enrolment only: a user who holds any second
// factor gets ErrFactorExists and nothing changes, checked inside the factor record's
// compare-and-swap, so a set-up page opened before the user enrolled elsewhere cannot replace
// what they set up. The enrolment is a strong authentication (password and the new possession
// factor).
func (s *Service) EnrollTOTP(ctx context.Context, uid, secret, code, clientIP string) ([]string, error) {
	now := s.now()
	if err := s.countFactorAttempt(ctx, uid, clientIP, now); err != nil {
		return nil, err
	}
	step := totpStep(secret, code, now)
	if step < 0 {
		s.auditLogin(ctx, "factor_failed", uid, clientIP, "totp_enrolment_code")
		return nil, ErrFactorFailed
	}
	codes := make([]string, RecoveryCodeCount)
	hashes := make([]string, RecoveryCodeCount)
	for i := range codes {
		codes[i] = newRecoveryCode()
		hashes[i] = oauth.HashToken(normalRecoveryCode(codes[i]))
	}
	err := s.updateFactors(ctx, uid, func(f oauth.UserFactors) (oauth.UserFactors, error) {
		if f.Any() {
			return f, ErrFactorExists
		}
		f.UID = uid
		f.Factors = []oauth.Factor{{ID: oauth.NewID("f_"), Kind: oauth.FactorTOTP, CreatedAt: now, LastUsedAt: now,
			Secret: secret, LastStep: step, RecoveryHashes: hashes}}
		f.LastStrongAuth = now
		return f, nil
	})
	if errors.Is(err, ErrFactorExists) {
		s.auditLogin(ctx, "factor_refused", uid, clientIP, "totp_enrolment_factor_exists")
		return nil, err
	}
	if err != nil {
		return nil, oauth.AsError(err)
	}
	s.resetFactorAttempts(ctx, uid)
	s.codeSucceeded(ctx, clientIP, now)
	s.auditLogin(ctx, "factor_enrolled", uid, clientIP, oauth.FactorTOTP)
	return codes, nil
}

// VerifyTOTP checks a code of the user's authenticator: counted against the attempt limit
// first, accepted within one step of now, and only for a step after the last one accepted
// (a code is never accepted twice; of racing requests with one code, one wins).
func (s *Service) VerifyTOTP(ctx context.Context, uid, code, clientIP string) error {
	now := s.now()
	if err := s.countFactorAttempt(ctx, uid, clientIP, now); err != nil {
		return err
	}
	err := s.updateFactors(ctx, uid, func(f oauth.UserFactors) (oauth.UserFactors, error) {
		for i, x := range f.Factors {
			if x.Kind != oauth.FactorTOTP {
				continue
			}
			step := totpStep(x.Secret, code, now)
			switch {
			case step < 0:
				return f, ErrFactorFailed
			case step <= x.LastStep:
				return f, ErrTOTPCodeUsed
			}
			f.Factors[i].LastStep, f.Factors[i].LastUsedAt = step, now
			f.LastStrongAuth = now
			return f, nil
		}
		return f, ErrFactorFailed
	})
	if err := s.factorResult(ctx, uid, clientIP, "totp", err); err != nil {
		return err
	}
	s.codeSucceeded(ctx, clientIP, now)
	return nil
}

// UseRecoveryCode accepts one of the user's unused recovery codes, once.
func (s *Service) UseRecoveryCode(ctx context.Context, uid, code, clientIP string) error {
	now := s.now()
	if err := s.countFactorAttempt(ctx, uid, clientIP, now); err != nil {
		return err
	}
	h := oauth.HashToken(normalRecoveryCode(code))
	err := s.updateFactors(ctx, uid, func(f oauth.UserFactors) (oauth.UserFactors, error) {
		for i, x := range f.Factors {
			for j, rh := range x.RecoveryHashes {
				if subtle.ConstantTimeCompare([]byte(rh), []byte(h)) == 1 {
					f.Factors[i].RecoveryHashes = append(x.RecoveryHashes[:j:j], x.RecoveryHashes[j+1:]...)
					f.Factors[i].LastUsedAt = now
					f.LastStrongAuth = now
					return f, nil
				}
			}
		}
		return f, ErrFactorFailed
	})
	if err := s.factorResult(ctx, uid, clientIP, "recovery_code", err); err != nil {
		return err
	}
	s.codeSucceeded(ctx, clientIP, now)
	return nil
}

// factorResult audits a second-factor attempt and maps its error.
func (s *Service) factorResult(ctx context.Context, uid, clientIP, what string, err error) error {
	switch {
	case errors.Is(err, ErrTOTPCodeUsed):
		s.auditLogin(ctx, "factor_failed", uid, clientIP, what+"_step_used")
		return ErrTOTPCodeUsed
	case errors.Is(err, ErrFactorFailed), errors.Is(err, oauth.ErrConflict):
		// A request that lost every retry to racing ones is refused like a wrong code.
		s.auditLogin(ctx, "factor_failed", uid, clientIP, what)
		return ErrFactorFailed
	case err != nil:
		return oauth.AsError(err)
	}
	s.resetFactorAttempts(ctx, uid)
	s.auditLogin(ctx, "factor_succeeded", uid, clientIP, what)
	return nil
}

// countFactorAttempt counts a second-factor attempt before it is checked, with the login's
// atomic accounting and limits (LoginPolicy), on the user's own counter and the address's.
func (s *Service) countFactorAttempt(ctx context.Context, uid, clientIP string, now time.Time) error {
	if s.loginPolicy.MaxFailures <= 0 {
		return nil
	}
	ok, err := s.countAttempt(ctx, failureKey("factor", uid), clientIP, now)
	if err != nil {
		return err
	}
	if !ok {
		s.auditLogin(ctx, "factor_locked", uid, clientIP, "too_many_attempts")
		return ErrFactorFailed
	}
	return nil
}

// resetFactorAttempts starts the user's second-factor counter again after a factor passed.
func (s *Service) resetFactorAttempts(ctx context.Context, uid string) {
	if s.loginPolicy.MaxFailures <= 0 {
		return
	}
	if err := s.interactions.ResetFailures(ctx, failureKey("factor", uid)); err != nil {
		s.log.WarnContext(ctx, "reset factor attempts", slog.Any("cause", err))
	}
}

// codeSucceeded settles the address's accounting of a code (TOTP, recovery, set-up) that
// passed: the attempt countFactorAttempt counted on the address is matched by a success, as a
// password sign-in's is (countAttempt), so that many people completing strong sign-ins from one
// address (an office behind one NAT) are not locked out by their own successes. Passkeys count
// no attempt, so they settle none.
func (s *Service) codeSucceeded(ctx context.Context, clientIP string, now time.Time) {
	if s.loginPolicy.MaxFailures > 0 {
		s.addressSucceeded(ctx, clientIP, now)
	}
}

// newRecoveryCode is 80 random bits as 16 base32 characters in groups of four.
func newRecoveryCode() string {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	s := base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b)
	return strings.ToLower(s[0:4] + "-" + s[4:8] + "-" + s[8:12] + "-" + s[12:16])
}

// normalRecoveryCode drops what people add or change when typing a code: case, spaces, dashes.
func normalRecoveryCode(code string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == ' ' {
			return -1
		}
		return r
	}, strings.ToUpper(strings.TrimSpace(code)))
}

// codeAt is the code of step (for tests and tools that act as the app).
func codeAt(secret string, step int64) (string, error) {
	return hotp.GenerateCodeCustom(secret, uint64(step), totpOpts)
}
