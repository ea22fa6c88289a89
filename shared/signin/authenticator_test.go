package signin_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/fxamacker/cbor/v2"

	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/oauth"
)

// authenticator is a WebAuthn platform authenticator in software (ES256, user verification, a
// signature counter), answering the options the machine's pages carry as a browser would, so
// that go-webauthn checks its answers as it checks a real one's. The fixture's relying party
// is http://localhost:8080.
type authenticator struct {
	key    *ecdsa.PrivateKey
	credID []byte
	handle []byte
	count  uint32
}

const rpOrigin, rpID = "http://localhost:8080", "localhost"

func newAuthenticator(t testing.TB) *authenticator {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	return &authenticator{key: k, credID: id}
}

var b64u = base64.RawURLEncoding

// publicKey reads the publicKey member of a ceremony's options (as the page carries them).
func publicKey(t testing.TB, options string) map[string]any {
	t.Helper()
	var o struct {
		PublicKey map[string]any `json:"publicKey"`
	}
	if err := json.Unmarshal([]byte(options), &o); err != nil {
		t.Fatalf("ceremony options: %v", err)
	}
	return o.PublicKey
}

func (a *authenticator) clientData(typ string, challenge any) []byte {
	b, _ := json.Marshal(map[string]any{"type": typ, "challenge": challenge, "origin": rpOrigin, "crossOrigin": false})
	return b
}

func (a *authenticator) authData(attested []byte) []byte {
	rp := sha256.Sum256([]byte(rpID))
	flags := byte(0x01 | 0x04) // UP, UV
	if attested != nil {
		flags |= 0x40
	}
	out := append(rp[:], flags)
	out = binary.BigEndian.AppendUint32(out, a.count)
	return append(out, attested...)
}

// register adds this authenticator's passkey to u through authn, as the set-up page would.
func (a *authenticator) register(t testing.TB, users *authn.Service, u *oauth.User, kind authn.Enrolment) {
	t.Helper()
	c, err := users.BeginPasskeyRegistration(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	resp := a.createFor(t, u.UID, string(c.Options))
	if _, err := users.FinishPasskeyRegistration(context.Background(), u, kind, c.State, []byte(resp), ""); err != nil {
		t.Fatalf("register a passkey: %v", err)
	}
}

// get answers navigator.credentials.get with a page's options; the counter goes up first.
func (a *authenticator) get(t testing.TB, options string) string {
	t.Helper()
	a.count++
	cd := a.clientData("webauthn.get", publicKey(t, options)["challenge"])
	ad := a.authData(nil)
	sum := sha256.Sum256(cd)
	digest := sha256.Sum256(append(append([]byte{}, ad...), sum[:]...))
	sig, err := ecdsa.SignASN1(rand.Reader, a.key, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"id": b64u.EncodeToString(a.credID), "rawId": b64u.EncodeToString(a.credID), "type": "public-key",
		"response": map[string]any{"clientDataJSON": b64u.EncodeToString(cd), "authenticatorData": b64u.EncodeToString(ad),
			"signature": b64u.EncodeToString(sig), "userHandle": b64u.EncodeToString(a.handle)},
		"authenticatorAttachment": "platform", "clientExtensionResults": map[string]any{}})
	return string(b)
}

// createFor answers navigator.credentials.create with a page's options for user uid.
func (a *authenticator) createFor(t testing.TB, uid, options string) string {
	t.Helper()
	o := publicKey(t, options)
	a.handle = []byte(uid)
	x, y := a.key.X.FillBytes(make([]byte, 32)), a.key.Y.FillBytes(make([]byte, 32))
	cose, err := cbor.Marshal(map[int]any{1: 2, 3: -7, -1: 1, -2: x, -3: y})
	if err != nil {
		t.Fatal(err)
	}
	attested := make([]byte, 16)
	attested = binary.BigEndian.AppendUint16(attested, uint16(len(a.credID)))
	attested = append(append(attested, a.credID...), cose...)
	att, err := cbor.Marshal(map[string]any{"fmt": "none", "attStmt": map[string]any{}, "authData": a.authData(attested)})
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := json.Marshal(map[string]any{"id": b64u.EncodeToString(a.credID), "rawId": b64u.EncodeToString(a.credID), "type": "public-key",
		"response": map[string]any{"clientDataJSON": b64u.EncodeToString(a.clientData("webauthn.create", o["challenge"])),
			"attestationObject": b64u.EncodeToString(att), "transports": []string{"internal"}},
		"authenticatorAttachment": "platform", "clientExtensionResults": map[string]any{}})
	return string(resp)
}
