package httpapi

import (
	"net"
	"net/http"

	"github.com/acmebank/authserver/shared/oauth"
)

// WithClientAddress puts the request's client address (the connection's; in Lambda, API
// Gateway's source IP) into the context's oauth.AuditInfo, so that the audit records of what
// next does say where the request came from.
func WithClientAddress(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := oauth.AuditInfoFrom(r.Context())
		info.ClientIP = ClientIP(r)
		next.ServeHTTP(w, r.WithContext(oauth.WithAuditInfo(r.Context(), info)))
	})
}

// ClientIP is the peer address: API Gateway's source IP behind the Lambda adapter, the TCP
// peer locally. Forwarding headers are not trusted.
func ClientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
