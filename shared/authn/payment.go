package authn

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/protocol/webauthncbor"
	"github.com/go-webauthn/webauthn/protocol/webauthncose"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/acmebank/authserver/shared/oauth"
)

// The customer's step of a payment (dynamic linking; the rule, how the challenge is derived
// and how the evidence is checked, is oauth's dynamic_linking.go): a passkey assertion over
// the challenge of the payment's details and its request's nonce, verified by go-webauthn,
// or, when the policy allows it, a TOTP code entered on the page that shows the payment.

// ErrPaymentFactorRefused is a factor the payment policy (AUTH_PAYMENT_FACTORS) does not let
// authorize a payment.
var ErrPaymentFactorRefused = errors.New("authn: the payment policy does not accept this factor")

// PaymentFactorAllowed reports whether the payment policy lets factor (oauth.PaymentFactor*)
// authorize a payment; a passkey needs passkeys on.
func (s *Service) PaymentFactorAllowed(factor string) bool {
	if factor == oauth.PaymentFactorPasskey && !s.PasskeysOn() {
		return false
	}
	return slices.Contains(s.paymentFactors, factor)
}

// BeginPaymentPasskey starts the assertion of one of u's passkeys over the payment details and
// nonce: its challenge is oauth.PaymentChallenge(details, nonce).
func (s *Service) BeginPaymentPasskey(ctx context.Context, u *oauth.User, details json.RawMessage, nonce []byte) (Ceremony, error) {
	if !s.PaymentFactorAllowed(oauth.PaymentFactorPasskey) {
		return Ceremony{}, ErrPaymentFactorRefused
	}
	return s.beginAssertion(ctx, u, webauthn.WithChallenge(oauth.PaymentChallenge(details, nonce)))
}

// FinishPaymentPasskey verifies uid's passkey assertion for a payment with details and nonce
// (as the pending request holds them now): the library checks the signature, origin, RP ID,
// user verification and counter against the user's passkey; the ceremony's challenge and the
// assertion's are recomputed from details and nonce, so an assertion made over other details
// (another request's, or these before a change) is ErrFactorFailed and writes nothing. It
// returns the evidence the grant keeps, checked as the code exchange will check it, and the
// amr methods the passkey proved.
func (s *Service) FinishPaymentPasskey(ctx context.Context, uid string, state, response []byte, details json.RawMessage, nonce []byte, clientIP string) (*oauth.PaymentEvidence, []string, error) {
	if uid == "" || !s.PaymentFactorAllowed(oauth.PaymentFactorPasskey) {
		return nil, nil, ErrPaymentFactorRefused
	}
	var ev *oauth.PaymentEvidence
	check := func(st *webauthn.SessionData, parsed *protocol.ParsedCredentialAssertionData, cred *webauthn.Credential) error {
		want := base64.RawURLEncoding.EncodeToString(oauth.PaymentChallenge(details, nonce))
		if subtle.ConstantTimeCompare([]byte(st.Challenge), []byte(want)) != 1 {
			return fmt.Errorf("%w: the ceremony was started for other details", oauth.ErrPaymentNotLinked)
		}
		e, err := evidence(parsed, cred, details, nonce)
		if err != nil {
			return err
		}
		e.At = s.now()
		if err := e.Check(details); err != nil {
			return err
		}
		ev = e
		return nil
	}
	_, cred, err := s.finishAssertion(ctx, uid, state, response, clientIP, check)
	if err != nil {
		return nil, nil, err
	}
	s.auditLogin(ctx, "payment_confirmed", uid, clientIP, oauth.PaymentFactorPasskey)
	return ev, passkeyMethods(cred), nil
}

// evidence is the signed assertion of a payment as the grant keeps it: the bytes the browser
// sent and the credential's public key (PKIX DER, from its COSE key) with its algorithm.
func evidence(parsed *protocol.ParsedCredentialAssertionData, cred *webauthn.Credential, details json.RawMessage, nonce []byte) (*oauth.PaymentEvidence, error) {
	var pk webauthncose.PublicKeyData
	if err := webauthncbor.Unmarshal(cred.PublicKey, &pk); err != nil {
		return nil, fmt.Errorf("%w: public key: %w", oauth.ErrPaymentNotLinked, err)
	}
	block, _ := pem.Decode([]byte(webauthncose.DisplayPublicKey(cred.PublicKey)))
	if block == nil {
		return nil, fmt.Errorf("%w: the passkey's public key cannot be kept", oauth.ErrPaymentNotLinked)
	}
	r := parsed.Raw.AssertionResponse
	return &oauth.PaymentEvidence{Factor: oauth.PaymentFactorPasskey, DetailsHash: oauth.DetailsHash(details), Nonce: nonce,
		CredentialID: parsed.RawID, AuthenticatorData: r.AuthenticatorData, ClientDataJSON: r.ClientDataJSON,
		Signature: r.Signature, PublicKey: block.Bytes, Alg: pk.Algorithm}, nil
}

// PayWithTOTP checks uid's TOTP code entered on the page of a payment with details and nonce,
// when the payment policy allows TOTP (else ErrPaymentFactorRefused, nothing written), and
// returns the evidence: the details the page showed, not bound to the code (SECURITY.md).
func (s *Service) PayWithTOTP(ctx context.Context, uid, code string, details json.RawMessage, nonce []byte, clientIP string) (*oauth.PaymentEvidence, error) {
	if !s.PaymentFactorAllowed(oauth.PaymentFactorTOTP) {
		return nil, ErrPaymentFactorRefused
	}
	if err := s.VerifyTOTP(ctx, uid, code, clientIP); err != nil {
		return nil, err
	}
	s.auditLogin(ctx, "payment_confirmed", uid, clientIP, oauth.PaymentFactorTOTP)
	return oauth.NewTOTPEvidence(details, nonce, s.now()), nil
}
