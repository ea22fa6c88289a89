package tokenendpoint

import (
	"net/url"
	"testing"

	"github.com/acmebank/authserver/shared/oauth"
)

// TestAuthorizationCode_UnknownCodeIsInvalidGrant: the registered grant reaches the code
// exchange (an unknown code is invalid_grant, a missing one invalid_request), for a client
// with the default grant types.
func TestAuthorizationCode_UnknownCodeIsInvalidGrant(t *testing.T) {
	f := newFixture(t)
	cred := f.client(t, "app", nil)
	_, err := f.token(cred, url.Values{"grant_type": {"authorization_code"}, "code": {"ac_bogus"}, "redirect_uri": {"https://app.example/cb"}})
	wantCode(t, err, oauth.ErrCodeInvalidGrant)
	_, err = f.token(cred, url.Values{"grant_type": {"authorization_code"}})
	wantCode(t, err, oauth.ErrCodeInvalidRequest)
}

// TestAuthorizationCode_RefusedToAClientRegisteredWithoutIt: a client whose grant_types leave
// out authorization_code gets unauthorized_client before any code is looked at.
func TestAuthorizationCode_RefusedToAClientRegisteredWithoutIt(t *testing.T) {
	f := newFixture(t)
	cred := f.client(t, "m2m", registeredForCC)
	_, err := f.token(cred, url.Values{"grant_type": {"authorization_code"}, "code": {"ac_bogus"}, "redirect_uri": {"https://app.example/cb"}})
	wantCode(t, err, oauth.ErrCodeUnauthorizedClient)
}
