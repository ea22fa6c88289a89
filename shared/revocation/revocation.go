// Package revocation is the revocation endpoint's use case (RFC 7009): the client
// authenticated as at the token endpoint, then the token domain's Revoke.
package revocation

import (
	"context"
	"net/url"

	"github.com/acmebank/authserver/shared/oauth"
)

// Deps are what revocation needs: the token domain, with its clients, grants, replay store and
// clock.
type Deps struct {
	Tokens *oauth.Service
}

// Revoker is the revocation endpoint's use case.
type Revoker struct {
	tokens *oauth.Service
}

// New returns the revocation use case over d, or an error naming every dependency it lacks.
func New(d Deps) (*Revoker, error) {
	if err := d.Tokens.Serves("revocation", false); err != nil {
		return nil, err
	}
	return &Revoker{tokens: d.Tokens}, nil
}

// Revoke authenticates the client and revokes the token its body names (token,
// token_type_hint). A token that is unknown or another client's is no error (RFC 7009 2.2).
func (v *Revoker) Revoke(ctx context.Context, params url.Values, cred oauth.ClientCredentials) error {
	client, _, err := v.tokens.AuthenticateRequest(ctx, oauth.ClientRequest{Credentials: cred})
	if err != nil {
		return err
	}
	return v.tokens.Revoke(ctx, client, params.Get("token"), params.Get("token_type_hint"))
}
