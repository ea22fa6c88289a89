package web

import (
	"crypto/subtle"
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/logout"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/pages"
)

// The end-session endpoint (httpapi.PathLogout, OpenID RP-Initiated Logout 1.0). A logout
// request (GET, or POST without action) is checked by logout.Service.Check: a bad one gets an
// error page, never a redirect, and changes nothing. With a session in the browser, the
// confirmation page asks "Sign out of Acme Bank?" (always: a link another site sends the
// browser to cannot end the session by itself); its form posts action=logout with a CSRF token
// derived from the session cookie, and the checked request again. The confirmation ends the
// session (logout.Service.End: the session, the grants of clients that ask so, the
// back-channel logout tokens), clears the cookie, and sends the browser to the registered
// post_logout_redirect_uri with state, or shows the signed-out page. Without a session there
// is nothing to end: the browser goes there at once.

// EndSession is the end-session endpoint's handler.
func (h *AuthorizeHandler) EndSession() http.Handler { return http.HandlerFunc(h.serveLogout) }

func (h *AuthorizeHandler) serveLogout(w http.ResponseWriter, r *http.Request) {
	httpapi.PageSecurityHeaders(w.Header(), "")
	var v url.Values
	switch r.Method {
	case http.MethodGet:
		v = r.URL.Query()
	case http.MethodPost:
		var err error
		if v, err = readForm(w, r); err != nil {
			h.errorPage(w, r, "", "bad", http.StatusBadRequest)
			return
		}
	default:
		w.Header().Set("Allow", "GET, POST")
		h.errorPage(w, r, "", "bad", http.StatusMethodNotAllowed)
		return
	}
	lang := pages.Negotiate(v.Get("ui_locales"), r.Header.Get("Accept-Language"))
	if httpapi.NoRepeats(v) != nil {
		h.errorPage(w, r, lang, "bad", http.StatusBadRequest)
		return
	}
	if h.Logout == nil {
		h.errorPage(w, r, lang, "unavailable", http.StatusServiceUnavailable)
		return
	}
	ctx := oauth.WithAuditInfo(r.Context(), withIP(oauth.AuditInfoFrom(r.Context()), httpapi.ClientIP(r)))
	r = r.WithContext(ctx)
	confirm := r.Method == http.MethodPost && v.Get("action") != ""
	req := logout.Request{ClientID: v.Get("client_id"), PostLogoutRedirectURI: v.Get("post_logout_redirect_uri"),
		State: v.Get("state"), UILocales: v.Get("ui_locales")}
	if !confirm {
		req.IDTokenHint = v.Get("id_token_hint")
	}
	checked, err := h.Logout.Check(ctx, req)
	if errors.Is(err, logout.ErrBadRequest) {
		kind := "bad"
		if errors.Is(err, logout.ErrUnregisteredURI) {
			kind = "redirect"
		}
		h.errorPage(w, r, lang, kind, http.StatusBadRequest)
		return
	}
	if err != nil {
		h.failure(w, r, lang, err)
		return
	}
	cookie := h.cookie(r, "sid")
	if confirm {
		h.confirmLogout(w, r, lang, v, cookie, checked)
		return
	}
	sess, _, err := h.Users.SessionUser(ctx, cookie)
	if err != nil {
		h.failure(w, r, lang, err)
		return
	}
	if sess == nil { // signed out already: nothing to confirm
		h.afterLogout(w, r, lang, checked)
		return
	}
	f := pages.LogoutForm{Action: httpapi.PathLogout, CSRF: logoutCSRF(cookie), RedirectURI: checked.RedirectURI,
		State: checked.State, UILocales: checked.UILocales}
	if checked.Client != nil {
		f.ClientID, f.ClientName = checked.Client.ID, checked.Client.Name
	}
	// The form's answer redirects to the post_logout_redirect_uri: CSP's form-action names it.
	h.render(w, r, lang, checked.RedirectURI, false, func(b io.Writer) error { return h.Pages.LogoutConfirm(b, lang, f) })
}

// confirmLogout answers the confirmation: its CSRF token must be the session cookie's; a
// refused one changes nothing. A browser with no session cookie is signed out already (a
// second click on Sign out, after the first answer cleared the cookie): it is answered as a
// logout without a session is, and nothing is ended.
func (h *AuthorizeHandler) confirmLogout(w http.ResponseWriter, r *http.Request, lang string, v url.Values, cookie string, checked *logout.Checked) {
	if v.Get("action") != "logout" {
		h.errorPage(w, r, lang, "bad", http.StatusBadRequest)
		return
	}
	if cookie == "" {
		h.afterLogout(w, r, lang, checked)
		return
	}
	if subtle.ConstantTimeCompare([]byte(v.Get("csrf_token")), []byte(logoutCSRF(cookie))) != 1 {
		h.errorPage(w, r, lang, "forbidden", http.StatusForbidden)
		return
	}
	if _, err := h.Logout.End(r.Context(), cookie); err != nil {
		h.failure(w, r, lang, err)
		return
	}
	h.setCookie(w, "sid", "", -1)
	h.afterLogout(w, r, lang, checked)
}

// afterLogout sends the browser to the registered post_logout_redirect_uri with state (303),
// or shows the signed-out page.
func (h *AuthorizeHandler) afterLogout(w http.ResponseWriter, r *http.Request, lang string, checked *logout.Checked) {
	if to := checked.Redirect(); to != "" {
		w.Header().Set("Location", to)
		w.WriteHeader(http.StatusSeeOther)
		return
	}
	h.render(w, r, lang, "", false, func(b io.Writer) error { return h.Pages.LoggedOut(b, lang) })
}

// logoutCSRF is the confirmation's CSRF token: a hash of the session cookie, which another
// site can neither read (HttpOnly) nor derive the token from.
func logoutCSRF(cookie string) string { return oauth.HashToken("logout-csrf." + cookie) }
