package main

import (
	"strings"
	"testing"
)

// TestClients_GrantTypes: a client shows the default grant types until --grant-types sets its
// own at creation or replaces them at update (empty: the default again); a grant type the token
// endpoint does not serve, or one listed twice, is refused and nothing changes.
func TestClients_GrantTypes(t *testing.T) {
	tl := embeddedTool(t)
	var v clientView
	tl.ok("", "clients", "create", "--id", "m2m", "--name", "M2M", "--redirect-uri", "https://m2m.example/cb",
		"--scope", "bank:transfers:write", "--grant-types", "client_credentials")
	tl.okJSON(&v, "", "clients", "show", "m2m", "-o", "json")
	if strings.Join(v.GrantTypes, " ") != "client_credentials" {
		t.Fatalf("after create: %v", v.GrantTypes)
	}
	if out := tl.ok("", "clients", "show", "m2m"); !strings.Contains(out, "grant_types:") {
		t.Errorf("show does not list the grant types:\n%s", out)
	}
	tl.okJSON(&v, "", "clients", "update", "m2m", "--grant-types", "client_credentials,authorization_code")
	if strings.Join(v.GrantTypes, " ") != "client_credentials authorization_code" {
		t.Fatalf("after update: %v", v.GrantTypes)
	}
	for _, args := range [][]string{
		{"clients", "update", "m2m", "--grant-types", "password"},
		{"clients", "update", "m2m", "--grant-types", "client_credentials,client_credentials"},
		{"clients", "create", "--id", "bad", "--name", "Bad", "--redirect-uri", "https://bad.example/cb", "--scope", "openid", "--grant-types", "implicit"},
	} {
		if _, errOut, code := tl.run("", args...); code != exitUsage || !strings.Contains(errOut, "grant_types") {
			t.Errorf("%v: exit %d %q, want a usage error naming grant_types", args, code, errOut)
		}
	}
	tl.okJSON(&v, "", "clients", "show", "m2m", "-o", "json")
	if strings.Join(v.GrantTypes, " ") != "client_credentials authorization_code" {
		t.Fatalf("a refused update changed the client: %v", v.GrantTypes)
	}
	tl.okJSON(&v, "", "clients", "update", "m2m", "--grant-types", "")
	if strings.Join(v.GrantTypes, " ") != "authorization_code refresh_token" {
		t.Fatalf("after clearing: %v, want the default", v.GrantTypes)
	}
}
