package ciba

import (
	"context"
	"encoding/json"

	"github.com/acmebank/authserver/shared/outbound"
)

// HTTPPinger is the Pinger of a deployment: the ping callback of CIBA Core 10.2 through
// shared/outbound's poster (https only, public addresses only outside tests, each attempt and
// the whole bounded, a failing server retried as logout's deliveries are).
type HTTPPinger struct {
	poster *outbound.Poster
}

// NewHTTPPinger returns the Pinger posting with o (AllowPrivate from
// AUTH_JWKS_URI_ALLOW_PRIVATE, as logout's Sender).
func NewHTTPPinger(o outbound.Options) *HTTPPinger {
	return &HTTPPinger{poster: outbound.New(o)}
}

var _ Pinger = (*HTTPPinger)(nil)

// Ping POSTs {"auth_req_id": …} as application/json to endpoint with notificationToken as
// its bearer token (CIBA Core 10.2); any 2xx delivers it (the client answers 204, or 200). The
// error never carries the auth_req_id or the token.
func (p *HTTPPinger) Ping(ctx context.Context, endpoint, notificationToken, authReqID string) error {
	body, err := json.Marshal(struct {
		AuthReqID string `json:"auth_req_id"`
	}{authReqID})
	if err != nil {
		return err
	}
	_, err = p.poster.Post(ctx, outbound.Message{
		Name: "the backchannel_client_notification_endpoint", URL: endpoint,
		ContentType: "application/json", Body: string(body), Bearer: notificationToken,
	})
	return err
}
