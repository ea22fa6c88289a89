package oauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Dynamic linking (issue 29, PSD2 RTS article 5): for a payment, the customer's strong step
// is bound to the amount and the payee. This file is the rule's one place; package authn runs
// the WebAuthn ceremony with the library, package signin asks for it at the payment step, and
// Approve and ExchangeCode check its evidence here.
//
//   - A pending payment request keeps a fresh random nonce (AuthRequest.PaymentNonce, made
//     anew each time its payment page is prepared).
//   - The passkey challenge is PaymentChallenge(details, nonce) =
//     SHA-256("payment-link" || SHA-256(details) || nonce), details being the request's
//     authorization_details as stored (the validated, compacted JSON the grant keeps).
//   - The assertion is verified by go-webauthn against the user's passkey (signature, origin,
//     RP ID, user verification, counter) and the challenge is recomputed from the request at
//     the decision, so an assertion made over other details is refused.
//   - Its evidence (PaymentEvidence: the credential id, authenticator data, client data,
//     signature and public key, the nonce and the details' hash) is kept on the grant, and
//     checked again (Check) when the grant is created (Approve) and at the code exchange: a
//     grant whose details no longer hash to what was signed is invalid_grant, nothing issued.
//   - A TOTP code, when the policy lets one authorize a payment, leaves evidence of kind totp:
//     the details' hash and the nonce, which prove what the page showed when the code was
//     entered, not that the code was computed over them (SECURITY.md).
//   - A decision of the bank's app (CIBA, issue 31: the app backend's signed decision token,
//     package ciba/appbackend) leaves evidence of kind app: the SHA-256 of the details the app
//     showed, as the signed token states it, and the token's jti in place of the nonce (a
//     decision token is used once). It proves what the app backend signed it showed; the
//     customer's authentication is the app's (SECURITY.md).

// Factors that may authorize a payment (AUTH_PAYMENT_FACTORS).
const (
	PaymentFactorPasskey = "passkey"
	PaymentFactorTOTP    = "totp"
	// PaymentFactorApp is the bank app's decision (CIBA): not one of AUTH_PAYMENT_FACTORS,
	// which are the browser's payment step; its evidence is NewAppEvidence's.
	PaymentFactorApp = "app"
)

// paymentLinkLabel separates the payment challenge from any other hash of the same bytes.
const paymentLinkLabel = "payment-link"

// Bounds of the evidence a grant keeps: a WebAuthn assertion of any key the service accepts
// (RSA up to 4096 bits) fits with room to spare; anything larger is refused at the step.
const (
	maxEvidenceCredentialID = 1023 // WebAuthn's own bound on a credential id
	maxEvidenceAuthData     = 512
	maxEvidenceClientData   = 1024
	maxEvidenceSignature    = 512
	maxEvidencePublicKey    = 600
	paymentNonceBytes       = 32
	maxEvidenceJTI          = 128 // an app decision token's jti (appbackend bounds it)
)

// ErrPaymentNotLinked is a payment whose evidence does not bind the customer's step to its
// authorization details: none, malformed, made over other details, or not signed by its key.
var ErrPaymentNotLinked = errors.New("the payment's confirmation does not match its authorization details")

// PaymentEvidence is what the customer's step proved about a payment, kept on its grant
// (Grant.PaymentEvidence): small and bounded (the consts above).
type PaymentEvidence struct {
	// Factor is PaymentFactorPasskey or PaymentFactorTOTP.
	Factor string `json:"factor" dynamodbav:"factor"`
	// DetailsHash is SHA-256 of the authorization details the step was made over; Nonce the
	// pending request's nonce then.
	DetailsHash []byte `json:"details_hash" dynamodbav:"details_hash"`
	Nonce       []byte `json:"nonce" dynamodbav:"nonce"`
	// At is when the step was checked.
	At time.Time `json:"at" dynamodbav:"at"`
	// The passkey's signed assertion (WebAuthn 7.2): the credential, the authenticator data
	// and client data as the browser sent them, the signature over both, and the credential's
	// public key (PKIX DER) with its COSE algorithm, so that the evidence verifies on its own.
	CredentialID      []byte `json:"credential_id,omitempty" dynamodbav:"credential_id,omitempty"`
	AuthenticatorData []byte `json:"authenticator_data,omitempty" dynamodbav:"authenticator_data,omitempty"`
	ClientDataJSON    []byte `json:"client_data_json,omitempty" dynamodbav:"client_data_json,omitempty"`
	Signature         []byte `json:"signature,omitempty" dynamodbav:"signature,omitempty"`
	PublicKey         []byte `json:"public_key,omitempty" dynamodbav:"public_key,omitempty"`
	Alg               int64  `json:"alg,omitempty" dynamodbav:"alg,omitempty"`
}

// IsPaymentRequest reports whether a pending request is for a payment: its
// authorization_details hold a payment_initiation (the grant it leads to IsPayment).
func (r *AuthRequest) IsPaymentRequest() bool { return holdsPayment(r.AuthorizationDetails) }

