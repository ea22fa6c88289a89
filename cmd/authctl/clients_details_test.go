package main

import (
	"strings"
	"testing"
)

// TestClients_AuthorizationDetailsTypes: --authorization-details-types sets the RFC 9396 types a
// client may ask for at creation and replaces them at update (shown by clients show); a type the
// deployment does not declare is refused and nothing changes.
func TestClients_AuthorizationDetailsTypes(t *testing.T) {
	tl := embeddedTool(t)
	var v clientView
	tl.ok("", "clients", "create", "--id", "tpp", "--name", "TPP", "--redirect-uri", "https://tpp.example/cb",
		"--scope", "openid", "--authorization-details-types", "payment_initiation,account_information")
	tl.okJSON(&v, "", "clients", "show", "tpp", "-o", "json")
	if strings.Join(v.AuthorizationDetailsTypes, " ") != "payment_initiation account_information" {
		t.Fatalf("after create: %v", v.AuthorizationDetailsTypes)
	}
	if out := tl.ok("", "clients", "show", "tpp"); !strings.Contains(out, "authorization_details_types:") {
		t.Errorf("show does not list the types:\n%s", out)
	}
	tl.okJSON(&v, "", "clients", "update", "tpp", "--authorization-details-types", "account_information")
	if strings.Join(v.AuthorizationDetailsTypes, " ") != "account_information" {
		t.Fatalf("after update: %v", v.AuthorizationDetailsTypes)
	}
	for _, args := range [][]string{
		{"clients", "update", "tpp", "--authorization-details-types", "openid_credential"},
		{"clients", "update", "tpp", "--authorization-details-types", "account_information,account_information"},
		{"clients", "create", "--id", "bad", "--name", "Bad", "--redirect-uri", "https://bad.example/cb", "--scope", "openid", "--authorization-details-types", "payments"},
	} {
		if _, errOut, code := tl.run("", args...); code != exitUsage || !strings.Contains(errOut, "authorization_details_types") {
			t.Errorf("%v: exit %d %q, want a usage error naming the metadata", args, code, errOut)
		}
	}
	tl.okJSON(&v, "", "clients", "show", "tpp", "-o", "json")
	if strings.Join(v.AuthorizationDetailsTypes, " ") != "account_information" {
		t.Fatalf("a refused update changed the client: %v", v.AuthorizationDetailsTypes)
	}
}
