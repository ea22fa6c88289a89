package tokenendpoint

import (
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/oauth"
)

// New refuses a token domain that lacks what the token endpoint uses, naming every missing
// dependency in one error.
func TestNew_NamesEveryMissingDependency(t *testing.T) {
	if _, err := New(Deps{}); err == nil || !strings.Contains(err.Error(), "Tokens") {
		t.Fatalf("New(Deps{}) = %v, want an error naming Tokens", err)
	}
	_, err := New(Deps{Tokens: &oauth.Service{Clock: oauth.SystemClock{}}})
	if err == nil {
		t.Fatal("New accepted a token domain without stores or signer")
	}
	for _, name := range []string{"Tokens.Clients", "Tokens.Grants", "Tokens.Replay", "Tokens.Issuer", "Tokens.Signer"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("the error %q does not name %s", err, name)
		}
	}
	if strings.Contains(err.Error(), "Clock") {
		t.Errorf("the error %q names the clock, which was given", err)
	}
}
