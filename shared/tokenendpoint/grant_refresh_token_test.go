package tokenendpoint

import (
	"net/url"
	"testing"

	"github.com/acmebank/authserver/shared/oauth"
)

// TestRefreshToken_RedirectURIMustBeRegistered: a refresh that sends a redirect_uri the
// client did not register is invalid_request; an unknown refresh token invalid_grant.
func TestRefreshToken_RedirectURIMustBeRegistered(t *testing.T) {
	f := newFixture(t)
	cred := f.client(t, "app", nil)
	_, err := f.token(cred, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"rt_bogus"}, "redirect_uri": {"https://evil.example/cb"}})
	wantCode(t, err, oauth.ErrCodeInvalidRequest)
	_, err = f.token(cred, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"rt_bogus"}, "redirect_uri": {"https://app.example/cb"}})
	wantCode(t, err, oauth.ErrCodeInvalidGrant)
}

// TestRefreshToken_RefusedToAClientRegisteredWithoutIt: a client whose grant_types leave out
// refresh_token gets unauthorized_client.
func TestRefreshToken_RefusedToAClientRegisteredWithoutIt(t *testing.T) {
	f := newFixture(t)
	cred := f.client(t, "code-only", func(c *oauth.Client) { c.GrantTypes = []string{oauth.GrantTypeAuthorizationCode} })
	_, err := f.token(cred, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"rt_bogus"}})
	wantCode(t, err, oauth.ErrCodeUnauthorizedClient)
}
