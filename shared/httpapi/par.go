package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/acmebank/authserver/shared/oauth"
)

// PARHandler serves POST /par: pushed authorization requests (RFC 9126). The client
// authenticates as at the token endpoint; the body (a form, or JSON as the token endpoint
// accepts) carries the authorization request's parameters, or a signed request object in
// request (RFC 9101); the domain's Push decides.
type PARHandler struct {
	Service *oauth.Service
	Log     *slog.Logger
}

// pushedRequest is RFC 9126 2.2's answer.
type pushedRequest struct {
	RequestURI string `json:"request_uri"`
	ExpiresIn  int    `json:"expires_in"`
}

func (h *PARHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, http.MethodPost)
		return
	}
	if n := h.Service.DPoPNonce(); n != "" {
		w.Header().Set("DPoP-Nonce", n)
	}
	v, cred, err := readClientRequest(w, r)
	if err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	proof := proofHeaders(r)
	uri, ttl, err := h.Service.Push(r.Context(), oauth.ClientRequest{Credentials: cred, Proof: &proof}, v)
	if err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	writeJSON(w, http.StatusCreated, pushedRequest{RequestURI: uri, ExpiresIn: int(ttl.Seconds())})
}
