package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"html"
	"regexp"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

// authenticator is a WebAuthn authenticator in software, for the Go end-to-end tests: it
// answers the options our pages carry as a platform authenticator with user verification
// would (a discoverable ES256 credential, "none" attestation, a signature counter), encoded
// with fxamacker/cbor. The browser tests use Chromium's own virtual authenticator instead.
type authenticator struct {
	rpID, origin string
	key          *ecdsa.PrivateKey
	credID       []byte
	userHandle   []byte
	count        uint32
}

func newAuthenticator(t *testing.T, rpID, origin string) *authenticator {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	return &authenticator{rpID: rpID, origin: origin, key: k, credID: id}
}

var b64u = base64.RawURLEncoding

// passkeyOptions reads the ceremony options of the page's passkey form.
var passkeyOptionsRe = regexp.MustCompile(`data-options="([^"]*)"`)

func passkeyOptions(t *testing.T, page string) map[string]any {
	t.Helper()
	m := passkeyOptionsRe.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no passkey form on the page: %.400s", page)
	}
	var o struct {
		PublicKey map[string]any `json:"publicKey"`
	}
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &o); err != nil {
		t.Fatalf("passkey options: %v", err)
	}
	return o.PublicKey
}

func (a *authenticator) clientData(typ string, options map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"type": typ, "challenge": options["challenge"], "origin": a.origin, "crossOrigin": false})
	return b
}

// authData is the authenticator data: the RP ID hash, flags UP and UV (and AT with the
// attested credential), the counter.
func (a *authenticator) authData(attested []byte) []byte {
	rp := sha256.Sum256([]byte(a.rpID))
	flags := byte(0x01 | 0x04) // UP, UV
	if attested != nil {
		flags |= 0x40 // AT
	}
	out := append(rp[:], flags)
	out = binary.BigEndian.AppendUint32(out, a.count)
	return append(out, attested...)
}

// create answers navigator.credentials.create with the page's options.
func (a *authenticator) create(t *testing.T, page string) string {
	t.Helper()
	o := passkeyOptions(t, page)
	user, _ := o["user"].(map[string]any)
	handle, err := b64u.DecodeString(user["id"].(string))
	if err != nil {
		t.Fatal(err)
	}
	a.userHandle = handle
	x, y := a.key.X.FillBytes(make([]byte, 32)), a.key.Y.FillBytes(make([]byte, 32))
	cose, err := cbor.Marshal(map[int]any{1: 2, 3: -7, -1: 1, -2: x, -3: y})
	if err != nil {
		t.Fatal(err)
	}
	attested := make([]byte, 16) // AAGUID: none
	attested = binary.BigEndian.AppendUint16(attested, uint16(len(a.credID)))
	attested = append(append(attested, a.credID...), cose...)
	att, err := cbor.Marshal(map[string]any{"fmt": "none", "attStmt": map[string]any{}, "authData": a.authData(attested)})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"id": b64u.EncodeToString(a.credID), "rawId": b64u.EncodeToString(a.credID), "type": "public-key",
		"response": map[string]any{"clientDataJSON": b64u.EncodeToString(a.clientData("webauthn.create", o)), "attestationObject": b64u.EncodeToString(att),
			"transports": []string{"internal"}},
		"authenticatorAttachment": "platform", "clientExtensionResults": map[string]any{}})
	return string(b)
}

// get answers navigator.credentials.get with the page's options; the counter goes up first.
func (a *authenticator) get(t *testing.T, page string) string {
	t.Helper()
	a.count++
	return a.assert(t, passkeyOptions(t, page))
}

func (a *authenticator) assert(t *testing.T, o map[string]any) string {
	t.Helper()
	cd := a.clientData("webauthn.get", o)
	ad := a.authData(nil)
	sum := sha256.Sum256(cd)
	digest := sha256.Sum256(append(append([]byte{}, ad...), sum[:]...))
	sig, err := ecdsa.SignASN1(rand.Reader, a.key, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"id": b64u.EncodeToString(a.credID), "rawId": b64u.EncodeToString(a.credID), "type": "public-key",
		"response": map[string]any{"clientDataJSON": b64u.EncodeToString(cd), "authenticatorData": b64u.EncodeToString(ad),
			"signature": b64u.EncodeToString(sig), "userHandle": b64u.EncodeToString(a.userHandle)},
		"authenticatorAttachment": "platform", "clientExtensionResults": map[string]any{}})
	return string(b)
}
