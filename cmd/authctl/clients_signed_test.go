package main

import (
	"strings"
	"testing"
)

// TestClients_SignedResponseAlgs: --authorization-response-alg and --introspection-response-alg
// set the algorithms of a client's JARM and JWT introspection responses at creation and update
// (shown by clients show, the id_token's when unset); an unknown algorithm is refused and
// nothing changes; "" goes back to the default.
func TestClients_SignedResponseAlgs(t *testing.T) {
	tl := embeddedTool(t)
	var v clientView
	tl.ok("", "clients", "create", "--id", "signed", "--name", "Signed", "--redirect-uri", "https://signed.example/cb",
		"--scope", "openid", "--id-token-alg", "PS256", "--authorization-response-alg", "ES256")
	tl.okJSON(&v, "", "clients", "show", "signed", "-o", "json")
	if v.AuthorizationSignedResponseAlg != "ES256" || v.IntrospectionSignedResponseAlg != "PS256" {
		t.Fatalf("after create: jarm %s introspection %s, want ES256 and the id_token's PS256", v.AuthorizationSignedResponseAlg, v.IntrospectionSignedResponseAlg)
	}
	if out := tl.ok("", "clients", "show", "signed"); !strings.Contains(out, "jarm_alg:") || !strings.Contains(out, "ES256") {
		t.Errorf("show does not say the JARM algorithm:\n%s", out)
	}
	tl.okJSON(&v, "", "clients", "update", "signed", "--introspection-response-alg", "RS256", "--authorization-response-alg=")
	if v.AuthorizationSignedResponseAlg != "PS256" || v.IntrospectionSignedResponseAlg != "RS256" {
		t.Fatalf("after update: jarm %s introspection %s, want PS256 (default) and RS256", v.AuthorizationSignedResponseAlg, v.IntrospectionSignedResponseAlg)
	}
	for _, args := range [][]string{
		{"clients", "update", "signed", "--authorization-response-alg", "HS256"},
		{"clients", "update", "signed", "--introspection-response-alg", "none"},
		{"clients", "create", "--id", "bad", "--name", "Bad", "--redirect-uri", "https://bad.example/cb", "--scope", "openid", "--authorization-response-alg", "RS512"},
	} {
		if _, errOut, code := tl.run("", args...); code != exitUsage || !strings.Contains(errOut, "signed_response_alg") {
			t.Errorf("%v: exit %d %q, want a usage error naming the metadata", args, code, errOut)
		}
	}
	adm := tl.ok("", "clients", "show", "signed", "-o", "json")
	if !strings.Contains(adm, `"introspection_signed_response_alg": "RS256"`) {
		t.Errorf("a refused update changed the client:\n%s", adm)
	}
}
