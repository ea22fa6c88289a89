package revocation

import (
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/oauth"
)

// New refuses a token domain that lacks what revocation uses, naming every missing dependency.
func TestNew_NamesEveryMissingDependency(t *testing.T) {
	if _, err := New(Deps{}); err == nil || !strings.Contains(err.Error(), "Tokens") {
		t.Fatalf("New(Deps{}) = %v, want an error naming Tokens", err)
	}
	_, err := New(Deps{Tokens: &oauth.Service{}})
	if err == nil {
		t.Fatal("New accepted an empty token domain")
	}
	for _, name := range []string{"Tokens.Clients", "Tokens.Grants", "Tokens.Replay", "Tokens.Clock", "Tokens.Issuer"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("the error %q does not name %s", err, name)
		}
	}
}
