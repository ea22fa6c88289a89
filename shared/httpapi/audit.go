package httpapi

import (
	"net/http"

	"github.com/acmebank/authserver/shared/oauth"
)

// WithClientAddress puts the request's client address (the connection's; in Lambda, API
// Gateway's source IP) into the context's oauth.AuditInfo, so that the audit records of what
// next does say where the request came from.
func WithClientAddress(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := oauth.AuditInfoFrom(r.Context())
		info.ClientIP = clientIP(r)
		next.ServeHTTP(w, r.WithContext(oauth.WithAuditInfo(r.Context(), info)))
	})
}
