package web

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/bankapp"
	"github.com/acmebank/authserver/shared/ciba"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/pages"
	"github.com/acmebank/authserver/shared/wire"
)

// The local bank app page (PathBankApp): on the local server only (shared/app mounts it; no
// Lambda function does), it stands in for the bank's mobile app, the authentication device of
// CIBA. A customer signs in with their password (the app's own sign-in, a session of its own
// under its own cookie), sees the requests awaiting them and approves one with a passkey or a
// TOTP code bound to it, or denies it. Every rule is package bankapp's state machine; this
// handler reads the form, hands it over and renders the step that comes back.

// PathBankApp is the bank app page's path on the local server.
const PathBankApp = "/bank-app"

// bankSessionCookie names the bank app's session cookie (__Host- prefixed over https): apart
// from the pages' sid, so signing in to the app signs no browser in to the authorization
// pages, and the reverse.
const bankSessionCookie = "bsid"

// BankApp is the bank app page over the customers' authentication users and CIBA's use case
// requests (wire.CIBA), with the pages' cookies, security headers and error pages.
func BankApp(d wire.Deps, users *authn.Service, requests bankapp.Requests) (http.Handler, error) {
	svc, err := d.TokenDomain()
	if err != nil {
		return nil, err
	}
	if users == nil {
		return nil, errors.New("bank app: the users' authentication is required")
	}
	pg, err := pages.New(httpapi.PathAssets)
	if err != nil {
		return nil, err
	}
	ah, err := NewAuthorizeHandler(svc, users, pg, d.Log, d.Config.Secure())
	if err != nil {
		return nil, err
	}
	m, err := bankapp.New(bankapp.Deps{Requests: requests, Users: users, Interactions: svc.Interactions, Clock: svc.Clock})
	if err != nil {
		return nil, err
	}
	return httpapi.WithClientAddress(&bankAppHandler{h: ah, m: m}), nil
}

type bankAppHandler struct {
	h *AuthorizeHandler
	m *bankapp.Machine
}

func (b *bankAppHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := b.h
	httpapi.PageSecurityHeaders(w.Header(), "")
	lang := pages.Negotiate(r.URL.Query().Get("ui_locales"), r.Header.Get("Accept-Language"))
	ctx := oauth.WithAuditInfo(r.Context(), withIP(oauth.AuditInfoFrom(r.Context()), httpapi.ClientIP(r)))
	in := bankapp.Input{Session: h.cookie(r, bankSessionCookie), ClientIP: httpapi.ClientIP(r)}
	var out bankapp.Outcome
	var err error
	switch r.Method {
	case http.MethodGet:
		in.Browser = h.browserID(w, r)
		out, err = b.m.Visit(ctx, in)
	case http.MethodPost:
		v, ferr := readForm(w, r)
		if ferr == nil {
			ferr = httpapi.NoRepeats(v)
		}
		action := bankapp.Action(v.Get("action"))
		if ferr != nil || !slices.Contains(bankapp.Actions, action) {
			h.errorPage(w, r, lang, "bad", http.StatusBadRequest)
			return
		}
		in.Browser, in.CSRF, in.Action = h.cookie(r, "bid"), v.Get("csrf_token"), action
		in.Username, in.Password = v.Get("username"), v.Get("password")
		in.Ref, in.Attempt = v.Get("ref"), v.Get("request_id")
		in.Code, in.Credential = strings.TrimSpace(v.Get("code")), strings.TrimSpace(v.Get("credential"))
		out, err = b.m.Act(ctx, in)
	default:
		w.Header().Set("Allow", "GET, POST")
		h.errorPage(w, r, lang, "bad", http.StatusMethodNotAllowed)
		return
	}
	switch {
	case errors.Is(err, bankapp.ErrRefused):
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
	switch {
	case out.NewSession != "":
		h.setCookie(w, bankSessionCookie, out.NewSession, int(h.Service.Lifetimes.Session.Seconds()))
	case out.EndSession:
		h.setCookie(w, bankSessionCookie, "", -1)
	}
	page := pages.BankApp{Step: string(out.Step), LoginFailed: out.LoginFailed, TOTP: out.TOTP, Failed: out.Failed,
		CodeUsed: out.CodeUsed, Approved: out.Approved, Gone: out.Gone,
		Form: pages.Form{Action: PathBankApp + "?" + url.Values{"ui_locales": {lang}}.Encode(), CSRF: out.CSRF, RequestID: out.Attempt}}
	if out.User != nil {
		page.UserName = displayName(out.User)
	}
	if out.Passkey != nil {
		page.Form.Passkey = &pages.PasskeyView{Mode: "get", Options: string(out.Passkey), Action: string(bankapp.ActPasskey),
			Label: "bankapp.passkey", Primary: true}
	}
	for _, p := range out.Pending {
		page.Pending = append(page.Pending, bankRequest(p))
	}
	if out.Request != nil {
		c := bankRequest(*out.Request)
		page.Current = &c
	}
	h.render(w, r, lang, "", page.Form.Passkey != nil, func(w io.Writer) error { return h.Pages.BankApp(w, lang, page) })
}

// bankRequest is what the page shows of a request: never more than a device is given.
func bankRequest(r ciba.DeviceRequest) pages.BankRequest {
	name := r.ClientName
	if name == "" {
		name = r.ClientID
	}
	return pages.BankRequest{Ref: r.Ref, ClientName: name, BindingMessage: r.BindingMessage, Scopes: r.Scopes, Details: r.AuthorizationDetails}
}
