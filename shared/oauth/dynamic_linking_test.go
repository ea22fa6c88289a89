package oauth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

const (
	linkedDetails = `[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"123.50"},"creditorName":"Merchant A","creditorAccount":{"iban":"DE02100100109307118603"}}]`
	otherAmount   = `[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"9123.50"},"creditorName":"Merchant A","creditorAccount":{"iban":"DE02100100109307118603"}}]`
	otherPayee    = `[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"123.50"},"creditorName":"Merchant B","creditorAccount":{"iban":"FR7630006000011234567890189"}}]`
)

// signer is a passkey in software: it signs WebAuthn assertions (ES256, UP and UV set) over a
// challenge, as an authenticator would, so the evidence is checked as a browser's would be.
type signer struct {
	key *ecdsa.PrivateKey
	id  []byte
}

func newSigner(t *testing.T) *signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &signer{key: k, id: []byte("credential-1")}
}

// assertion is the evidence of an assertion over challenge, with flags as the authenticator
// data's flags and typ as the client data's type.
func (s *signer) assertion(t *testing.T, challenge []byte, flags byte, typ string) *oauth.PaymentEvidence {
	t.Helper()
	rp := sha256.Sum256([]byte("auth.bank.example"))
	ad := append(rp[:], flags, 0, 0, 0, 7)
	cd, _ := json.Marshal(map[string]any{"type": typ, "challenge": base64.RawURLEncoding.EncodeToString(challenge), "origin": "https://auth.bank.example"})
	h := sha256.Sum256(cd)
	digest := sha256.Sum256(append(append([]byte{}, ad...), h[:]...))
	sig, err := ecdsa.SignASN1(rand.Reader, s.key, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&s.key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return &oauth.PaymentEvidence{Factor: oauth.PaymentFactorPasskey, CredentialID: s.id, AuthenticatorData: ad, ClientDataJSON: cd,
		Signature: sig, PublicKey: der, Alg: -7, At: time.Unix(1_800_000_000, 0)}
}

// linked is the evidence of an assertion made over details with a fresh nonce.
func (s *signer) linked(t *testing.T, details string) *oauth.PaymentEvidence {
	t.Helper()
	nonce := oauth.NewPaymentNonce()
	e := s.assertion(t, oauth.PaymentChallenge(json.RawMessage(details), nonce), 0x05, "webauthn.get")
	e.Nonce, e.DetailsHash = nonce, oauth.DetailsHash(json.RawMessage(details))
	return e
}

func TestPaymentChallenge_BindsTheDetailsAndTheNonce(t *testing.T) {
	nonce := oauth.NewPaymentNonce()
	base := oauth.PaymentChallenge(json.RawMessage(linkedDetails), nonce)
	if len(base) != sha256.Size {
		t.Fatalf("challenge of %d bytes, want %d", len(base), sha256.Size)
	}
	for name, other := range map[string][]byte{
		"another amount": oauth.PaymentChallenge(json.RawMessage(otherAmount), nonce),
		"another payee":  oauth.PaymentChallenge(json.RawMessage(otherPayee), nonce),
		"another nonce":  oauth.PaymentChallenge(json.RawMessage(linkedDetails), oauth.NewPaymentNonce()),
	} {
		if string(other) == string(base) {
			t.Errorf("%s gives the same challenge", name)
		}
	}
	if string(oauth.PaymentChallenge(json.RawMessage(linkedDetails), nonce)) != string(base) {
		t.Error("the challenge is not recomputable from the details and the nonce")
	}
	// The label keeps the challenge apart from a plain hash of the same bytes.
	plain := sha256.Sum256(append(oauth.DetailsHash(json.RawMessage(linkedDetails)), nonce...))
	if string(plain[:]) == string(base) {
		t.Error("the challenge is not domain-separated by its label")
	}
	if a, b := oauth.NewPaymentNonce(), oauth.NewPaymentNonce(); len(a) != 32 || string(a) == string(b) {
		t.Errorf("nonces %x and %x: want 32 fresh random bytes each", a, b)
	}
}

func TestPaymentEvidence_AcceptsAnAssertionOverItsDetails(t *testing.T) {
	e := newSigner(t).linked(t, linkedDetails)
	if err := e.Check(json.RawMessage(linkedDetails)); err != nil {
		t.Fatalf("evidence over the details: %v", err)
	}
}

// TestPaymentEvidence_RefusesAnythingThatDoesNotBindTheStepToTheDetails: each case breaks one
// rule of Check, and is refused with ErrPaymentNotLinked.
func TestPaymentEvidence_RefusesAnythingThatDoesNotBindTheStepToTheDetails(t *testing.T) {
	s := newSigner(t)
	cases := map[string]struct {
		details string
		ev      func() *oauth.PaymentEvidence
	}{
		"none":                              {linkedDetails, func() *oauth.PaymentEvidence { return nil }},
		"the amount changed after the step": {otherAmount, func() *oauth.PaymentEvidence { return s.linked(t, linkedDetails) }},
		"the payee changed after the step":  {otherPayee, func() *oauth.PaymentEvidence { return s.linked(t, linkedDetails) }},
		"hash rewritten to the new details, assertion over the old": {otherAmount, func() *oauth.PaymentEvidence {
			e := s.linked(t, linkedDetails)
			e.DetailsHash = oauth.DetailsHash(json.RawMessage(otherAmount))
			return e
		}},
		"another nonce than the one signed": {linkedDetails, func() *oauth.PaymentEvidence {
			e := s.linked(t, linkedDetails)
			e.Nonce = oauth.NewPaymentNonce()
			return e
		}},
		"signed by another key": {linkedDetails, func() *oauth.PaymentEvidence {
			e := s.linked(t, linkedDetails)
			e.PublicKey = newSigner(t).linked(t, linkedDetails).PublicKey
			return e
		}},
		"signature altered": {linkedDetails, func() *oauth.PaymentEvidence {
			e := s.linked(t, linkedDetails)
			e.Signature[len(e.Signature)-1] ^= 1
			return e
		}},
		"client data altered after signing": {linkedDetails, func() *oauth.PaymentEvidence {
			e := s.linked(t, linkedDetails)
			e.ClientDataJSON = []byte(strings.Replace(string(e.ClientDataJSON), "https://auth.bank.example", "https://evil.example", 1))
			return e
		}},
		"without user verification": {linkedDetails, func() *oauth.PaymentEvidence {
			nonce := oauth.NewPaymentNonce()
			e := s.assertion(t, oauth.PaymentChallenge(json.RawMessage(linkedDetails), nonce), 0x01, "webauthn.get")
			e.Nonce, e.DetailsHash = nonce, oauth.DetailsHash(json.RawMessage(linkedDetails))
			return e
		}},
		"a registration's client data": {linkedDetails, func() *oauth.PaymentEvidence {
			nonce := oauth.NewPaymentNonce()
			e := s.assertion(t, oauth.PaymentChallenge(json.RawMessage(linkedDetails), nonce), 0x05, "webauthn.create")
			e.Nonce, e.DetailsHash = nonce, oauth.DetailsHash(json.RawMessage(linkedDetails))
			return e
		}},
		"an unsupported algorithm": {linkedDetails, func() *oauth.PaymentEvidence {
			e := s.linked(t, linkedDetails)
			e.Alg = -65535
			return e
		}},
		"oversized authenticator data": {linkedDetails, func() *oauth.PaymentEvidence {
			e := s.linked(t, linkedDetails)
			e.AuthenticatorData = append(e.AuthenticatorData, make([]byte, 512)...)
			return e
		}},
		"oversized credential id": {linkedDetails, func() *oauth.PaymentEvidence {
			e := s.linked(t, linkedDetails)
			e.CredentialID = make([]byte, 1024)
			return e
		}},
		"oversized client data": {linkedDetails, func() *oauth.PaymentEvidence {
			e := s.linked(t, linkedDetails)
			e.ClientDataJSON = append(e.ClientDataJSON, make([]byte, 1024)...)
			return e
		}},
		"oversized signature": {linkedDetails, func() *oauth.PaymentEvidence {
			e := s.linked(t, linkedDetails)
			e.Signature = make([]byte, 513)
			return e
		}},
		"oversized public key": {linkedDetails, func() *oauth.PaymentEvidence {
			e := s.linked(t, linkedDetails)
			e.PublicKey = make([]byte, 601)
			return e
		}},
		"an unknown factor": {linkedDetails, func() *oauth.PaymentEvidence {
			e := s.linked(t, linkedDetails)
			e.Factor = "password"
			return e
		}},
		"a TOTP evidence over other details": {otherAmount, func() *oauth.PaymentEvidence {
			return oauth.NewTOTPEvidence(json.RawMessage(linkedDetails), oauth.NewPaymentNonce(), time.Now())
		}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			err := c.ev().Check(json.RawMessage(c.details))
			if !errors.Is(err, oauth.ErrPaymentNotLinked) {
				t.Fatalf("Check: %v, want ErrPaymentNotLinked", err)
			}
		})
	}
}

