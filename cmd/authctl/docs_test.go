package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/acmebank/authserver/shared/oauth"
)

// publicJWKSFile writes a JWK Set with one public P-256 key (kid k1) and returns its path.
func publicJWKSFile(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Use: "sig"}}})
	p := filepath.Join(t.TempDir(), "tpp-jwks.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// docCommands returns every `authctl …` command line of the sh code blocks of a document,
// continuations joined, in order.
func docCommands(t *testing.T, path string) [][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cmds [][]string
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(data), -1) {
		text := strings.ReplaceAll(block[1], "\\\n", " ")
		for _, line := range strings.Split(text, "\n") {
			if w := shellWords(line); len(w) > 0 && w[0] == "authctl" {
				cmds = append(cmds, w[1:])
			}
		}
	}
	return cmds
}

// TestDocsAPI_EveryAuthctlCommandRuns runs every `authctl` command of docs/api.md's shell
// blocks, as written and in order, against a fresh embedded store (the client's key file is a
// generated public JWK Set): a documented flag that does not exist, or a documented
// registration the profile refuses, fails it. The FAPI client it registers is then stored as
// the docs say: PAR and PKCE on, and rotation as the last command left it.
func TestDocsAPI_EveryAuthctlCommandRuns(t *testing.T) {
	tl := embeddedTool(t)
	jwks := publicJWKSFile(t)
	cmds := docCommands(t, "../../docs/api.md")
	if len(cmds) < 3 {
		t.Fatalf("docs/api.md has %d authctl commands in its shell blocks, want the FAPI registration, show and update", len(cmds))
	}
	for _, args := range cmds {
		for i, a := range args {
			if a == "tpp-jwks.json" {
				args[i] = jwks
			}
		}
		tl.ok("", args...)
	}
	var v clientView
	tl.okJSON(&v, "", "clients", "show", "budget-app")
	if v.Profile != oauth.ProfileFAPI2 || !v.RequirePAR || !v.RequirePKCE || v.RefreshTokenRotation != oauth.RotationOn || v.RefreshReuseIntervalSeconds != 30 {
		t.Fatalf("the documented FAPI client is stored as %+v", v)
	}
}

// TestClients_FAPI2ImpliesPARAndDoesNotRotate: `clients create --profile fapi2` without
// --require-par stores the client with PAR on (FAPI 2.0 5.3.2.2) and without refresh token
// rotation or a retry window (FAPI 2.0 5.3.2.1); turning PAR off is refused and changes
// nothing; opting into rotation needs a retry window.
func TestClients_FAPI2ImpliesPARAndDoesNotRotate(t *testing.T) {
	tl := embeddedTool(t)
	var created createdClient
	tl.okJSON(&created, "", "clients", "create", "--id", "tpp", "--name", "TPP", "--redirect-uri", "https://tpp.example/cb", "--scope", "openid",
		"--profile", "fapi2", "--dpop", "--auth-method", "private_key_jwt", "--jwks-file", publicJWKSFile(t), "--id-token-alg", "ES256")
	if v := created.Client; !v.RequirePAR || v.RefreshTokenRotation != oauth.RotationOff || v.RefreshReuseIntervalSeconds != 0 {
		t.Fatalf("a fapi2 client without --require-par is stored with PAR %v, rotation %s, window %ds; want PAR on, rotation off, no window",
			v.RequirePAR, v.RefreshTokenRotation, v.RefreshReuseIntervalSeconds)
	}
	refused := func(what, wantErr string, args ...string) {
		t.Helper()
		if _, errOut, code := tl.run("", append([]string{"clients", "update", "tpp"}, args...)...); code != exitUsage || !strings.Contains(errOut, wantErr) {
			t.Fatalf("%s: exit %d, stderr %q", what, code, errOut)
		}
	}
	refused("PAR off for a fapi2 client", "pushed authorization requests", "--require-par=false")
	refused("rotation without a retry window", "refresh reuse interval", "--refresh-token-rotation", "on")
	refused("an unknown rotation setting", "refresh token rotation", "--refresh-token-rotation", "sometimes")
	var v clientView
	tl.okJSON(&v, "", "clients", "show", "tpp")
	if !v.RequirePAR || v.RefreshTokenRotation != oauth.RotationOff {
		t.Fatalf("refused updates changed the client: %+v", v)
	}
	tl.okJSON(&v, "", "clients", "update", "tpp", "--refresh-token-rotation", "on", "--refresh-reuse-interval", "20s")
	if v.RefreshTokenRotation != oauth.RotationOn || v.RefreshReuseIntervalSeconds != 20 {
		t.Fatalf("opting into rotation with a window: %+v", v)
	}

	// A client without a profile rotates by default, and may opt out.
	tl.okJSON(&created, "", "clients", "create", "--id", "plain", "--name", "Plain", "--redirect-uri", "https://plain.example/cb", "--scope", "openid")
	if created.Client.RefreshTokenRotation != oauth.RotationOn || created.Client.RequirePAR {
		t.Fatalf("a client without a profile: %+v", created.Client)
	}
	tl.okJSON(&v, "", "clients", "update", "plain", "--refresh-token-rotation", "off")
	if v.RefreshTokenRotation != oauth.RotationOff {
		t.Fatalf("opting out of rotation: %+v", v)
	}
}
