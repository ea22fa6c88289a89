package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

// TestClients_RequireSignedRequestObject: --require-signed-request-object (RFC 9101 10.5
// require_signed_request_object) registers a private_key_jwt client whose pushed requests must
// be signed request objects; update sets and clears it; a client without registered keys is
// refused it, at create and at update, and nothing is stored.
func TestClients_RequireSignedRequestObject(t *testing.T) {
	tl := embeddedTool(t)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	b, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Use: "sig"}}})
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwks, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var signed createdClient
	tl.okJSON(&signed, "", "clients", "create", "--id", "jar", "--name", "JAR", "--redirect-uri", "https://j.example/cb", "--scope", "openid",
		"--auth-method", "private_key_jwt", "--jwks-file", jwks, "--require-signed-request-object")
	if !signed.Client.RequireSignedRequestObject {
		t.Fatal("created with --require-signed-request-object: require_signed_request_object is false")
	}
	var updated clientView
	tl.okJSON(&updated, "", "clients", "update", "jar", "--require-signed-request-object=false")
	if updated.RequireSignedRequestObject {
		t.Fatal("clients update --require-signed-request-object=false did not clear it")
	}
	tl.okJSON(&updated, "", "clients", "update", "jar", "--require-signed-request-object")
	if !updated.RequireSignedRequestObject {
		t.Fatal("clients update --require-signed-request-object did not set it")
	}

	if _, errOut, code := tl.run("", "clients", "create", "--id", "nokeys", "--name", "No keys", "--redirect-uri", "https://n.example/cb",
		"--scope", "openid", "--require-signed-request-object"); code != exitUsage || !strings.Contains(errOut, "require_signed_request_object needs") {
		t.Fatalf("a secret client with --require-signed-request-object: exit %d, stderr %q", code, errOut)
	}
	if _, _, code := tl.run("", "clients", "show", "nokeys"); code == exitOK {
		t.Fatal("the refused registration was stored")
	}
	var plain createdClient
	tl.okJSON(&plain, "", "clients", "create", "--id", "plain", "--name", "Plain", "--redirect-uri", "https://p.example/cb", "--scope", "openid")
	if _, errOut, code := tl.run("", "clients", "update", "plain", "--require-signed-request-object"); code != exitUsage || !strings.Contains(errOut, "require_signed_request_object needs") {
		t.Fatalf("update of a secret client: exit %d, stderr %q", code, errOut)
	}
	var shown clientView
	tl.okJSON(&shown, "", "clients", "show", "plain")
	if shown.RequireSignedRequestObject {
		t.Fatal("the refused update was stored")
	}
}
