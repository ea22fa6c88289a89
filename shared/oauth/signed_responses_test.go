package oauth

import (
	"strings"
	"testing"
)

// TestSignedResponseAlg_ClientsChoiceElseItsIDTokenAlg: the algorithm of a client's JARM and
// JWT introspection responses is the one it registered, else its id_token algorithm, RS256
// when it chose none (JARM 3, RFC 9701 6); a FAPI 2.0 client's default is its PS256 or ES256.
func TestSignedResponseAlg_ClientsChoiceElseItsIDTokenAlg(t *testing.T) {
	fapi := fapiClient()
	fapi.IDTokenSignedResponseAlg = "ES256"
	for _, tc := range []struct {
		name              string
		c                 Client
		authz, introspect string
	}{
		{"nothing registered", Client{}, "RS256", "RS256"},
		{"id_token ES256", Client{IDTokenSignedResponseAlg: "ES256"}, "ES256", "ES256"},
		{"each its own", Client{IDTokenSignedResponseAlg: "ES256", AuthorizationSignedResponseAlg: "PS256", IntrospectionSignedResponseAlg: "RS256"}, "PS256", "RS256"},
		{"fapi2 default", fapi, "ES256", "ES256"},
	} {
		if got := tc.c.AuthorizationResponseAlg(); got != tc.authz {
			t.Errorf("%s: AuthorizationResponseAlg = %s, want %s", tc.name, got, tc.authz)
		}
		if got := tc.c.IntrospectionResponseAlg(); got != tc.introspect {
			t.Errorf("%s: IntrospectionResponseAlg = %s, want %s", tc.name, got, tc.introspect)
		}
	}
}

// TestCheckProfile_FAPI2SignedResponsesNeverRS256: a FAPI 2.0 client may not register RS256
// for its JARM or introspection responses (FAPI 2.0 Security Profile (Final) 5.4); PS256 and
// ES256 are accepted.
func TestCheckProfile_FAPI2SignedResponsesNeverRS256(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Client, string)
	}{
		{"authorization_signed_response_alg", func(c *Client, a string) { c.AuthorizationSignedResponseAlg = a }},
		{"introspection_signed_response_alg", func(c *Client, a string) { c.IntrospectionSignedResponseAlg = a }},
	} {
		c := fapiClient()
		tc.set(&c, "RS256")
		if err := c.CheckProfile(); err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("fapi2 with %s RS256: %v, want a refusal naming it", tc.name, err)
		}
		for _, ok := range FAPI2ResponseAlgs {
			c := fapiClient()
			tc.set(&c, ok)
			if err := c.CheckProfile(); err != nil {
				t.Errorf("fapi2 with %s %s refused: %v", tc.name, ok, err)
			}
		}
		plain := Client{ID: "plain"}
		tc.set(&plain, "RS256")
		if err := plain.CheckProfile(); err != nil {
			t.Errorf("a client with no profile refused %s RS256: %v", tc.name, err)
		}
	}
}
