package oauth

import (
	"context"
	"errors"
	"log/slog"
)

// BackchannelExchange is a token request with grant_type=urn:openid:params:grant-type:ciba
// (CIBA Core 10.1): a poll of the request an auth_req_id names, by the client that started it.
type BackchannelExchange struct {
	AuthReqID string
	// CertThumbprint and DPoPJKT are this request's mutual-TLS certificate and DPoP key, if
	// any: the tokens are bound to them (RFC 8705 3, RFC 9449 5), not to the authentication
	// request's, which may have been sent otherwise.
	CertThumbprint string
	DPoPJKT        string
	// Once are the request's one-time values (AuthenticateTokenRequest), recorded in the
	// consuming write of an approved request, or not at all.
	Once []OneTime
}

// ExchangeBackchannel answers a poll of a CIBA request (CIBA Core 10.1, 11) by an
// authenticated client registered for the grant. A poll is one store request
// (PollBackchannelRequest) at the auth_req_id's home, whose answer decides:
//
//   - unknown, forgotten (past KeepUntil) or another client's: invalid_grant;
//   - sooner than the interval after the last poll of a pending request: slow_down;
//   - pending past ExpiresAt: expired_token; pending otherwise: authorization_pending;
//   - denied: access_denied;
//   - approved: consumed once (ConsumeBackchannelRequest, with the request's one-time values
//     in the same write), then issued as a code exchange issues (the grant the device's
//     decision built, the payment link checked again, the tokens bound to this request's
//     certificate or DPoP key, an id_token per the scopes);
//   - issued before, or consumed by a racing poll first: invalid_grant, and nothing is
//     revoked (backchannelReused says why this differs from a code presented twice).
//
// A refused poll writes nothing but, for a pending request, the time of its next poll.
func (s *Service) ExchangeBackchannel(ctx context.Context, client *Client, req BackchannelExchange) (*TokenResponse, error) {
	if req.AuthReqID == "" {
		return nil, InvalidRequest("the auth_req_id parameter is required")
	}
	if s.Backchannel == nil {
		return nil, UnsupportedGrantType("this deployment does not serve the %s grant", GrantTypeCIBA)
	}
	now := s.now()
	// The request's single-use writes go to the store of the home that issued the auth_req_id.
	ctx = WithHome(ctx, HomeOf(req.AuthReqID))
	id := BackchannelRequestID(req.AuthReqID)
	r, err := s.Backchannel.PollBackchannelRequest(ctx, id, client.ID, now)
	switch {
	case errors.Is(err, ErrSlowDown):
		return nil, SlowDown("polled sooner than the interval: wait %d seconds between polls", r.Interval)
	case errors.Is(err, ErrNotFound):
		return nil, InvalidGrant("the auth_req_id is invalid or has expired")
	case err != nil:
		return nil, AsError(err)
	}
	switch r.State {
	case CIBAPending:
		if !now.Before(r.ExpiresAt) {
			return nil, ExpiredToken("the auth_req_id expired before the customer decided")
		}
		return nil, AuthorizationPending("the customer has not decided yet")
	case CIBADenied:
		return nil, DeniedAtToken("the customer denied the request")
	case CIBAIssued:
		return nil, s.backchannelReused(ctx, req.Once)
	case CIBAApproved:
	default:
		return nil, ServerError(errors.New("backchannel request in an unknown state " + r.State))
	}
	r, err = s.Backchannel.ConsumeBackchannelRequest(ctx, id, client.ID, now, onces(req.Once)...)
	if refusal := replayRefusal(req.Once, err); refusal != nil {
		return nil, refusal
	}
	switch {
	case errors.Is(err, ErrUsed):
		return nil, s.backchannelReused(ctx, req.Once)
	case errors.Is(err, ErrNotFound):
		return nil, InvalidGrant("the auth_req_id is invalid or has expired")
	case err != nil:
		return nil, AsError(err)
	}
	if r.Grant == nil {
		return nil, ServerError(errors.New("approved backchannel request without its grant"))
	}
	g := *r.Grant
	if err := checkPaymentLink(g.AuthorizationDetails, g.PaymentEvidence); err != nil {
		// Dynamic linking (dynamic_linking.go): the details differ from those the customer's
		// approval is bound to.
		s.audit(ctx, "payment_link_broken", &g)
		return nil, InvalidGrant("the payment's authorization details do not match what the customer confirmed")
	}
	g.CertThumbprint, g.DPoPJKT = req.CertThumbprint, req.DPoPJKT
	is := s.newIssuance(newTokens{Grant: g, Scopes: g.Scopes, Now: now, FromCode: true})
	resp, err := s.issue(ctx, is, g.Nonce, client.IDTokenSignedResponseAlg, now)
	if err != nil {
		return nil, err
	}
	s.audit(ctx, "ciba_issued", &g, slog.String("scope", resp.Scope), slog.Bool("cert_bound", g.CertThumbprint != ""), slog.Bool("dpop_bound", g.DPoPJKT != ""))
	return resp, nil
}

// backchannelReused answers a poll of a request whose tokens were issued: invalid_grant. The
// request's one-time values are recorded first, so that a poll replayed whole is refused for
// its jti. Unlike a code presented twice (codeReused, RFC 6749 4.1.2), nothing is revoked: a
// code travels through the browser, where a second presentation is evidence of theft, but an
// auth_req_id never leaves the client and the server, and a poll needs the client's own
// authentication, so a second poll is the client's duplicate (a ping handler racing its
// polling loop), and revoking would cost the customer an approval for nothing.
func (s *Service) backchannelReused(ctx context.Context, once []OneTime) error {
	if err := s.Record(ctx, once...); err != nil {
		return err
	}
	return InvalidGrant("the auth_req_id has already been used")
}
