package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/acmebank/authserver/shared/revocation"
	"github.com/acmebank/authserver/shared/tokenendpoint"
)

// TokenHandler serves POST /token: it reads the request and hands it to the token endpoint's
// use case (shared/tokenendpoint).
type TokenHandler struct {
	Token *tokenendpoint.Endpoint
	Log   *slog.Logger
}

func (h *TokenHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, http.MethodPost)
		return
	}
	// With server nonces on, every answer carries the current nonce, so a client always has a
	// fresh one (RFC 9449 8.2).
	if n := h.Token.DPoPNonce(); n != "" {
		w.Header().Set("DPoP-Nonce", n)
	}
	v, cred, err := readClientRequest(w, r)
	if err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	resp, err := h.Token.Token(r.Context(), tokenendpoint.Request{Params: v, Credentials: cred, Proof: proofHeaders(r)})
	if err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// RevokeHandler serves RFC 7009 revocation on both documented paths (shared/revocation).
type RevokeHandler struct {
	Revoker *revocation.Revoker
	Log     *slog.Logger
}

func (h *RevokeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, http.MethodPost)
		return
	}
	v, cred, err := readClientRequest(w, r)
	if err == nil {
		err = h.Revoker.Revoke(r.Context(), v, cred)
	}
	if err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}
