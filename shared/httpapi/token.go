package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/acmebank/authserver/shared/oauth"
)

// TokenHandler serves POST /token: grant_type authorization_code and refresh_token, each
// handled by its own grant in the domain.
type TokenHandler struct {
	Service *oauth.Service
	Log     *slog.Logger
}

func (h *TokenHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, http.MethodPost)
		return
	}
	resp, err := h.token(r, w)
	if err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (h *TokenHandler) token(r *http.Request, w http.ResponseWriter) (*oauth.TokenResponse, error) {
	// The proof is checked, and its jti recorded, before the grant runs: a refused request
	// spends neither the code nor the refresh token.
	v, client, cred, jkt, err := authenticatedDPoPRequest(w, r, h.Service)
	if err != nil {
		return nil, err
	}
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
		return h.Service.ExchangeCode(r.Context(), client, oauth.CodeExchange{
			Code: v.Get("code"), RedirectURI: v.Get("redirect_uri"), CodeVerifier: v.Get("code_verifier"),
			CertThumbprint: cred.CertThumbprint, DPoPJKT: jkt,
		})
	}
	// The documented usage sends redirect_uri with a refresh; then it must be registered.
	if ru := v.Get("redirect_uri"); ru != "" && !client.HasRedirectURI(ru) {
		return nil, oauth.InvalidRequest("the redirect_uri is not registered for this client")
	}
	return h.Service.Refresh(r.Context(), client, oauth.RefreshRequest{
		RefreshToken: v.Get("refresh_token"), Scope: v.Get("scope"), CertThumbprint: cred.CertThumbprint, DPoPJKT: jkt,
	})
}

// RevokeHandler serves RFC 7009 revocation on both documented paths.
type RevokeHandler struct {
	Service *oauth.Service
	Log     *slog.Logger
}

func (h *RevokeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, http.MethodPost)
		return
	}
	if err := h.revoke(r, w); err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}

func (h *RevokeHandler) revoke(r *http.Request, w http.ResponseWriter) error {
	v, client, _, err := authenticatedRequest(w, r, h.Service)
	if err != nil {
		return err
	}
	return h.Service.Revoke(r.Context(), client, v.Get("token"), v.Get("token_type_hint"))
}
