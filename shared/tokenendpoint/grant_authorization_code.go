package tokenendpoint

import (
	"context"
	"net/url"

	"github.com/acmebank/authserver/shared/oauth"
)

// grantAuthorizationCode is the authorization_code grant (RFC 6749 4.1.3): it spends the code, in
// shared/oauth's flow_code.go.
var grantAuthorizationCode = grant{spends: "code", issue: (*Endpoint).exchangeCode}

// exchangeCode runs the code exchange with the request's parameters.
func (e *Endpoint) exchangeCode(ctx context.Context, client *oauth.Client, v url.Values, b binding) (*oauth.TokenResponse, error) {
	return e.tokens.ExchangeCode(ctx, client, oauth.CodeExchange{
		Code: v.Get("code"), RedirectURI: v.Get("redirect_uri"), CodeVerifier: v.Get("code_verifier"),
		CertThumbprint: b.cert, DPoPJKT: b.jkt, Once: b.once, AuthorizationDetails: v.Get("authorization_details"),
	})
}
