package web

import (
	"context"
	"crypto/subtle"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"

	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/pages"
	"github.com/acmebank/authserver/shared/receipt"
)

// The Connected apps page (httpapi.PathApps): for the session cookie's user, each app's live
// grant, and a form per grant that withdraws it (oauth.Service.WithdrawGrant, which holds the
// rule that only the grant's own user may). GET shows the page; POST withdraws and sends the
// browser back to it (303). Without a session the page says to sign in first: a sign-in on
// these pages belongs to an app's authorization request, so there is none of its own to send
// the browser to.

// maxGrantID bounds a posted grant id (ours are 25 characters).
const maxGrantID = 64

// Apps is the Connected apps page's handler, served beside the authorization endpoint with
// its cookies, pages and services.
func (h *AuthorizeHandler) Apps() http.Handler { return http.HandlerFunc(h.serveApps) }

func (h *AuthorizeHandler) serveApps(w http.ResponseWriter, r *http.Request) {
	httpapi.PageSecurityHeaders(w.Header(), "")
	lang := pages.Negotiate(r.URL.Query().Get("ui_locales"), r.Header.Get("Accept-Language"))
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		h.errorPage(w, r, lang, "bad", http.StatusMethodNotAllowed)
		return
	}
	ctx := r.Context()
	sid := h.cookie(r, "sid")
	sess, user, err := h.Users.SessionUser(ctx, sid)
	if err != nil {
		h.failure(w, r, lang, err)
		return
	}
	if sess == nil {
		if r.Method == http.MethodPost {
			h.errorPage(w, r, lang, "forbidden", http.StatusForbidden)
			return
		}
		h.render(w, r, lang, "", false, func(b io.Writer) error { return h.Pages.AppsSignedOut(b, lang) })
		return
	}
	ctx = oauth.WithAuditInfo(ctx, withIP(oauth.AuditInfoFrom(ctx), httpapi.ClientIP(r)))
	if r.Method == http.MethodPost {
		h.withdraw(w, r.WithContext(ctx), lang, user, sid)
		return
	}
	list, err := h.Service.CustomerGrants(ctx, user.UID)
	if err != nil {
		h.failure(w, r, lang, err)
		return
	}
	withdrawn := r.URL.Query().Get("withdrawn")
	apps := make([]pages.App, 0, len(list))
	clients := map[string]appClient{}
	for _, rec := range list {
		g := rec.Grant
		if g.ID == withdrawn {
			continue // just withdrawn: an index may list it for a moment more
		}
		c := h.appClient(ctx, clients, g.ClientID)
		a := pages.App{GrantID: g.ID, ClientName: c.name, Scopes: g.Scopes,
			Details: g.AuthorizationDetails, Granted: g.CreatedAt, LastUsed: rec.LastUsed()}
		if c.receipt {
			a.ReceiptURL = receiptURL(g.ID, lang)
		}
		apps = append(apps, a)
	}
	// The form posts back in the page's language, and the page after it says so in it too.
	f := pages.AppsForm{Action: httpapi.PathApps + "?" + url.Values{"ui_locales": {lang}}.Encode(), CSRF: appsCSRF(sid)}
	if h.Logout != nil { // a Sign out button: the end-session endpoint's confirmation, posted here
		f.SignOut, f.SignOutCSRF = httpapi.PathLogout, logoutCSRF(sid)
	}
	h.render(w, r, lang, "", false, func(b io.Writer) error {
		return h.Pages.Apps(b, lang, f, displayName(user), apps, withdrawn != "")
	})
}

// withdraw answers a withdraw form: its CSRF token must be the session's, and the grant the
// user's own (WithdrawGrant); a refused form writes nothing.
func (h *AuthorizeHandler) withdraw(w http.ResponseWriter, r *http.Request, lang string, user *oauth.User, sid string) {
	v, err := readForm(w, r)
	if err == nil {
		err = httpapi.NoRepeats(v)
	}
	id := v.Get("grant_id")
	if err != nil || v.Get("action") != "withdraw" || id == "" || len(id) > maxGrantID {
		h.errorPage(w, r, lang, "bad", http.StatusBadRequest)
		return
	}
	if subtle.ConstantTimeCompare([]byte(v.Get("csrf_token")), []byte(appsCSRF(sid))) != 1 {
		h.errorPage(w, r, lang, "forbidden", http.StatusForbidden)
		return
	}
	err = h.Service.WithdrawGrant(r.Context(), user.UID, id)
	if errors.Is(err, oauth.ErrNotFound) {
		h.errorPage(w, r, lang, "forbidden", http.StatusForbidden)
		return
	}
	if err != nil {
		h.failure(w, r, lang, err)
		return
	}
	w.Header().Set("Location", httpapi.PathApps+"?"+url.Values{"ui_locales": {lang}, "withdrawn": {id}}.Encode())
	w.WriteHeader(http.StatusSeeOther)
}

