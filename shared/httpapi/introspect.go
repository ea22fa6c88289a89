package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/acmebank/authserver/shared/introspection"
)

// IntrospectHandler serves token introspection (RFC 7662) to authenticated clients, with the
// same client authentication as the token and revocation endpoints (secret, Basic or post, or
// the registered certificate of an RFC 8705 client). Who may see which token is the use case's
// (shared/introspection).
type IntrospectHandler struct {
	Introspector *introspection.Introspector
	Log          *slog.Logger
}

func (h *IntrospectHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, http.MethodPost)
		return
	}
	v, cred, err := readClientRequest(w, r)
	if err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	resp, err := h.Introspector.Introspect(r.Context(), v, cred)
	if err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}
