package oauth

import (
	"context"
	"log/slog"
)

// ClientCredentialsRequest is a token request with grant_type=client_credentials (RFC 6749
// 4.4): the client asks for a token for itself, with no user.
type ClientCredentialsRequest struct {
	// Scope is the request's scope parameter; empty asks for the client's default
	// (ClientCredentials).
	Scope string
	// AuthorizationDetails is the request's authorization_details parameter, which this grant
	// refuses: details are approved by a user.
	AuthorizationDetails string
	// CertThumbprint and DPoPJKT are the request's mutual-TLS certificate and DPoP key, if
	// any: the token is bound to them (RFC 8705 3, RFC 9449 5).
	CertThumbprint string
	DPoPJKT        string
	// Once are the request's one-time values (AuthenticateTokenRequest), recorded in the
	// issuance's write or not at all: the grant spends nothing else.
	Once []OneTime
}

// ClientCredentials issues an access token to an authenticated client for itself (RFC 6749
// 4.4). The token endpoint has checked that the client is registered for the grant
// (Client.AllowsGrantType) and its sender constraint. The scopes are those asked for, each
// registered for the client and none that needs a user (NeedsUser: openid, the claims scopes,
// offline_access, Grant Management's): a token without a user is refused them
// (invalid_scope). Without a scope parameter the client gets the default RFC 6749 3.3 allows:
// every registered scope that needs no user (ClientOnlyScopes), invalid_scope when there is none.
//
// The grant is new and the client's own (Grant.ClientOnly): it lives as long as its one access
// token, and the token, the grant and the request's one-time values are one write, so a
// request refused for its jti writes nothing, and one refused for anything else records no
// jti. No refresh token (RFC 6749 4.4.3), no id_token, no user metadata.
func (s *Service) ClientCredentials(ctx context.Context, client *Client, req ClientCredentialsRequest) (*TokenResponse, error) {
	if req.AuthorizationDetails != "" {
		return nil, InvalidAuthorizationDetails("authorization_details is not accepted with client_credentials: details are approved by a user")
	}
	scopes, serr := clientCredentialsScopes(client, req.Scope)
	if serr != nil {
		return nil, serr
	}
	now := s.now()
	g := Grant{
		ID: NewID(PrefixGrant), ClientID: client.ID, ClientOnly: true, Scopes: scopes,
		CertThumbprint: req.CertThumbprint, DPoPJKT: req.DPoPJKT,
		CreatedAt: now, ExpiresAt: now.Add(s.Lifetimes.AccessToken),
	}
	is := s.newIssuance(newTokens{Grant: g, Scopes: scopes, Now: now, FromCode: true})
	is.in.Once = onces(req.Once)
	err := s.Grants.IssueTokens(ctx, is.in, now)
	if refusal := replayRefusal(req.Once, err); refusal != nil {
		return nil, refusal
	}
	if err != nil {
		return nil, AsError(err)
	}
	resp := s.response(is, "", now)
	s.audit(ctx, "client_credentials_issued", &g, slog.String("scope", resp.Scope),
		slog.Bool("cert_bound", g.CertThumbprint != ""), slog.Bool("dpop_bound", g.DPoPJKT != ""))
	return resp, nil
}

// clientCredentialsScopes are the scopes of a client_credentials token of client c for the
// scope parameter requested (ClientCredentials states the rules).
func clientCredentialsScopes(c *Client, requested string) (Scopes, *Error) {
	if requested == "" {
		def := ClientOnlyScopes(c)
		if len(def) == 0 {
			return nil, InvalidScope("this client is registered for no scope a token without a user may carry")
		}
		return def, nil
	}
	want := ParseScopes(requested)
	for _, x := range want {
		if NeedsUser(x) {
			return nil, InvalidScope("scope '%s' needs a user: client_credentials issues tokens without one", x)
		}
	}
	if err := want.ValidateFor(c); err != nil {
		return nil, err
	}
	return want, nil
}
