package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/acmebank/authserver/shared/config"
)

// TestClients_JWKSURIIsFetchedAtRegistration: clients create and update --jwks-uri fetch the
// URI before storing anything: with AUTH_JWKS_URI_ALLOW_PRIVATE at its default a loopback host
// is refused (never reached), with the test setting on the fetch is made and an untrusted
// certificate refused; the exit is a usage error saying why, and nothing is stored or changed.
// (The successful registration, which needs the host's certificate trusted, is
// TestJWKSURI_PrivateKeyJWTCodeFlowWithKeysFetchedFromTheClient through the same admin call.)
func TestClients_JWKSURIIsFetchedAtRegistration(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	set, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Use: "sig"}}})
	var hits atomic.Int64
	host := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Write(set)
	}))
	defer host.Close()
	uri := host.URL + "/jwks.json"
	tl := embeddedTool(t)
	tl.ok("", "clients", "create", "--id", "tpp", "--name", "TPP", "--redirect-uri", "https://tpp.example/cb", "--scope", "openid")
	create := []string{"clients", "create", "--id", "keyed", "--name", "Keyed", "--redirect-uri", "https://tpp.example/cb", "--scope", "openid",
		"--auth-method", "private_key_jwt", "--jwks-uri", uri}
	for _, tc := range []struct {
		allowPrivate string
		want         string
	}{{"", "not public"}, {"true", "certificate"}} {
		if tc.allowPrivate != "" {
			tl.env[config.EnvJWKSURIAllowPrivate] = tc.allowPrivate
		}
		if _, errOut, code := tl.run("", create...); code != exitUsage || !strings.Contains(errOut, "jwks_uri "+uri+" is refused") || !strings.Contains(errOut, tc.want) {
			t.Fatalf("create, %s=%q: exit %d, stderr %q, want a usage error saying %q", config.EnvJWKSURIAllowPrivate, tc.allowPrivate, code, errOut, tc.want)
		}
		if _, _, code := tl.run("", "clients", "show", "keyed"); code == exitOK {
			t.Fatal("the refused registration was stored")
		}
		if _, errOut, code := tl.run("", "clients", "update", "tpp", "--auth-method", "private_key_jwt", "--jwks-uri", uri); code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Fatalf("update: exit %d, stderr %q", code, errOut)
		}
		var v clientView
		tl.okJSON(&v, "", "clients", "show", "tpp")
		if v.AuthMethod == "private_key_jwt" || v.JWKSURI != "" {
			t.Fatalf("the refused update changed the client: %+v", v)
		}
	}
	if hits.Load() != 0 {
		t.Fatalf("the loopback host was reached %d times", hits.Load())
	}
}
