package httpapi

import (
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/acmebank/authserver/shared/authorizer"
	"github.com/acmebank/authserver/shared/oauth"
)

// BankAPI serves the protected routes of the bank API on the local server, as API Gateway
// does in AWS: the same authorizer decides, then the request goes to the upstream (the bank
// API) with the identity in X-Auth-* headers, the deprecated invoice routes rewritten to their
// successors. With no upstream it answers the identity it would pass on, so a client developer
// sees their token work.
type BankAPI struct {
	Authorizer *authorizer.Authorizer
	// Upstream is the bank API's origin (scheme://host[:port], optionally a base path); nil
	// answers the identity as JSON instead.
	Upstream *url.URL
	// Transport reaches the upstream (nil: http.DefaultTransport).
	Transport http.RoundTripper
	// Deprecation marks the deprecated routes.
	Deprecation Deprecation
	Log         *slog.Logger

	proxy *httputil.ReverseProxy
}

// Deprecation is what the deprecated routes announce on every response: when they were
// deprecated (RFC 9745 Deprecation: @epoch-seconds) and, once a removal date is set, when
// they go away (RFC 8594 Sunset: an HTTP-date).
type Deprecation struct {
	Since  time.Time
	Sunset time.Time
}

// DefaultDeprecationDate is the day the old invoice routes were deprecated (2026-01-01), the
// template's DeprecationDate default.
var DefaultDeprecationDate = time.Unix(1767225600, 0).UTC()

// The headers that carry the authorizer's identity to the backend; the template maps
// $context.authorizer.* onto the same names.
const (
	HeaderUID              = "X-Auth-Uid"
	HeaderCompanyProfileID = "X-Auth-Company-Profile-Id"
	HeaderCompanyUserID    = "X-Auth-Company-User-Id"
	HeaderClientID         = "X-Auth-Client-Id"
	HeaderScope            = "X-Auth-Scope"
	// HeaderPayment carries a payment token's authorization_details (base64url JSON,
	// authorizer.Identity.Payment); set empty for any other token, never the caller's.
	HeaderPayment = "X-Auth-Payment"
)

// bankRoute is one protected route: its route key (also its ServeMux pattern), the backend
// path it reaches (escaped, as it goes on the wire), and whether it is deprecated (its backend
// path is then its successor).
type bankRoute struct {
	key        string
	backend    func(r *http.Request) string
	deprecated bool
	// params are the names of its path parameters, checked by the authorizer.
	params []string
}

func fixed(p string) func(*http.Request) string { return func(*http.Request) string { return p } }

func invoicePath(r *http.Request) string {
	return "/invoicing/invoices/" + url.PathEscape(r.PathValue("invoiceId"))
}

var bankRoutes = []bankRoute{
	{key: authorizer.RouteAccounts, backend: fixed("/v2/bank/accounts")},
	{key: authorizer.RouteInvoices, backend: fixed("/invoicing/invoices")},
	{key: authorizer.RouteInvoice, backend: invoicePath, params: []string{"invoiceId"}},
	{key: authorizer.RouteInvoicesQueryOld, backend: fixed("/invoicing/invoices"), deprecated: true},
	{key: authorizer.RouteInvoiceOld, backend: invoicePath, deprecated: true, params: []string{"invoiceId"}},
}

// isBankAPIPath reports whether path is one of bankRoutes' (any method), or under one of its
// {invoiceId} patterns: the rate limiter needs to know without the mux.
func isBankAPIPath(path string) bool {
	for _, rt := range bankRoutes {
		_, pattern, _ := strings.Cut(rt.key, " ")
		if prefix, ok := strings.CutSuffix(pattern, "{invoiceId}"); ok {
			if rest, ok := strings.CutPrefix(path, prefix); ok && rest != "" {
				return true
			}
		} else if path == pattern {
			return true
		}
	}
	return false
}

// Register adds the protected routes to m, each on its method and pattern (other methods get
// ServeMux's 405).
func (b *BankAPI) Register(m *http.ServeMux) {
	if b.Upstream != nil {
		b.proxy = &httputil.ReverseProxy{Rewrite: b.rewrite, Transport: b.Transport, ErrorHandler: b.proxyError}
	}
	for _, rt := range bankRoutes {
		m.Handle(rt.key, b.handler(rt))
	}
}

