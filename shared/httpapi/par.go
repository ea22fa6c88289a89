package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/acmebank/authserver/shared/oauth"
)

// PARHandler serves POST /par: pushed authorization requests (RFC 9126). The client
// authenticates as at the token endpoint; the body (a form, or JSON as the token endpoint
// accepts) carries the authorization request's parameters.
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
	// A proof at the PAR endpoint binds the code to its key (RFC 9449 10.1), as dpop_jkt does;
	// both must then name the same key.
	v, client, _, jkt, err := authenticatedDPoPRequest(w, r, h.Service)
	if err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	params, repeated := oauth.ParseAuthorizeParams(v)
	if jkt != "" {
		if params.DPoPJKT != "" && params.DPoPJKT != jkt {
			writeError(w, r, h.Log, oauth.InvalidDPoPProof("dpop_jkt is not the thumbprint of the DPoP proof's key"))
			return
		}
		params.DPoPJKT = jkt
	}
	uri, ttl, err := h.Service.PushAuthorizationRequest(r.Context(), client, params, repeated)
	if err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	writeJSON(w, http.StatusCreated, pushedRequest{RequestURI: uri, ExpiresIn: int(ttl.Seconds())})
}
