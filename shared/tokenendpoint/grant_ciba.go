package tokenendpoint

import (
	"context"
	"net/url"

	"github.com/acmebank/authserver/shared/oauth"
)

// grantCIBA is CIBA's grant (CIBA Core 10.1): a poll of the request the auth_req_id names, in
// shared/oauth's flow_ciba.go. It spends the auth_req_id: the request's one-time values are
// recorded at its home, in the write that consumes an approved request.
var grantCIBA = grant{spends: "auth_req_id", issue: (*Endpoint).exchangeBackchannel}

// exchangeBackchannel runs the poll with the request's parameters.
func (e *Endpoint) exchangeBackchannel(ctx context.Context, client *oauth.Client, v url.Values, b binding) (*oauth.TokenResponse, error) {
	return e.tokens.ExchangeBackchannel(ctx, client, oauth.BackchannelExchange{
		AuthReqID: v.Get("auth_req_id"), CertThumbprint: b.cert, DPoPJKT: b.jkt, Once: b.once,
	})
}
