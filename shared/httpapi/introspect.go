package httpapi

import (
	"log/slog"
	"mime"
	"net/http"
	"strings"

	"github.com/acmebank/authserver/shared/introspection"
)

// mediaTypeIntrospectionJWT is the media type of a JWT introspection response (RFC 9701 4, 5).
const mediaTypeIntrospectionJWT = "application/token-introspection+jwt"

// IntrospectHandler serves token introspection (RFC 7662) to authenticated clients, with the
// same client authentication as the token and revocation endpoints (secret, Basic or post, or
// the registered certificate of an RFC 8705 client). Who may see which token is the use case's
// (shared/introspection). A client that sends Accept: application/token-introspection+jwt gets
// the answer as a signed JWT (RFC 9701).
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
	resp, err := h.Introspector.IntrospectAs(r.Context(), v, cred, acceptsIntrospectionJWT(r.Header.Values("Accept")))
	if err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	if resp.JWT == "" {
		writeJSON(w, http.StatusOK, resp.JSON)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", mediaTypeIntrospectionJWT)
	hd.Set("Cache-Control", "no-store")
	hd.Set("Pragma", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(resp.JWT))
}

// acceptsIntrospectionJWT reports whether the Accept header values name the JWT response's
// media type (RFC 9701 4), with a quality above zero (RFC 9110 12.5.1). A client that names
// it asks for a signed response, whatever else it lists.
func acceptsIntrospectionJWT(accept []string) bool {
	for _, v := range accept {
		for _, rng := range strings.Split(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(rng))
			if err != nil || mt != mediaTypeIntrospectionJWT {
				continue
			}
			if q := strings.TrimSpace(params["q"]); q == "0" || strings.HasPrefix(q, "0.") && strings.Trim(q[2:], "0") == "" {
				continue
			}
			return true
		}
	}
	return false
}
