// Package tokenendpoint is the token endpoint's use case (RFC 6749 3.2): the client and its
// DPoP proof authenticated in the order that writes nothing for a refused request, the rules of
// which grant a client may use with which sender constraint, then the grant itself: each grant
// type is a file grant_<type>.go over its flow in shared/oauth (flow_code.go, flow_refresh.go,
// flow_client_credentials.go), registered in registry.go.
package tokenendpoint

import (
	"context"
	"net/url"
	"strings"

	"github.com/acmebank/authserver/shared/oauth"
)

// Deps are what the token endpoint needs: the token domain, with its clients, grants, replay
// store, clock and id_token signer.
type Deps struct {
	Tokens *oauth.Service
}

// Endpoint is the token endpoint's use case.
type Endpoint struct {
	tokens *oauth.Service
}

// New returns the token endpoint over d, or an error naming every dependency it lacks.
func New(d Deps) (*Endpoint, error) {
	if err := d.Tokens.Serves("tokenendpoint", true); err != nil {
		return nil, err
	}
	return &Endpoint{tokens: d.Tokens}, nil
}

// Request is a token request as the HTTP adapter read it.
type Request struct {
	// Params are the body's parameters (grant_type, code, refresh_token, ...).
	Params      url.Values
	Credentials oauth.ClientCredentials
	Proof       oauth.ProofHeaders
}

// DPoPNonce is the nonce every answer carries when server nonces are on ("" otherwise).
func (e *Endpoint) DPoPNonce() string { return e.tokens.DPoPNonce() }

// Token answers a token request of a grant type of the registry (registry.go). The client
// and the proof are checked before the grant runs, and their jtis recorded by the grant in the
// write that spends the code or the refresh token, or that issues the tokens of a grant that
// spends nothing: a request refused for its jti spends neither, and a request refused for
// anything else records no jti.
func (e *Endpoint) Token(ctx context.Context, r Request) (*oauth.TokenResponse, error) {
	v := r.Params
	client, jkt, once, err := e.tokens.AuthenticateTokenRequest(ctx, oauth.ClientRequest{
		Credentials: r.Credentials, Proof: &r.Proof, Home: homeOf(v),
	})
	if err != nil {
		return nil, err
	}
	grantType := v.Get("grant_type")
	g, known := registry[grantType]
	switch {
	case grantType == "":
		return nil, oauth.InvalidRequest("the grant_type parameter is required")
	case !known:
		return nil, oauth.UnsupportedGrantType("grant_type must be one of %s", strings.Join(GrantTypes(), ", "))
	case !client.AllowsGrantType(grantType):
		// RFC 6749 5.2: a grant the client is not registered for (its grant_types, RFC 7591 2).
		return nil, oauth.UnauthorizedClient("this client is not registered for the %s grant", grantType)
	}
	if jkt == "" && client.DPoPBoundAccessTokens {
		return nil, oauth.InvalidRequest("this client's tokens are DPoP-bound (dpop_bound_access_tokens): send a DPoP proof")
	}
	// FAPI 2.0 5.3.2.1: only sender-constrained tokens.
	if client.IsFAPI2() && jkt == "" && r.Credentials.CertThumbprint == "" {
		return nil, oauth.InvalidRequest("this client's tokens must be sender-constrained: send a DPoP proof or use mutual TLS (FAPI 2.0)")
	}
	// Tokens are bound to the certificate of a mutual-TLS request, if any (RFC 8705 3), and
	// to the key of the DPoP proof, if any (RFC 9449 5).
	return g.issue(e, ctx, client, v, binding{cert: r.Credentials.CertThumbprint, jkt: jkt, once: once})
}

// binding is what the tokens a grant issues are bound to: the mutual-TLS certificate's
// thumbprint and the DPoP key's, either or both empty; and the request's one-time values,
// which the grant records with its write.
type binding struct {
	cert, jkt string
	once      []oauth.OneTime
}

// homeOf is the home of the code or refresh token a token request carries: its one-time values
// are recorded there, beside the single-use write they guard (docs/multiregion.md).
func homeOf(v url.Values) string {
	if g, ok := registry[v.Get("grant_type")]; ok && g.spends != "" {
		return oauth.HomeOf(v.Get(g.spends))
	}
	return ""
}