// appsCSRF is the CSRF token of the Connected apps page's forms: a hash of the session
// cookie, which another site can neither read (HttpOnly) nor derive the token from; it
// changes with every sign-in.
func appsCSRF(sid string) string { return oauth.HashToken("apps-csrf." + sid) }

// appClient is what the apps page shows of a grant's client.
type appClient struct {
	name string
	// receipt: a consent receipt can be made for the client (receipt.Sector), so the page
	// links one.
	receipt bool
}

// appClient is the client id's name (its id when it is gone) and whether its grants get a
// receipt link, looked up once per page in clients.
func (h *AuthorizeHandler) appClient(ctx context.Context, clients map[string]appClient, id string) appClient {
	if c, ok := clients[id]; ok {
		return c
	}
	a := appClient{name: id}
	if c, err := h.Service.Clients.GetClient(ctx, id); err == nil {
		if c.Name != "" {
			a.name = c.Name
		}
		_, serr := receipt.Sector(&c)
		a.receipt = h.Receipts != nil && serr == nil
	} else if !errors.Is(err, oauth.ErrNotFound) {
		h.Log.WarnContext(ctx, "apps page: client name", slog.String("client_id", id), slog.Any("err", err))
	}
	clients[id] = a
	return a
}

func withIP(info oauth.AuditInfo, ip string) oauth.AuditInfo {
	if info.ClientIP == "" {
		info.ClientIP = ip
	}
	return info
}

// The consent receipt download (httpapi.PathAppsReceipt?grant=ID): for the session cookie's
// user, their own grant's signed consent receipt (receipt.Maker, as the grant API signs it),
// as an application/jwt attachment. Whose grant it is, is oauth.Service.CustomerGrant's rule,
// the one the withdrawal keeps: another user's, an unknown or an ended grant is 404, as is a
// withdrawn one. Without a session the page says to sign in first. A download writes nothing.

// AppsReceipt is the consent receipt download's handler.
func (h *AuthorizeHandler) AppsReceipt() http.Handler { return http.HandlerFunc(h.serveReceipt) }

// receiptURL is the download link of grant id's receipt, whose pages speak lang.
func receiptURL(id, lang string) string {
	return httpapi.PathAppsReceipt + "?" + url.Values{"grant": {id}, "ui_locales": {lang}}.Encode()
}

func (h *AuthorizeHandler) serveReceipt(w http.ResponseWriter, r *http.Request) {
	httpapi.PageSecurityHeaders(w.Header(), "")
	q := r.URL.Query()
	lang := pages.Negotiate(q.Get("ui_locales"), r.Header.Get("Accept-Language"))
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		h.errorPage(w, r, lang, "bad", http.StatusMethodNotAllowed)
		return
	}
	ctx := r.Context()
	sess, user, err := h.Users.SessionUser(ctx, h.cookie(r, "sid"))
	if err != nil {
		h.failure(w, r, lang, err)
		return
	}
	if sess == nil {
		h.render(w, r, lang, "", false, func(b io.Writer) error { return h.Pages.AppsSignedOut(b, lang) })
		return
	}
	id := q.Get("grant")
	if httpapi.NoRepeats(q) != nil || id == "" || len(id) > maxGrantID {
		h.errorPage(w, r, lang, "bad", http.StatusBadRequest)
		return
	}
	if h.Receipts == nil {
		h.errorPage(w, r, lang, "noreceipt", http.StatusNotFound)
		return
	}
	ctx = oauth.WithAuditInfo(ctx, withIP(oauth.AuditInfoFrom(ctx), httpapi.ClientIP(r)))
	rec, err := h.Service.CustomerGrant(ctx, user.UID, id, "grant_receipt_refused")
	if errors.Is(err, oauth.ErrNotFound) || (err == nil && rec.Revoked) {
		h.errorPage(w, r, lang, "nogrant", http.StatusNotFound)
		return
	}
	if err != nil {
		h.failure(w, r, lang, err)
		return
	}
	jws, err := h.Receipts.Receipt(ctx, rec.Grant)
	if errors.Is(err, receipt.ErrNoSector) {
		h.errorPage(w, r, lang, "noreceipt", http.StatusNotFound)
		return
	}
	if err != nil {
		h.failure(w, r, lang, err)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "application/jwt")
	hdr.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": "consent-receipt-" + rec.Grant.ID + ".jwt"}))
	hdr.Set("Content-Length", strconv.Itoa(len(jws)))
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, jws) // the client has gone: nothing to report
}
