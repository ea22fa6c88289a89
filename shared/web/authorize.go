// Package web is the HTTP adapter of the pages: the authorization endpoint, the sign-in pages
// it renders from the sign-in state machine (shared/signin) and their assets. It is the only
// HTTP package that imports shared/pages and shared/signin, so the functions that serve JSON
// endpoints link neither.
package web

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/logout"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/pages"
	"github.com/acmebank/authserver/shared/receipt"
	"github.com/acmebank/authserver/shared/signin"
)

// AuthorizeHandler serves the authorization endpoint and the pages behind it: GET (or POST)
// with the OAuth parameters starts a request; the login and consent forms post back to the same
// path with the pending request's id and its CSRF token.
type AuthorizeHandler struct {
	Service *oauth.Service
	// SignIn is the sign-in's state machine: every rule of the login, second-factor, set-up
	// and consent steps is there; this handler renders the step it returns.
	SignIn *signin.Machine
	// Users is the user's authentication: the session cookie's user of the Connected apps page.
	Users *authn.Service
	Pages *pages.Pages
	Log   *slog.Logger
	// Secure marks cookies Secure and __Host- prefixed: true unless served over plain http.
	Secure bool
	// Receipts signs the consent receipts the Connected apps page's user downloads; nil: the
	// page offers none.
	Receipts *receipt.Maker
	// Logout ends sessions at the end-session endpoint (EndSession); nil: it answers that
	// the service is unavailable.
	Logout *logout.Service
}

// NewAuthorizeHandler returns the authorization endpoint of svc, with its sign-in machine over
// svc and users; secure marks cookies Secure and __Host- prefixed (true unless served over
// plain http).
func NewAuthorizeHandler(svc *oauth.Service, users *authn.Service, pg *pages.Pages, log *slog.Logger, secure bool) (*AuthorizeHandler, error) {
	m, err := signin.New(svc, users)
	if err != nil {
		return nil, err
	}
	if pg == nil || log == nil {
		return nil, errors.New("authorize: the pages and a logger are required")
	}
	return &AuthorizeHandler{Service: svc, SignIn: m, Users: users, Pages: pg, Log: log, Secure: secure}, nil
}

// Cookie names; over https they carry the __Host- prefix (secure, host-only, path /).
func (h *AuthorizeHandler) cookieName(base string) string {
	if h.Secure {
		return "__Host-" + base
	}
	return base
}

func (h *AuthorizeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	httpapi.PageSecurityHeaders(w.Header(), "")
	switch r.Method {
	case http.MethodGet:
		h.start(w, r, r.URL.Query())
	case http.MethodPost:
		form, err := readForm(w, r)
		if err != nil {
			h.errorPage(w, r, "", "bad", http.StatusBadRequest)
			return
		}
		if form.Get("request_id") == "" {
			h.start(w, r, form) // an authorization request sent by POST (OIDC Core 3.1.2.1)
			return
		}
		h.answer(w, r, form)
	default:
		w.Header().Set("Allow", "GET, POST")
		h.errorPage(w, r, "", "bad", http.StatusMethodNotAllowed)
	}
}

// readForm reads a form post: form-encoded only, bounded, no repeated fields.
func readForm(w http.ResponseWriter, r *http.Request) (url.Values, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return nil, oauth.InvalidRequest("forms must be application/x-www-form-urlencoded")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, httpapi.MaxBodyBytes))
	if err != nil {
		return nil, oauth.InvalidRequest("the form could not be read")
	}
	v, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, oauth.InvalidRequest("the form is malformed")
	}
	return v, nil
}

