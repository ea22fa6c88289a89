package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/acmebank/authserver/shared/oauth"
)

// writeJSON writes v with status. Every JSON answer of the service may carry a token or says
// something about one, so none may be cached (RFC 6749 5.1).
func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json;charset=UTF-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// errorBody is RFC 6749 5.2's error response.
type errorBody struct {
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description,omitempty"`
}

// writeError is the one place an error becomes an HTTP answer on the JSON endpoints: the RFC
// code and description go to the client; the internal cause goes to the log only.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	e := oauth.AsError(err)
	if e.Status >= 500 {
		log.ErrorContext(r.Context(), "request failed", slog.String("error", e.Code), slog.Any("cause", e.Cause))
	}
	if e.Code == oauth.ErrCodeInvalidClient {
		w.Header().Set("WWW-Authenticate", `Basic realm="oauth2", charset="UTF-8"`)
	}
	if e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeNonce(w, err)
	writeJSON(w, e.Status, errorBody{Error: e.Code, ErrorDescription: e.Description})
}

// methodNotAllowed answers a method the endpoint does not serve.
func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	writeJSON(w, http.StatusMethodNotAllowed, errorBody{Error: oauth.ErrCodeInvalidRequest, ErrorDescription: "method not allowed; use " + allow})
}
