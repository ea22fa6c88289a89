package tokenendpoint

import (
	"context"
	"net/url"

	"github.com/acmebank/authserver/shared/oauth"
)

// grantClientCredentials is the client_credentials grant (RFC 6749 4.4): tokens for the client
// itself, with no user, in shared/oauth's flow_client_credentials.go. It spends nothing: the
// request's one-time values are recorded with the issuance's write.
var grantClientCredentials = grant{issue: (*Endpoint).issueClientCredentials}

// issueClientCredentials runs the grant with the request's parameters.
func (e *Endpoint) issueClientCredentials(ctx context.Context, client *oauth.Client, v url.Values, b binding) (*oauth.TokenResponse, error) {
	return e.tokens.ClientCredentials(ctx, client, oauth.ClientCredentialsRequest{
		Scope: v.Get("scope"), AuthorizationDetails: v.Get("authorization_details"),
		CertThumbprint: b.cert, DPoPJKT: b.jkt, Once: b.once,
	})
}