// NewPaymentNonce is a fresh nonce for a payment request's page.
func NewPaymentNonce() []byte {
	n := make([]byte, paymentNonceBytes)
	_, _ = rand.Read(n) // crypto/rand.Read never fails (Go 1.24)
	return n
}

// DetailsHash is SHA-256 of authorization details as stored.
func DetailsHash(details json.RawMessage) []byte {
	h := sha256.Sum256(details)
	return h[:]
}

// PaymentChallenge is the WebAuthn challenge that binds a passkey assertion to a payment's
// details and its request's nonce: SHA-256("payment-link" || SHA-256(details) || nonce).
func PaymentChallenge(details json.RawMessage, nonce []byte) []byte {
	h := sha256.New()
	h.Write([]byte(paymentLinkLabel))
	h.Write(DetailsHash(details))
	h.Write(nonce)
	return h.Sum(nil)
}

// clientData is what the evidence reads of a WebAuthn client data JSON.
type clientData struct {
	Type      string `json:"type"`
	Challenge string `json:"challenge"`
}

// AssertionLinked reports whether the WebAuthn assertion response (the browser's JSON answer)
// was made over the challenge of details and nonce: the cheap check, before anything is taken
// or written, that refuses an assertion of another request or of other details. It proves
// nothing on its own (the signature is not checked): the library and Check do that.
func AssertionLinked(details json.RawMessage, nonce []byte, response []byte) bool {
	var r struct {
		Response struct {
			ClientDataJSON string `json:"clientDataJSON"`
		} `json:"response"`
	}
	if len(response) > 16<<10 || json.Unmarshal(response, &r) != nil {
		return false
	}
	cd, err := base64.RawURLEncoding.DecodeString(trimPadding(r.Response.ClientDataJSON))
	if err != nil {
		return false
	}
	return challengeMatches(cd, PaymentChallenge(details, nonce)) == nil
}

func trimPadding(s string) string {
	for len(s) > 0 && s[len(s)-1] == '=' {
		s = s[:len(s)-1]
	}
	return s
}

// challengeMatches checks that client data is a WebAuthn assertion's (webauthn.get) over
// challenge.
func challengeMatches(clientDataJSON, challenge []byte) error {
	var cd clientData
	if err := json.Unmarshal(clientDataJSON, &cd); err != nil {
		return fmt.Errorf("client data: %w", err)
	}
	if cd.Type != "webauthn.get" {
		return fmt.Errorf("client data of type %q, not an assertion", cd.Type)
	}
	got, err := base64.RawURLEncoding.DecodeString(trimPadding(cd.Challenge))
	if err != nil || subtle.ConstantTimeCompare(got, challenge) != 1 {
		return errors.New("the assertion was made over another challenge")
	}
	return nil
}

// Check verifies that the evidence binds the customer's step to details: its hash is theirs,
// and for a passkey, the client data's challenge is PaymentChallenge(details, nonce), user
// verification was done, and the signature over the authenticator data and the client data
// verifies with the evidence's key. Any error wraps ErrPaymentNotLinked.
func (e *PaymentEvidence) Check(details json.RawMessage) error {
	if err := e.check(details); err != nil {
		return fmt.Errorf("%w: %w", ErrPaymentNotLinked, err)
	}
	return nil
}

func (e *PaymentEvidence) check(details json.RawMessage) error {
	if e == nil {
		return errors.New("no evidence")
	}
	nonceOK := len(e.Nonce) == paymentNonceBytes
	if e.Factor == PaymentFactorApp {
		nonceOK = len(e.Nonce) > 0 && len(e.Nonce) <= maxEvidenceJTI
	}
	if !nonceOK || len(e.DetailsHash) != sha256.Size {
		return errors.New("malformed nonce or hash")
	}
	if subtle.ConstantTimeCompare(e.DetailsHash, DetailsHash(details)) != 1 {
		return errors.New("the details changed after the customer's step")
	}
	switch e.Factor {
	case PaymentFactorTOTP, PaymentFactorApp:
		if len(e.CredentialID)+len(e.AuthenticatorData)+len(e.ClientDataJSON)+len(e.Signature)+len(e.PublicKey) > 0 {
			return fmt.Errorf("a %s evidence carries no assertion", e.Factor)
		}
		return nil
	case PaymentFactorPasskey:
	default:
		return fmt.Errorf("unknown factor %q", e.Factor)
	}
	switch {
	case len(e.CredentialID) == 0 || len(e.CredentialID) > maxEvidenceCredentialID,
		len(e.AuthenticatorData) < 37 || len(e.AuthenticatorData) > maxEvidenceAuthData,
		len(e.ClientDataJSON) == 0 || len(e.ClientDataJSON) > maxEvidenceClientData,
		len(e.Signature) == 0 || len(e.Signature) > maxEvidenceSignature,
		len(e.PublicKey) == 0 || len(e.PublicKey) > maxEvidencePublicKey:
		return errors.New("assertion fields missing or out of bounds")
	}
	if err := challengeMatches(e.ClientDataJSON, PaymentChallenge(details, e.Nonce)); err != nil {
		return err
	}
	const flagUP, flagUV = 0x01, 0x04
	if flags := e.AuthenticatorData[32]; flags&flagUP == 0 || flags&flagUV == 0 {
		return errors.New("the assertion was made without user presence and verification")
	}
	cdHash := sha256.Sum256(e.ClientDataJSON)
	signed := append(append(make([]byte, 0, len(e.AuthenticatorData)+sha256.Size), e.AuthenticatorData...), cdHash[:]...)
	return verifyCOSE(e.Alg, e.PublicKey, signed, e.Signature)
}

