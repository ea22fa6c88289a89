// Package functions holds the test of what each Lambda function links.
package functions

import (
	"os/exec"
	"strings"
	"testing"
)

const (
	pagesPkg    = "github.com/acmebank/authserver/shared/pages"
	kmsPkg      = "github.com/aws/aws-sdk-go-v2/service/kms"
	embeddedPkg = "github.com/acmebank/authserver/shared/store/embedded"
	bboltPkg    = "go.etcd.io/bbolt"
	localKeyPkg = "github.com/acmebank/authserver/shared/keys/localkey"
)

// Each function links only the adapters its main wires. The authorizer, on the path of every
// bank API call, links neither the pages, nor KMS, nor the embedded store; only the functions
// that sign or rotate keys (token, rotatekeys) link the KMS client; no function links the
// embedded store. (The pages come with shared/httpapi, whose authorization endpoint renders
// them, to every function that serves HTTP.)
func TestFunctions_LinkOnlyTheirAdapters(t *testing.T) {
	everywhere := []string{embeddedPkg, bboltPkg}
	forbidden := map[string][]string{
		"authorizer": {pagesPkg, kmsPkg, localKeyPkg},
		"authorize":  {kmsPkg, localKeyPkg},
		"revoke":     {kmsPkg, localKeyPkg},
		"par":        {kmsPkg, localKeyPkg},
		"userinfo":   {kmsPkg, localKeyPkg},
		"introspect": {kmsPkg, localKeyPkg},
		"jwks":       {kmsPkg, localKeyPkg},
		"token":      nil,
		"rotatekeys": nil,
	}
	for fn, extra := range forbidden {
		t.Run(fn, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "./"+fn).Output()
			if err != nil {
				t.Fatalf("go list -deps ./%s: %v", fn, err)
			}
			deps := map[string]bool{}
			for _, p := range strings.Fields(string(out)) {
				deps[p] = true
			}
			if !deps["github.com/acmebank/authserver/shared/oauth"] {
				t.Fatalf("go list -deps ./%s does not list shared/oauth: %s", fn, out)
			}
			for _, p := range append(extra, everywhere...) {
				if deps[p] {
					t.Errorf("%s links %s", fn, p)
				}
			}
		})
	}
}
