package tokenendpoint

import (
	"net/url"
	"slices"
	"testing"

	"github.com/acmebank/authserver/shared/oauth"
)

// TestRegistry_GrantTypesAreTheRegisteredOnes: GrantTypes (what discovery advertises and
// client registration accepts) is the registry's keys, sorted; each registered grant has its
// issue function.
func TestRegistry_GrantTypesAreTheRegisteredOnes(t *testing.T) {
	want := []string{oauth.GrantTypeAuthorizationCode, oauth.GrantTypeClientCredentials, oauth.GrantTypeRefreshToken, oauth.GrantTypeCIBA}
	if got := GrantTypes(); !slices.Equal(got, want) {
		t.Fatalf("GrantTypes() = %v, want %v", got, want)
	}
	for name, g := range registry {
		if g.issue == nil {
			t.Errorf("grant %s has no issue function", name)
		}
	}
}

// TestRegistry_UnregisteredGrantTypeIsUnsupported: a grant type outside the registry is
// unsupported_grant_type, a missing one invalid_request.
func TestRegistry_UnregisteredGrantTypeIsUnsupported(t *testing.T) {
	f := newFixture(t)
	cred := f.client(t, "app", nil)
	for _, gt := range []string{"password", "implicit", "urn:ietf:params:oauth:grant-type:device_code"} {
		_, err := f.token(cred, url.Values{"grant_type": {gt}})
		wantCode(t, err, oauth.ErrCodeUnsupportedGrantType)
	}
	_, err := f.token(cred, url.Values{})
	wantCode(t, err, oauth.ErrCodeInvalidRequest)
}

// TestRegistry_OneTimeValuesGoToTheHomeOfWhatTheGrantSpends: a grant that spends a code or
// a refresh token or an auth_req_id records the request's one-time values at its home; one that spends nothing
// (client_credentials) in the local replica, whatever its parameters carry.
func TestRegistry_OneTimeValuesGoToTheHomeOfWhatTheGrantSpends(t *testing.T) {
	tests := []struct {
		params url.Values
		want   string
	}{
		{url.Values{"grant_type": {"authorization_code"}, "code": {"ac_eu-west-1.x"}}, "eu-west-1"},
		{url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"rt_us-east-1.x"}}, "us-east-1"},
		{url.Values{"grant_type": {oauth.GrantTypeCIBA}, "auth_req_id": {"ciba_eu-central-1.x"}, "code": {"ac_eu-west-1.x"}}, "eu-central-1"},
		{url.Values{"grant_type": {"client_credentials"}, "code": {"ac_eu-west-1.x"}, "refresh_token": {"rt_eu-west-1.x"}}, ""},
		{url.Values{"grant_type": {"password"}, "code": {"ac_eu-west-1.x"}}, ""},
	}
	for _, tc := range tests {
		if got := homeOf(tc.params); got != tc.want {
			t.Errorf("homeOf(%v) = %q, want %q", tc.params, got, tc.want)
		}
	}
}