// start validates an authorization request and hands it to the sign-in, which stores it as
// pending and says which page to show: the login page, or a step of a user already signed in.
func (h *AuthorizeHandler) start(w http.ResponseWriter, r *http.Request, v url.Values) {
	ctx := r.Context()
	params, repeated := oauth.ParseAuthorizeParams(v)
	lang := pages.Negotiate(params.UILocales, r.Header.Get("Accept-Language"))
	var client *oauth.Client
	var req *oauth.AuthRequest
	var err error
	if strings.HasPrefix(params.RequestURI, oauth.RequestURIPrefix) && len(repeated) == 0 {
		// A pushed request (RFC 9126 4): only its own parameters count. Opening it spends
		// nothing (a reload or a prefetch opens it again); the decision spends it. Any other
		// request_uri (a request object by reference) is refused by ValidateAuthorize.
		client, req, err = h.Service.OpenPushedRequest(ctx, params.ClientID, params.RequestURI)
		if req != nil {
			lang = pages.Negotiate(req.UILocales, r.Header.Get("Accept-Language"))
		}
	} else {
		client, req, err = h.Service.ValidateAuthorize(ctx, params, repeated)
	}
	if err != nil {
		var ae *oauth.AuthorizeError
		if errors.As(err, &ae) && ae.Redirect != nil {
			redirectToClient(w, ae.Redirect)
			return
		}
		kind, status := "client", http.StatusBadRequest
		switch {
		case errors.As(err, &ae) && ae.Err.Status >= 500:
			kind, status = "unavailable", ae.Err.Status
			h.Log.ErrorContext(ctx, "authorize failed", slog.Any("cause", ae.Err.Cause))
		case errors.As(err, &ae) && ae.BadRedirectURI:
			kind = "redirect"
		}
		h.errorPage(w, r, lang, kind, status)
		return
	}
	csrf := oauth.NewSecret(oauth.PrefixCSRF)
	req.CSRFHash = csrfHash(csrf, h.browserID(w, r))
	out, err := h.SignIn.Start(ctx, req, client, h.cookie(r, "sid"))
	if err != nil {
		h.failure(w, r, lang, err)
		return
	}
	if out.Redirect != nil { // prompt=none, or a remembered consent
		redirectToClient(w, out.Redirect)
		return
	}
	h.show(w, r, csrf, out, pages.LoginProblem{})
}

// answer hands an action posted on a pending request's page to the sign-in and shows what
// follows. The consent form posts action=consent with its decision (allow, deny, switch),
// which is the action.
func (h *AuthorizeHandler) answer(w http.ResponseWriter, r *http.Request, v url.Values) {
	lang := pages.Negotiate("", r.Header.Get("Accept-Language"))
	if err := httpapi.NoRepeats(v); err != nil {
		h.errorPage(w, r, lang, "bad", http.StatusBadRequest)
		return
	}
	action := v.Get("action")
	if action == "consent" {
		action = v.Get("decision")
	}
	if !slices.Contains(signin.Actions, signin.Action(action)) {
		h.errorPage(w, r, lang, "bad", http.StatusBadRequest)
		return
	}
	in := signin.Input{
		RequestID: v.Get("request_id"), Session: h.cookie(r, "sid"), ClientIP: httpapi.ClientIP(r),
		Action: signin.Action(action), Username: v.Get("username"), Password: v.Get("password"),
		Code: strings.TrimSpace(v.Get("code")), Credential: strings.TrimSpace(v.Get("credential")),
	}
	csrf := v.Get("csrf_token")
	if csrf != "" {
		in.CSRFHash = csrfHash(csrf, h.cookie(r, "bid"))
	}
	out, err := h.SignIn.Act(r.Context(), in)
	switch {
	case errors.Is(err, signin.ErrExpired):
		h.errorPage(w, r, lang, "expired", http.StatusBadRequest)
		return
	case errors.Is(err, signin.ErrRefused):
		h.errorPage(w, r, lang, "forbidden", http.StatusForbidden)
		return
	case errors.Is(err, authn.ErrBusy):
		// Too many password checks at once: nothing was counted, the form may be sent again.
		w.Header().Set("Retry-After", strconv.Itoa(int(authn.DefaultHashWait/time.Second)))
		h.errorPage(w, r, lang, "busy", http.StatusServiceUnavailable)
		return
	case err != nil:
		h.failure(w, r, lang, err)
		return
	}
	if out.Redirect != nil {
		h.sessionCookie(w, out) // a sign-in whose consent was remembered: its session is kept
		redirectToClient(w, out.Redirect)
		return
	}
	// An empty field is named on the page, next to its input; the login refuses it anyway.
	var problem pages.LoginProblem
	switch {
	case out.LoginFailed && in.Action == signin.ActLogin:
		problem = pages.LoginProblem{MissingUsername: strings.TrimSpace(in.Username) == "", MissingPassword: in.Password == ""}
		problem.Failed = !problem.Any()
	case out.LoginFailed: // a passkey that did not sign in
		problem.Failed = true
	}
	h.show(w, r, csrf, out, problem)
}

