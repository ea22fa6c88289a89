package main

import (
	"strings"
	"testing"
)

// TestClients_LogoutSettings: --post-logout-redirect-uri, --backchannel-logout-uri,
// --backchannel-logout-session-required and --logout-revokes-grants set a client's logout
// settings at creation and change them at update (shown by clients show -o json); an http
// back-channel URI or a post-logout URI with a fragment is refused and nothing changes.
func TestClients_LogoutSettings(t *testing.T) {
	tl := embeddedTool(t)
	var v clientView
	tl.ok("", "clients", "create", "--id", "rp", "--name", "RP", "--redirect-uri", "https://rp.example/cb", "--scope", "openid",
		"--post-logout-redirect-uri", "https://rp.example/bye", "--backchannel-logout-uri", "https://rp.example/bc",
		"--backchannel-logout-session-required", "--logout-revokes-grants")
	tl.okJSON(&v, "", "clients", "show", "rp", "-o", "json")
	if strings.Join(v.PostLogoutRedirectURIs, " ") != "https://rp.example/bye" || v.BackchannelLogoutURI != "https://rp.example/bc" ||
		!v.BackchannelLogoutSessionRequired || !v.LogoutRevokesGrants {
		t.Fatalf("after create: %+v", v)
	}
	v = clientView{} // a fresh view: omitted members must read as unset
	tl.okJSON(&v, "", "clients", "update", "rp", "--backchannel-logout-uri", "", "--logout-revokes-grants=false",
		"--post-logout-redirect-uri", "https://rp.example/bye2")
	if v.BackchannelLogoutURI != "" || v.LogoutRevokesGrants || strings.Join(v.PostLogoutRedirectURIs, " ") != "https://rp.example/bye2" {
		t.Fatalf("after update: %+v", v)
	}
	for _, args := range [][]string{
		{"clients", "update", "rp", "--backchannel-logout-uri", "http://rp.example/bc"},
		{"clients", "update", "rp", "--post-logout-redirect-uri", "https://rp.example/bye#x"},
	} {
		if _, errOut, code := tl.run("", args...); code != exitUsage || !strings.Contains(errOut, "logout") {
			t.Errorf("%v: exit %d %q, want a usage error", args, code, errOut)
		}
	}
	v = clientView{}
	tl.okJSON(&v, "", "clients", "show", "rp", "-o", "json")
	if v.BackchannelLogoutURI != "" || strings.Join(v.PostLogoutRedirectURIs, " ") != "https://rp.example/bye2" {
		t.Fatalf("a refused update changed the client: %+v", v)
	}
}
