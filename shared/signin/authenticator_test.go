package signin_test

import (
	"context"
	"testing"

	"github.com/acmebank/authserver/internal/webauthntest"
	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/oauth"
)

// authenticator is a WebAuthn platform authenticator in software (internal/webauthntest: ES256,
// user verification, a signature counter), answering the options the machine's pages carry as
// a browser would, so that go-webauthn checks its answers as it checks a real one's. The
// fixture's relying party is http://localhost:8080.
type authenticator struct{ *webauthntest.Authenticator }

const rpOrigin, rpID = "http://localhost:8080", "localhost"

func newAuthenticator(t testing.TB) *authenticator {
	t.Helper()
	return &authenticator{webauthntest.New(t, rpID, rpOrigin)}
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

// get answers navigator.credentials.get with a ceremony's options (JSON); the counter goes up
// first.
func (a *authenticator) get(t testing.TB, options string) string {
	t.Helper()
	a.Count++
	return a.Assert(t, webauthntest.PublicKey(t, options))
}

// createFor answers navigator.credentials.create with a ceremony's options (JSON) for user uid.
func (a *authenticator) createFor(t testing.TB, uid, options string) string {
	t.Helper()
	resp := a.CreateWith(t, webauthntest.PublicKey(t, options))
	a.UserHandle = []byte(uid)
	return resp
}
