package authn

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"errors"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/acmebank/authserver/shared/oauth"
)

// A passkey assertion bound to what the customer approves, beyond a payment (payment.go): the
// caller derives the challenge from the thing approved (the local bank app page: a CIBA
// request's reference and binding message with a nonce) and recomputes it at the answer, so
// an assertion made for another request is refused.

// errOtherChallenge is an assertion whose ceremony was started over another challenge.
var errOtherChallenge = errors.New("the ceremony was started for something else")

// BeginBoundPasskey starts the assertion, user verification required, of one of u's passkeys
// over challenge. A user without a passkey is ErrFactorFailed.
func (s *Service) BeginBoundPasskey(ctx context.Context, u *oauth.User, challenge []byte) (Ceremony, error) {
	if !s.PasskeysOn() {
		return Ceremony{}, ErrFactorFailed
	}
	return s.beginAssertion(ctx, u, webauthn.WithChallenge(challenge))
}

// FinishBoundPasskey verifies uid's assertion of a ceremony begun by BeginBoundPasskey: the
// library checks signature, origin, RP ID, user verification and counter, and the ceremony's
// challenge must be challenge, as the caller recomputes it now. It returns the amr methods
// the passkey proved; refused, ErrFactorFailed and nothing written.
func (s *Service) FinishBoundPasskey(ctx context.Context, uid string, state, response, challenge []byte, clientIP string) ([]string, error) {
	if uid == "" || !s.PasskeysOn() {
		return nil, ErrFactorFailed
	}
	want := base64.RawURLEncoding.EncodeToString(challenge)
	check := func(st *webauthn.SessionData, _ *protocol.ParsedCredentialAssertionData, _ *webauthn.Credential) error {
		if subtle.ConstantTimeCompare([]byte(st.Challenge), []byte(want)) != 1 {
			return errOtherChallenge
		}
		return nil
	}
	_, cred, err := s.finishAssertion(ctx, uid, state, response, clientIP, check)
	if err != nil {
		return nil, err
	}
	return passkeyMethods(cred), nil
}

// WithMethods is amr with methods added, and mfa when together they are two independent
// factors (the rule StepUp applies to a session), without writing anything.
func WithMethods(amr []string, methods ...string) []string { return addAMR(amr, methods...) }
