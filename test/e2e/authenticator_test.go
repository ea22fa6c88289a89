package e2e

import (
	"encoding/base64"
	"testing"

	"github.com/acmebank/authserver/internal/webauthntest"
)

var b64u = base64.RawURLEncoding

// passkeyOptionsRe finds a page's passkey ceremony options.
var passkeyOptionsRe = webauthntest.OptionsAttr

// authenticator is the software WebAuthn authenticator of test/internal/webauthntest, with the
// short names the end-to-end tests use.
type authenticator struct{ *webauthntest.Authenticator }

func newAuthenticator(t *testing.T, rpID, origin string) *authenticator {
	t.Helper()
	return &authenticator{webauthntest.New(t, rpID, origin)}
}

func passkeyOptions(t *testing.T, page string) map[string]any {
	t.Helper()
	return webauthntest.Options(t, page)
}

// create answers navigator.credentials.create with the page's options.
func (a *authenticator) create(t *testing.T, page string) string {
	t.Helper()
	return a.Create(t, page)
}

// get answers navigator.credentials.get with the page's options; the counter goes up first.
func (a *authenticator) get(t *testing.T, page string) string {
	t.Helper()
	return a.Get(t, page)
}

// assert signs an assertion over options as they are.
func (a *authenticator) assert(t *testing.T, o map[string]any) string {
	t.Helper()
	return a.Assert(t, o)
}
