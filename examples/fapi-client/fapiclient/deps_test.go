package fapiclient

import (
	"os/exec"
	"strings"
	"testing"
)

// TestExample_LinksNothingOfTheServer: the example client, as `go run ./examples/fapi-client`
// builds it, links no package of the server (only its own and public libraries), so it does
// only what a third party's client can do: speak to the server over HTTP.
func TestExample_LinksNothingOfTheServer(t *testing.T) {
	const mod = "github.com/acmebank/authserver/"
	out, err := exec.Command("go", "list", "-deps", mod+"examples/fapi-client").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages: %s", len(deps), out)
	}
	for _, p := range deps {
		if strings.HasPrefix(p, mod) && !strings.HasPrefix(p, mod+"examples/fapi-client") {
			t.Errorf("the example client links the server's package %s", p)
		}
	}
}
