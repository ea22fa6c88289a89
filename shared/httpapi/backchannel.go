package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/acmebank/authserver/shared/ciba"
	"github.com/acmebank/authserver/shared/oauth"
)

// BackchannelHandler serves POST PathBackchannel, the backchannel authentication endpoint
// (OpenID CIBA Core 1.0 7): the client authenticates as at the token endpoint and PAR (a
// secret, private_key_jwt or its certificate; no DPoP proof, which CIBA's endpoint does not
// take), the body is a form (or JSON, as the token endpoint and PAR accept), and the use case
// (shared/ciba) decides. The answer is CIBA Core 7.3's (auth_req_id, expires_in, interval) or
// 13's error.
type BackchannelHandler struct {
	CIBA *ciba.Service
	Log  *slog.Logger
}

func (h *BackchannelHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, http.MethodPost)
		return
	}
	v, cred, err := readClientRequest(w, r)
	if err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	resp, err := h.CIBA.StartRequest(r.Context(), oauth.ClientRequest{Credentials: cred}, v)
	if err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}
