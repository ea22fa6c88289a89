package config

import (
	"strings"
	"testing"
	"time"
)

func lookup(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestFromLookup_DefaultsAndDerivedIssuer(t *testing.T) {
	c, err := FromLookup(lookup(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Issuer != "http://127.0.0.1:8080/v2/authentication/oauth2" || c.Lifetimes.AccessToken != time.Hour || c.Store != "embedded" {
		t.Fatalf("%+v", c)
	}
	c, err = FromLookup(lookup(map[string]string{EnvBaseURL: "https://auth.bank.example/"}))
	if err != nil || c.Issuer != "https://auth.bank.example/v2/authentication/oauth2" || !c.Secure() {
		t.Fatalf("%v %+v", err, c)
	}
}

func TestFromLookup_Overrides(t *testing.T) {
	c, err := FromLookup(lookup(map[string]string{EnvAccessTTL: "15m", EnvGrantTTL: "30d", EnvRefreshTTL: "60d",
		EnvIssuer: "https://id.bank.example", EnvNoSync: "true", EnvLoginMaxFails: "3"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Lifetimes.AccessToken != 15*time.Minute || c.Lifetimes.Grant != 30*24*time.Hour || c.Issuer != "https://id.bank.example" ||
		!c.NoSync || c.LoginMaxFailures != 3 {
		t.Fatalf("%+v", c)
	}
	if c.Lifetimes.RefreshToken != c.Lifetimes.Grant {
		t.Fatalf("a refresh token outliving its grant was not capped: %v", c.Lifetimes.RefreshToken)
	}
}

func TestFromLookup_RefusesNonsense(t *testing.T) {
	for k, v := range map[string]string{EnvAccessTTL: "soon", EnvCodeTTL: "-1m", EnvStore: "redis", EnvKeyBackend: "vault",
		EnvBaseURL: "auth.example", EnvLoginMaxFails: "0", EnvNoSync: "perhaps"} {
		if _, err := FromLookup(lookup(map[string]string{k: v})); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: err %v", k, v, err)
		}
	}
	if _, err := FromLookup(lookup(map[string]string{EnvStore: "dynamodb"})); err == nil {
		t.Error("dynamodb without a table was accepted")
	}
}