// COSE algorithms (RFC 9053, IANA) an evidence may be signed with.
const (
	coseES256 = -7
	coseES384 = -35
	coseES512 = -36
	coseEdDSA = -8
	coseRS256 = -257
	cosePS256 = -37
)

// verifyCOSE verifies sig over msg with the PKIX public key der, by COSE algorithm alg.
func verifyCOSE(alg int64, der, msg, sig []byte) error {
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return fmt.Errorf("public key: %w", err)
	}
	bad := errors.New("the assertion's signature does not verify")
	switch alg {
	case coseES256, coseES384, coseES512:
		k, ok := pub.(*ecdsa.PublicKey)
		curve, digest := map[int64]elliptic.Curve{coseES256: elliptic.P256(), coseES384: elliptic.P384(), coseES512: elliptic.P521()}[alg], digestOf(alg, msg)
		if !ok || k.Curve != curve || !ecdsa.VerifyASN1(k, digest, sig) {
			return bad
		}
	case coseEdDSA:
		k, ok := pub.(ed25519.PublicKey)
		if !ok || !ed25519.Verify(k, msg, sig) {
			return bad
		}
	case coseRS256, cosePS256:
		k, ok := pub.(*rsa.PublicKey)
		if !ok {
			return bad
		}
		d := sha256.Sum256(msg)
		if alg == coseRS256 {
			err = rsa.VerifyPKCS1v15(k, crypto.SHA256, d[:], sig)
		} else {
			err = rsa.VerifyPSS(k, crypto.SHA256, d[:], sig, nil)
		}
		if err != nil {
			return bad
		}
	default:
		return fmt.Errorf("unsupported algorithm %d", alg)
	}
	return nil
}

func digestOf(alg int64, msg []byte) []byte {
	switch alg {
	case coseES384:
		d := sha512.Sum384(msg)
		return d[:]
	case coseES512:
		d := sha512.Sum512(msg)
		return d[:]
	}
	d := sha256.Sum256(msg)
	return d[:]
}

// checkPaymentLink is the rule Approve and ExchangeCode apply: a payment grant (or request)
// must carry evidence that checks against its details; any other needs none.
func checkPaymentLink(details json.RawMessage, e *PaymentEvidence) error {
	if !holdsPayment(details) {
		return nil
	}
	return e.Check(details)
}

// NewTOTPEvidence is the evidence of a TOTP code entered at the payment step of a request
// with details and nonce, at at: what the page showed, not what the code proves.
func NewTOTPEvidence(details json.RawMessage, nonce []byte, at time.Time) *PaymentEvidence {
	return &PaymentEvidence{Factor: PaymentFactorTOTP, DetailsHash: DetailsHash(details), Nonce: nonce, At: at}
}

// NewAppEvidence is the evidence of the bank app's decision on a payment: detailsHash is the
// SHA-256 the app backend signed it showed, jti its decision token's id, at when it was
// checked. Check then holds detailsHash to the request's details.
func NewAppEvidence(detailsHash []byte, jti string, at time.Time) *PaymentEvidence {
	return &PaymentEvidence{Factor: PaymentFactorApp, DetailsHash: detailsHash, Nonce: []byte(jti), At: at}
}

// DefaultPaymentFactors are the factors that may authorize a payment when the deployment
// says nothing (AUTH_PAYMENT_FACTORS): passkeys, whose assertion is bound to the payment.
var DefaultPaymentFactors = []string{PaymentFactorPasskey}

// ParsePaymentFactors reads AUTH_PAYMENT_FACTORS: a comma-separated list of passkey and totp,
// each at most once ("" is the default, passkey alone).
func ParsePaymentFactors(v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return slices.Clone(DefaultPaymentFactors), nil
	}
	var out []string
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f != PaymentFactorPasskey && f != PaymentFactorTOTP {
			return nil, fmt.Errorf("want passkey, totp or both (comma-separated), got %q", f)
		}
		if slices.Contains(out, f) {
			return nil, fmt.Errorf("%q is listed twice", f)
		}
		out = append(out, f)
	}
	return out, nil
}
