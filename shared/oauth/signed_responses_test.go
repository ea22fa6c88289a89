package oauth

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
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

// TestSignedResponses_WithoutASignerRefusedCleanly: a deployment of the endpoint without a key
// backend refuses a JWT response mode with invalid_request in the plain query at the redirect
// URI, and a JWT introspection response with ErrNoSignedResponses (406), instead of failing
// later.
func TestSignedResponses_WithoutASignerRefusedCleanly(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := Client{ID: "plain", RedirectURIs: []string{"https://rp.example/cb"}, Scopes: []string{"openid"}}
	s := &Service{Clients: oneClient{c: c}, Clock: ClockFunc(func() time.Time { return now }), Issuer: "https://as.example",
		Lifetimes: Lifetimes{Request: time.Minute}}
	for _, mode := range []string{"jwt", "query.jwt"} {
		p, repeated := ParseAuthorizeParams(url.Values{"client_id": {"plain"}, "redirect_uri": {"https://rp.example/cb"},
			"response_type": {"code"}, "scope": {"openid"}, "state": {"s1"}, "response_mode": {mode}})
		_, _, err := s.ValidateAuthorize(context.Background(), p, repeated)
		var ae *AuthorizeError
		if !errors.As(err, &ae) || ae.Redirect == nil || ae.Err.Code != ErrCodeInvalidRequest ||
			ae.Redirect.Params.Get("error") != ErrCodeInvalidRequest || ae.Redirect.Params.Get("response") != "" || ae.Redirect.Params.Get("state") != "s1" {
			t.Fatalf("response_mode=%s without a signer: %v %+v, want invalid_request in the plain query", mode, err, ae)
		}
	}
	if _, err := s.SignIntrospection(context.Background(), &c, map[string]any{"active": false}); !errors.Is(err, ErrNoSignedResponses) || AsError(err).Status != 406 {
		t.Fatalf("SignIntrospection without a signer = %v, want ErrNoSignedResponses (406)", err)
	}
}
