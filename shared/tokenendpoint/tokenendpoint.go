// Package tokenendpoint is the token endpoint's use case (RFC 6749 3.2): the client and its
// DPoP proof authenticated in the order that writes nothing for a refused request, the rules of
// which grant a client may use with which sender constraint, then the grant itself (the code
// exchange and the refresh, in shared/oauth's flow_code.go and flow_refresh.go).
package tokenendpoint

import (
	"context"
	"errors"
	"fmt"
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
	if d.Tokens == nil {
		return nil, errors.New("tokenendpoint: missing Tokens")
	}
	var missing []string
	s := d.Tokens
	if s.Clients == nil {
		missing = append(missing, "Tokens.Clients")
	}
	if s.Grants == nil {
		missing = append(missing, "Tokens.Grants")
	}
	if s.Replay == nil {
		missing = append(missing, "Tokens.Replay")
	}
	if s.Clock == nil {
		missing = append(missing, "Tokens.Clock")
	}
	if s.Signer == nil {
		missing = append(missing, "Tokens.Signer")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("tokenendpoint: missing %s", strings.Join(missing, ", "))
	}
	return &Endpoint{tokens: s}, nil
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

// Token answers a token request: grant_type authorization_code or refresh_token. The proof is
// checked, and its jti recorded, before the grant runs: a refused request spends neither the
// code nor the refresh token.
func (e *Endpoint) Token(ctx context.Context, r Request) (*oauth.TokenResponse, error) {
	v := r.Params
	client, jkt, err := e.tokens.AuthenticateRequest(ctx, oauth.ClientRequest{
		Credentials: r.Credentials, Proof: &r.Proof, Home: homeOf(v),
	})
	if err != nil {
		return nil, err
	}
	cred := r.Credentials
	grantType := v.Get("grant_type")
	switch grantType {
	case "":
		return nil, oauth.InvalidRequest("the grant_type parameter is required")
	case "authorization_code", "refresh_token":
	default:
		return nil, oauth.UnsupportedGrantType("grant_type must be authorization_code or refresh_token")
	}
	if jkt == "" && client.DPoPBoundAccessTokens {
		return nil, oauth.InvalidRequest("this client's tokens are DPoP-bound (dpop_bound_access_tokens): send a DPoP proof")
	}
	// FAPI 2.0 5.3.2.1: only sender-constrained tokens.
	if client.IsFAPI2() && jkt == "" && cred.CertThumbprint == "" {
		return nil, oauth.InvalidRequest("this client's tokens must be sender-constrained: send a DPoP proof or use mutual TLS (FAPI 2.0)")
	}
	// Tokens are bound to the certificate of a mutual-TLS request, if any (RFC 8705 3), and
	// to the key of the DPoP proof, if any (RFC 9449 5).
	if grantType == "authorization_code" {
		return e.tokens.ExchangeCode(ctx, client, oauth.CodeExchange{
			Code: v.Get("code"), RedirectURI: v.Get("redirect_uri"), CodeVerifier: v.Get("code_verifier"),
			CertThumbprint: cred.CertThumbprint, DPoPJKT: jkt,
		})
	}
	// The documented usage sends redirect_uri with a refresh; then it must be registered.
	if ru := v.Get("redirect_uri"); ru != "" && !client.HasRedirectURI(ru) {
		return nil, oauth.InvalidRequest("the redirect_uri is not registered for this client")
	}
	return e.tokens.Refresh(ctx, client, oauth.RefreshRequest{
		RefreshToken: v.Get("refresh_token"), Scope: v.Get("scope"), CertThumbprint: cred.CertThumbprint, DPoPJKT: jkt,
	})
}

// homeOf is the home of the code or refresh token a token request carries: its one-time values
// are recorded there, beside the single-use write they guard (docs/multiregion.md).
func homeOf(v url.Values) string {
	switch v.Get("grant_type") {
	case "authorization_code":
		return oauth.HomeOf(v.Get("code"))
	case "refresh_token":
		return oauth.HomeOf(v.Get("refresh_token"))
	}
	return ""
}
