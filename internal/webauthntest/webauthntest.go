// Package webauthntest is a WebAuthn authenticator in software, for the Go tests (the sign-in
// machine's, test/e2e, and test/lambda against the built functions): it answers the options our pages
// carry as a platform authenticator with user verification would (a discoverable ES256
// credential, "none" attestation, a signature counter), encoded with fxamacker/cbor. The
// browser tests use Chromium's own virtual authenticator instead.
package webauthntest

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

// Authenticator holds one passkey. Tests may move its counter (Count) or borrow another's
// user handle to play a cloned or confused authenticator.
type Authenticator struct {
	RPID, Origin string
	Key          *ecdsa.PrivateKey
	CredID       []byte
	UserHandle   []byte
	Count        uint32
}

// New returns an authenticator of rpID for pages served at origin, with a fresh key.
func New(t testing.TB, rpID, origin string) *Authenticator {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	return &Authenticator{RPID: rpID, Origin: origin, Key: k, CredID: id}
}

var b64u = base64.RawURLEncoding

// OptionsAttr finds the ceremony options a page carries (its data-options attribute, escaped).
var OptionsAttr = regexp.MustCompile(`data-options="([^"]*)"`)

// Options reads the ceremony options (publicKey) of the page's passkey form.
func Options(t testing.TB, page string) map[string]any {
	t.Helper()
	m := OptionsAttr.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no passkey form on the page: %.400s", page)
	}
	return PublicKey(t, html.UnescapeString(m[1]))
}

// PublicKey reads the publicKey member of a ceremony's options as JSON.
func PublicKey(t testing.TB, options string) map[string]any {
	t.Helper()
	var o struct {
		PublicKey map[string]any `json:"publicKey"`
	}
	if err := json.Unmarshal([]byte(options), &o); err != nil {
		t.Fatalf("passkey options: %v", err)
	}
	return o.PublicKey
}

func (a *Authenticator) clientData(typ string, options map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"type": typ, "challenge": options["challenge"], "origin": a.Origin, "crossOrigin": false})
	return b
}

// authData is the authenticator data: the RP ID hash, flags UP and UV (and AT with the
// attested credential), the counter.
func (a *Authenticator) authData(attested []byte) []byte {
	rp := sha256.Sum256([]byte(a.RPID))
	flags := byte(0x01 | 0x04) // UP, UV
	if attested != nil {
		flags |= 0x40 // AT
	}
	out := append(rp[:], flags)
	out = binary.BigEndian.AppendUint32(out, a.Count)
	return append(out, attested...)
}

// Create answers navigator.credentials.create with the page's options.
func (a *Authenticator) Create(t testing.TB, page string) string {
	t.Helper()
	return a.CreateWith(t, Options(t, page))
}

// CreateWith answers navigator.credentials.create with publicKey options o.
func (a *Authenticator) CreateWith(t testing.TB, o map[string]any) string {
	t.Helper()
	user, _ := o["user"].(map[string]any)
	id, _ := user["id"].(string)
	handle, err := b64u.DecodeString(id)
	if err != nil {
		t.Fatal(err)
	}
	a.UserHandle = handle
	x, y := a.Key.X.FillBytes(make([]byte, 32)), a.Key.Y.FillBytes(make([]byte, 32))
	cose, err := cbor.Marshal(map[int]any{1: 2, 3: -7, -1: 1, -2: x, -3: y})
	if err != nil {
		t.Fatal(err)
	}
	attested := make([]byte, 16) // AAGUID: none
	attested = binary.BigEndian.AppendUint16(attested, uint16(len(a.CredID)))
	attested = append(append(attested, a.CredID...), cose...)
	att, err := cbor.Marshal(map[string]any{"fmt": "none", "attStmt": map[string]any{}, "authData": a.authData(attested)})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"id": b64u.EncodeToString(a.CredID), "rawId": b64u.EncodeToString(a.CredID), "type": "public-key",
		"response": map[string]any{"clientDataJSON": b64u.EncodeToString(a.clientData("webauthn.create", o)), "attestationObject": b64u.EncodeToString(att),
			"transports": []string{"internal"}},
		"authenticatorAttachment": "platform", "clientExtensionResults": map[string]any{}})
	return string(b)
}

// Get answers navigator.credentials.get with the page's options; the counter goes up first.
func (a *Authenticator) Get(t testing.TB, page string) string {
	t.Helper()
	a.Count++
	return a.Assert(t, Options(t, page))
}

// Assert signs an assertion over options as they are (the counter as it is).
func (a *Authenticator) Assert(t testing.TB, o map[string]any) string {
	t.Helper()
	cd := a.clientData("webauthn.get", o)
	ad := a.authData(nil)
	sum := sha256.Sum256(cd)
	digest := sha256.Sum256(append(append([]byte{}, ad...), sum[:]...))
	sig, err := ecdsa.SignASN1(rand.Reader, a.Key, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"id": b64u.EncodeToString(a.CredID), "rawId": b64u.EncodeToString(a.CredID), "type": "public-key",
		"response": map[string]any{"clientDataJSON": b64u.EncodeToString(cd), "authenticatorData": b64u.EncodeToString(ad),
			"signature": b64u.EncodeToString(sig), "userHandle": b64u.EncodeToString(a.UserHandle)},
		"authenticatorAttachment": "platform", "clientExtensionResults": map[string]any{}})
	return string(b)
}