func TestPaymentEvidence_TOTPRecordsTheDetailsShown(t *testing.T) {
	e := oauth.NewTOTPEvidence(json.RawMessage(linkedDetails), oauth.NewPaymentNonce(), time.Now())
	if err := e.Check(json.RawMessage(linkedDetails)); err != nil {
		t.Fatalf("TOTP evidence over the details: %v", err)
	}
	e.Signature = []byte{1}
	if err := e.Check(json.RawMessage(linkedDetails)); !errors.Is(err, oauth.ErrPaymentNotLinked) {
		t.Fatalf("a TOTP evidence carrying a signature: %v, want refused", err)
	}
}

func TestAssertionLinked_OnlyForTheRequestsDetailsAndNonce(t *testing.T) {
	s := newSigner(t)
	nonce := oauth.NewPaymentNonce()
	e := s.assertion(t, oauth.PaymentChallenge(json.RawMessage(linkedDetails), nonce), 0x05, "webauthn.get")
	resp, _ := json.Marshal(map[string]any{"id": "x", "type": "public-key", "response": map[string]any{
		"clientDataJSON": base64.RawURLEncoding.EncodeToString(e.ClientDataJSON)}})
	if !oauth.AssertionLinked(json.RawMessage(linkedDetails), nonce, resp) {
		t.Error("the assertion over the request's challenge is not linked")
	}
	if oauth.AssertionLinked(json.RawMessage(otherAmount), nonce, resp) {
		t.Error("an assertion over another amount is linked")
	}
	if oauth.AssertionLinked(json.RawMessage(linkedDetails), oauth.NewPaymentNonce(), resp) {
		t.Error("an assertion over another nonce is linked")
	}
	if oauth.AssertionLinked(json.RawMessage(linkedDetails), nonce, []byte(`{"response":{"clientDataJSON":"!!"}}`)) {
		t.Error("garbage is linked")
	}
}

