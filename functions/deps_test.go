// Package functions holds the test of what each Lambda function links.
package functions

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

const (
	mod         = "github.com/acmebank/authserver/"
	pagesPkg    = mod + "shared/pages"
	webPkg      = mod + "shared/web"
	signinPkg   = mod + "shared/signin"
	embeddedPkg = mod + "shared/store/embedded"
	localKeyPkg = mod + "shared/keys/localkey"
	kmsPkg      = "github.com/aws/aws-sdk-go-v2/service/kms"
	bboltPkg    = "go.etcd.io/bbolt"
	templatePkg = "html/template"
	webauthnMod = "github.com/go-webauthn/"
)

// deps lists the packages function fn links, as the Makefile builds it (GOOS=linux
// GOARCH=arm64, -tags lambda.norpc).
func deps(t *testing.T, fn string) map[string]bool {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-tags", "lambda.norpc", "./"+fn)
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./%s: %v", fn, err)
	}
	d := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		d[p] = true
	}
	if !d[mod+"shared/oauth"] {
		t.Fatalf("go list -deps ./%s does not list shared/oauth: %s", fn, out)
	}
	return d
}

// linksUnder reports the packages of d under prefix.
func linksUnder(d map[string]bool, prefix string) []string {
	var got []string
	for p := range d {
		if strings.HasPrefix(p, prefix) {
			got = append(got, p)
		}
	}
	return got
}

// Each function links only the adapters its main wires. No function links the embedded store
// (bbolt); the functions of the JSON endpoints and the authorizer link no pages: no
// html/template, no shared/pages, shared/web or shared/signin, no go-webauthn; the authorizer
// and jwks link no KMS client, and only the functions that sign or rotate keys (token, and
// authorize and introspect for their signed responses, JARM and RFC 9701; grants for consent
// receipts; rotatekeys) or unwrap
// the DPoP nonce keys (token, par) link KMS (and, through the key backend's opener, the local
// key files).
func TestFunctions_LinkOnlyTheirAdapters(t *testing.T) {
	noPages := []string{templatePkg, pagesPkg, webPkg, signinPkg}
	noKMS := []string{kmsPkg, localKeyPkg} // no key backend at all
	forbidden := map[string][][]string{
		"authorizer": {noPages, noKMS},
		"jwks":       {noPages, noKMS},
		"token":      {noPages},
		"revoke":     {noPages, noKMS},
		"introspect": {noPages},
		"par":        {noPages},
		"userinfo":   {noPages, noKMS},
		"authorize":  {},
		"rotatekeys": {noPages},
		"health":     {noPages, noKMS},
		"grants":     {noPages},
		// register validates with the operator's rules (shared/admin), which link the user's
		// authentication (go-webauthn among it); it signs nothing.
		"register": {noPages, noKMS},
		// backchannel (CIBA) verifies an id_token_hint against the key registry in the
		// store, and signs nothing.
		"backchannel": {noPages, noKMS},
	}
	noWebAuthn := map[string]bool{"authorizer": true, "jwks": true, "token": true, "revoke": true,
		"introspect": true, "par": true, "userinfo": true, "health": true, "grants": true}
	for fn, lists := range forbidden {
		t.Run(fn, func(t *testing.T) {
			d := deps(t, fn)
			for _, p := range append([]string{embeddedPkg, bboltPkg}, concat(lists)...) {
				if d[p] {
					t.Errorf("%s links %s", fn, p)
				}
			}
			if want := fn == "token" || fn == "rotatekeys"; want && !d[kmsPkg] {
				t.Errorf("%s does not link the KMS client it signs with", fn)
			}
			if !noWebAuthn[fn] {
				return
			}
			if got := linksUnder(d, webauthnMod); len(got) > 0 {
				t.Errorf("%s links go-webauthn: %v", fn, got)
			}
		})
	}
	// A new function is held to this test too: every functions/<name> directory is listed.
	dirs, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range dirs {
		if _, listed := forbidden[e.Name()]; e.IsDir() && !listed {
			t.Errorf("functions/%s is not listed in this test: say what it must not link", e.Name())
		}
	}
}

func concat(lists [][]string) []string {
	var all []string
	for _, l := range lists {
		all = append(all, l...)
	}
	return all
}