// redirectToClient sends the browser to the client's redirect URI with the authorization
// response (a code or an error) with 303 See Other, whatever the request's method: the browser
// follows it with a GET, so a POSTed form (credentials, the consent decision, an authorization
// request sent by POST) is never re-sent to the client, as 307 would (RFC 9700 4.11; FAPI 2.0
// Security Profile (Final) 5.3.2.2 asks for 303). Every redirect to a client goes through here.
func redirectToClient(w http.ResponseWriter, to *oauth.Redirect) {
	w.Header().Set("Location", to.String())
	w.WriteHeader(http.StatusSeeOther)
}

func (h *AuthorizeHandler) errorPage(w http.ResponseWriter, r *http.Request, lang, kind string, status int) {
	if lang == "" {
		lang = pages.Negotiate("", r.Header.Get("Accept-Language"))
	}
	var b bytes.Buffer
	if err := h.Pages.Error(&b, lang, kind); err != nil {
		h.Log.ErrorContext(r.Context(), "render error page", slog.Any("err", err))
		http.Error(w, http.StatusText(status), status)
		return
	}
	writePage(w, status, "", b.Bytes(), false)
}

// writePage sends a page rendered whole beforehand, so that a page that fails to render has
// sent nothing and can still become an error page, and the response carries its
// Content-Length (no chunked framing). formTarget is the CSP form-action source besides
// 'self', if any; script lets the page load this origin's scripts. A write error (the client
// has gone) is not one to report.
func writePage(w http.ResponseWriter, status int, formTarget string, page []byte, script bool) {
	hdr := w.Header()
	httpapi.PageSecurityHeaders(hdr, formTarget)
	if script {
		hdr["Content-Security-Policy"] = []string{hdr.Get("Content-Security-Policy") + "; script-src 'self'; connect-src 'none'"}
	}
	hdr["Content-Type"] = hdrHTMLType
	hdr["Content-Length"] = []string{strconv.Itoa(len(page))}
	w.WriteHeader(status)
	_, _ = w.Write(page)
}

// failure shows an internal or dependency failure without its details, which go to the log.
func (h *AuthorizeHandler) failure(w http.ResponseWriter, r *http.Request, lang string, err error) {
	e := oauth.AsError(err)
	h.Log.ErrorContext(r.Context(), "authorize failed", slog.String("error", e.Code), slog.Any("cause", e.Cause))
	kind := "bad"
	if e.Status >= 500 {
		kind = "unavailable"
	}
	if e.Status == http.StatusServiceUnavailable { // a dependency failed: the same request may work soon
		w.Header().Set("Retry-After", "1")
	}
	h.errorPage(w, r, lang, kind, e.Status)
}

func (h *AuthorizeHandler) cookie(r *http.Request, base string) string {
	c, err := r.Cookie(h.cookieName(base))
	if err != nil {
		return ""
	}
	return c.Value
}

func (h *AuthorizeHandler) setCookie(w http.ResponseWriter, base, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: h.cookieName(base), Value: value, Path: "/", MaxAge: maxAge,
		Secure: h.Secure, HttpOnly: true, SameSite: http.SameSiteLaxMode,
	})
}

// browserID returns the browser's binding cookie, setting one if there is none. A pending
// request's CSRF token is bound to it, so a form cannot be replayed from another browser
// (login and consent CSRF).
func (h *AuthorizeHandler) browserID(w http.ResponseWriter, r *http.Request) string {
	if id := h.cookie(r, "bid"); id != "" && len(id) < 100 {
		return id
	}
	id := oauth.NewSecret("")
	h.setCookie(w, "bid", id, 0)
	return id
}

func csrfHash(csrf, browser string) string { return oauth.HashToken(csrf + "." + browser) }

func displayName(u *oauth.User) string {
	if u.Claims.Name != "" {
		return u.Claims.Name
	}
	return u.Username
}

// cspSource is the CSP source expression of a redirect URI: its origin for http(s), its scheme
// for a custom-scheme (native app) URI.
func cspSource(redirectURI string) string {
	u, err := url.Parse(redirectURI)
	if err != nil || u.Scheme == "" {
		return ""
	}
	if u.Scheme == "http" || u.Scheme == "https" {
		return u.Scheme + "://" + u.Host
	}
	return u.Scheme + ":"
}

// hdrHTMLType is the pages' Content-Type, shared so that setting it allocates nothing.
var hdrHTMLType = []string{"text/html; charset=utf-8"}
