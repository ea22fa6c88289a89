package config

import (
	"strings"
	"testing"
)

// TestFromLookup_RegistrationDirectoriesRefuseWhatWouldTrustTheWrongKeys: the directory
// setting is parsed at load and refuses, naming the setting, every entry that would trust
// nothing or the wrong thing; a valid one is kept as given.
func TestFromLookup_RegistrationDirectoriesRefuseWhatWouldTrustTheWrongKeys(t *testing.T) {
	const jwks = `{"keys":[{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0","kid":"d1"}]}`
	for _, tc := range []struct{ name, v string }{
		{"not JSON", `[{`},
		{"an object, not an array", `{"issuer":"https://d.example","jwks_uri":"https://d.example/jwks"}`},
		{"no issuer", `[{"jwks_uri":"https://d.example/jwks"}]`},
		{"a relative issuer", `[{"issuer":"directory","jwks_uri":"https://d.example/jwks"}]`},
		{"no keys", `[{"issuer":"https://d.example"}]`},
		{"jwks and jwks_uri", `[{"issuer":"https://d.example","jwks_uri":"https://d.example/jwks","jwks":` + jwks + `}]`},
		{"an http jwks_uri", `[{"issuer":"https://d.example","jwks_uri":"http://d.example/jwks"}]`},
		{"an empty jwks", `[{"issuer":"https://d.example","jwks":{"keys":[]}}]`},
		{"an unknown profile", `[{"issuer":"https://d.example","jwks_uri":"https://d.example/jwks","profile":"fapi1"}]`},
		{"an unknown field", `[{"issuer":"https://d.example","jwks_url":"https://d.example/jwks"}]`},
		{"an issuer twice", `[{"issuer":"https://d.example","jwks_uri":"https://d.example/a"},{"issuer":"https://d.example","jwks_uri":"https://d.example/b"}]`},
	} {
		_, err := FromLookup(lookup(map[string]string{EnvRegistrationDirectories: tc.v}))
		if err == nil || !strings.Contains(err.Error(), EnvRegistrationDirectories) {
			t.Errorf("%s: %v, want a refusal naming %s", tc.name, err, EnvRegistrationDirectories)
		}
	}
	c, err := FromLookup(lookup(map[string]string{EnvRegistration: "on", EnvRegistrationDirectories: `[{"issuer":"https://d.example","jwks":` + jwks + `,"profile":"fapi2"}]`}))
	if err != nil || !c.Registration || len(c.RegistrationDirectories) != 1 || c.RegistrationDirectories[0].Profile != "fapi2" {
		t.Fatalf("valid: %+v %v", c.RegistrationDirectories, err)
	}
	if c, err := FromLookup(lookup(nil)); err != nil || c.Registration || len(c.RegistrationDirectories) != 0 {
		t.Fatalf("default: registration %v, %d directories, %v; want off and none", c.Registration, len(c.RegistrationDirectories), err)
	}
}
