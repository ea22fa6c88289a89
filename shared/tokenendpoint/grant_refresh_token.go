package tokenendpoint

import (
	"context"
	"net/url"

	"github.com/acmebank/authserver/shared/oauth"
)

// grantRefreshToken is the refresh_token grant (RFC 6749 6): it spends (or keeps) the refresh
// token, in shared/oauth's flow_refresh.go.
var grantRefreshToken = grant{spends: "refresh_token", issue: (*Endpoint).refresh}

// refresh runs the refresh with the request's parameters.
func (e *Endpoint) refresh(ctx context.Context, client *oauth.Client, v url.Values, b binding) (*oauth.TokenResponse, error) {
	// The documented usage sends redirect_uri with a refresh; then it must be registered.
	if ru := v.Get("redirect_uri"); ru != "" && !client.HasRedirectURI(ru) {
		return nil, oauth.InvalidRequest("the redirect_uri is not registered for this client")
	}
	return e.tokens.Refresh(ctx, client, oauth.RefreshRequest{
		RefreshToken: v.Get("refresh_token"), Scope: v.Get("scope"), AuthorizationDetails: v.Get("authorization_details"),
		CertThumbprint: b.cert, DPoPJKT: b.jkt, Once: b.once,
	})
}
