// Package revocation is the revocation endpoint's use case (RFC 7009): the client
// authenticated as at the token endpoint, then the token domain's Revoke.
package revocation

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

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
	if d.Tokens == nil {
		return nil, errors.New("revocation: missing Tokens")
	}
	var missing []string
	if d.Tokens.Clients == nil {
		missing = append(missing, "Tokens.Clients")
	}
	if d.Tokens.Grants == nil {
		missing = append(missing, "Tokens.Grants")
	}
	if d.Tokens.Replay == nil {
		missing = append(missing, "Tokens.Replay")
	}
	if d.Tokens.Clock == nil {
		missing = append(missing, "Tokens.Clock")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("revocation: missing %s", strings.Join(missing, ", "))
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
