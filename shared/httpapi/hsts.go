package httpapi

import "net/http"

// StrictTransportSecurity is the HSTS policy (RFC 6797) of a service served over https: two
// years, subdomains included, so a browser that has seen it once never tries the bank's hosts
// over plain http (where a network attacker could strip TLS) until it expires.
const StrictTransportSecurity = "max-age=63072000; includeSubDomains"

// HSTS sets Strict-Transport-Security on every response of next, errors and 404s included. Use
// it only when the service's base URL is https: over http the header means nothing (RFC 6797
// 8.1) and a development server on http://127.0.0.1 must not pin the browser to https.
func HSTS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Strict-Transport-Security", StrictTransportSecurity)
		next.ServeHTTP(w, r)
	})
}
