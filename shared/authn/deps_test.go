package authn

import (
	"os/exec"
	"strings"
	"testing"
)

// TestOAuth_LinksNoUserAuthentication: the token domain (shared/oauth) links none of the
// user's authentication (this package: go-webauthn, the TOTP library and its QR codes,
// argon2id) and no HTML template, so a function that serves no page links none of them
// through it.
func TestOAuth_LinksNoUserAuthentication(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/acmebank/authserver/shared/oauth").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []string{
		"github.com/acmebank/authserver/shared/authn",
		"github.com/go-webauthn/webauthn/webauthn",
		"github.com/pquerna/otp",
		"golang.org/x/crypto/argon2",
		"html/template",
	}
	deps := strings.Fields(string(out))
	for _, p := range forbidden {
		for _, d := range deps {
			if d == p || strings.HasPrefix(d, p+"/") {
				t.Errorf("shared/oauth links %s", d)
			}
		}
	}
}