func (b *BankAPI) handler(rt bankRoute) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		backend := rt.backend(r)
		if rt.deprecated {
			b.Deprecation.mark(w.Header(), backend)
		}
		thumb, _ := ClientCertificate(r)
		var params map[string]string
		for _, name := range rt.params {
			if params == nil {
				params = map[string]string{}
			}
			params[name] = r.PathValue(name)
		}
		id, err := b.Authorizer.Authorize(r.Context(), authorizer.Request{RouteKey: rt.key, Authorization: r.Header.Get("Authorization"),
			CertThumbprint: thumb, DPoPProofs: r.Header.Values("DPoP"), Method: r.Method, Path: r.URL.EscapedPath(), PathParameters: params})
		if err != nil {
			writeBearerError(w, r, b.Log, err)
			return
		}
		if b.proxy == nil {
			writeJSON(w, http.StatusOK, identityEcho{Route: rt.key, BackendPath: backend, Identity: id, Scope: id.Scopes.String(),
				Note: "no upstream is configured (AUTH_API_UPSTREAM): this is what the bank API would receive"})
			return
		}
		r = r.WithContext(withUpstream(r.Context(), upstreamCall{path: backend, id: id}))
		b.proxy.ServeHTTP(w, r)
	})
}

// identityEcho is the local server's answer when no upstream is configured.
type identityEcho struct {
	Route       string `json:"route"`
	BackendPath string `json:"backend_path"`
	authorizer.Identity
	Scope string `json:"scope"`
	Note  string `json:"note"`
}

// mark adds the deprecation headers: Deprecation (RFC 9745), Link to the successor (RFC 8288
// successor-version, RFC 9745 3) and, when a date is set, Sunset (RFC 8594).
func (d Deprecation) mark(h http.Header, successor string) {
	since := d.Since
	if since.IsZero() {
		since = DefaultDeprecationDate
	}
	h.Set("Deprecation", "@"+strconv.FormatInt(since.Unix(), 10))
	h.Add("Link", "<"+successor+`>; rel="successor-version"`)
	if !d.Sunset.IsZero() {
		h.Set("Sunset", d.Sunset.UTC().Format(http.TimeFormat))
	}
}

// HeaderRealIP is the caller's address as the proxy saw it; the template maps
// $context.identity.sourceIp onto it.
const HeaderRealIP = "X-Real-Ip"

// ownHeader reports whether a request header, in the spelling the caller chose, names one of
// the headers the proxy sets itself: the X-Auth-* identity family, X-Real-Ip and the
// forwarding headers. Case and "-" versus "_" are ignored: CGI and WSGI backends read
// X_Auth_Uid and x-auth_uid as X-Auth-Uid (HTTP_X_AUTH_UID), so every spelling is ours.
func ownHeader(name string) bool {
	n := strings.ReplaceAll(strings.ToLower(name), "_", "-")
	switch n {
	case "x-real-ip", "forwarded", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto":
		return true
	}
	return strings.HasPrefix(n, "x-auth-")
}

// rewrite points the outbound request at the upstream's successor path, keeps the query,
// removes every spelling of the headers the proxy sets (ownHeader) the caller sent, then sets
// the identity headers, X-Real-Ip and X-Forwarded-* (the template's remove: and overwrite:
// mappings do the same in AWS).
func (b *BankAPI) rewrite(pr *httputil.ProxyRequest) {
	call, _ := upstreamFrom(pr.In.Context())
	out := pr.Out
	out.URL.Scheme = b.Upstream.Scheme
	out.URL.Host = b.Upstream.Host
	// call.path is already escaped (an invoice id may hold spaces; never "/": CheckPathParameter).
	escaped := strings.TrimRight(b.Upstream.EscapedPath(), "/") + call.path
	out.URL.Path, _ = url.PathUnescape(escaped)
	out.URL.RawPath = escaped
	out.URL.RawQuery = pr.In.URL.RawQuery
	out.Host = b.Upstream.Host
	h := out.Header
	for name := range h {
		if ownHeader(name) {
			delete(h, name)
		}
	}
	h.Set(HeaderUID, call.id.UID)
	h.Set(HeaderCompanyProfileID, call.id.CompanyProfileID)
	h.Set(HeaderCompanyUserID, call.id.CompanyUserID)
	h.Set(HeaderClientID, call.id.ClientID)
	h.Set(HeaderScope, call.id.Scopes.String())
	h.Set(HeaderPayment, call.id.Payment)
	h.Set(HeaderRealIP, ClientIP(pr.In))
	pr.SetXForwarded()
}

func (b *BankAPI) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	b.Log.ErrorContext(r.Context(), "bank API upstream failed", slog.String("path", r.URL.Path), slog.Any("err", err))
	writeJSON(w, http.StatusBadGateway, errorBody{Error: oauth.ErrCodeTemporarilyUnavailable, ErrorDescription: "the bank API could not be reached"})
}

// writeBearerError answers a failed bearer-token check: RFC 6750's WWW-Authenticate
// challenge, then the JSON error through writeError. A request with no token at all gets the
// bare challenge and no error information (RFC 6750 3.1).
func writeBearerError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	if c := authorizer.Challenge(err); c != "" {
		w.Header().Set("WWW-Authenticate", c)
	}
	if err == authorizer.ErrNoToken {
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	writeError(w, r, log, err)
}