func TestPaymentEvidence_AppDecisionBindsTheDetailsItSigned(t *testing.T) {
	at := time.Now()
	e := oauth.NewAppEvidence(oauth.DetailsHash(json.RawMessage(linkedDetails)), "jti-1", at)
	if err := e.Check(json.RawMessage(linkedDetails)); err != nil {
		t.Fatalf("app evidence over the details: %v", err)
	}
	refused := map[string]*oauth.PaymentEvidence{
		"another amount":   oauth.NewAppEvidence(oauth.DetailsHash(json.RawMessage(otherAmount)), "jti-1", at),
		"another payee":    oauth.NewAppEvidence(oauth.DetailsHash(json.RawMessage(otherPayee)), "jti-1", at),
		"no hash":          oauth.NewAppEvidence(nil, "jti-1", at),
		"a truncated hash": oauth.NewAppEvidence(oauth.DetailsHash(json.RawMessage(linkedDetails))[:16], "jti-1", at),
		"no jti":           oauth.NewAppEvidence(oauth.DetailsHash(json.RawMessage(linkedDetails)), "", at),
		"an oversized jti": oauth.NewAppEvidence(oauth.DetailsHash(json.RawMessage(linkedDetails)), strings.Repeat("j", 129), at),
		"carrying an assertion": func() *oauth.PaymentEvidence {
			e := oauth.NewAppEvidence(oauth.DetailsHash(json.RawMessage(linkedDetails)), "jti-1", at)
			e.Signature = []byte{1}
			return e
		}(),
	}
	for name, e := range refused {
		if err := e.Check(json.RawMessage(linkedDetails)); !errors.Is(err, oauth.ErrPaymentNotLinked) {
			t.Errorf("%s: %v, want ErrPaymentNotLinked", name, err)
		}
	}
	if err := oauth.CheckPaymentLink(json.RawMessage(linkedDetails), nil); !errors.Is(err, oauth.ErrPaymentNotLinked) {
		t.Errorf("a payment without evidence: %v, want refused", err)
	}
	if err := oauth.CheckPaymentLink(json.RawMessage(`[{"type":"account_information"}]`), nil); err != nil {
		t.Errorf("a request that is no payment needs no evidence: %v", err)
	}
}
