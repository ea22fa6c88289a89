package httpapi

import "net/http"

// PageSecurityHeaders are set on every HTML answer (the pages of shared/web, the rate limiter's
// plain page): a CSP with no script at all, no framing, no referrer, no caching. formTarget is
// the CSP form-action source besides 'self', if any.
func PageSecurityHeaders(h http.Header, formTarget string) {
	csp := hdrCSPNoTarget
	if formTarget != "" {
		csp = []string{cspBefore + " " + formTarget + cspAfter}
	}
	h["Content-Security-Policy"] = csp
	h["X-Frame-Options"] = hdrDeny
	h["X-Content-Type-Options"] = hdrNoSniff
	h["Referrer-Policy"] = hdrNoReferrer
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
}

// The pages' header values, shared so that setting them allocates nothing (capacity 1, never
// written into). Keys are set in canonical form, as Header.Set would.
const (
	cspBefore = "default-src 'none'; style-src 'self'; img-src 'self' https: data:; form-action 'self'"
	cspAfter  = "; frame-ancestors 'none'; base-uri 'none'"
)

var (
	hdrCSPNoTarget = []string{cspBefore + cspAfter}
	hdrDeny        = []string{"DENY"}
	hdrNoSniff     = []string{"nosniff"}
	hdrNoReferrer  = []string{"no-referrer"}
)
