package web

import (
	"bytes"
	"io"
	"net/http"

	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/pages"
	"github.com/acmebank/authserver/shared/signin"
)

// The pages of the sign-in: the state machine (package signin) decides the step; show renders
// it. Every page is a form of the pending request, with its CSRF token, posted back to the
// authorization endpoint.

// passkeyLabels are the catalogue keys of the passkey button of each ceremony's action.
var passkeyLabels = map[signin.Action]string{
	signin.ActPasskeyLogin:    "passkey.signin",
	signin.ActPasskey:         "passkey.use",
	signin.ActRegisterPasskey: "passkey.add",
	signin.ActPayPasskey:      "payment.passkey",
}

// show sets the session cookie the outcome asks for and renders the page of its step, with a
// CSP whose form-action allows the client's redirect URI (browsers apply form-action to the
// redirect that follows a form post); a page with a passkey form may load passkey.js.
func (h *AuthorizeHandler) show(w http.ResponseWriter, r *http.Request, csrf string, out signin.Outcome, problem pages.LoginProblem) {
	h.sessionCookie(w, out)
	lang := pages.Negotiate(out.Request.UILocales, r.Header.Get("Accept-Language"))
	redirect := oauth.RedirectURIOf(out.Request, out.Client)
	f := pages.Form{Action: httpapi.PathAuthorize, RequestID: out.Request.ID, CSRF: csrf, Client: out.Client,
		RedirectURI: redirect, OfferPasskey: out.OfferPasskey}
	if p := out.Passkey; p != nil {
		mode := "get"
		if p.Create {
			mode = "create"
		}
		f.Passkey = &pages.PasskeyView{Mode: mode, Options: p.Options, Action: string(p.Action),
			Label: passkeyLabels[p.Action], Primary: out.Step == signin.StepAddPasskey || out.Step == signin.StepPayment}
	}
	var page func(io.Writer) error
	switch out.Step {
	case signin.StepLogin:
		page = func(b io.Writer) error { return h.Pages.Login(b, lang, f, out.Username, problem) }
	case signin.StepSecond:
		st := pages.MFAState{HasTOTP: out.HasTOTP, Failed: out.Failed, CodeUsed: out.CodeUsed}
		page = func(b io.Writer) error { return h.Pages.MFA(b, lang, f, st) }
	case signin.StepEnrol:
		page = func(b io.Writer) error { return h.Pages.TOTP(b, lang, f, out.TOTP.QRCode, out.TOTP.Secret, out.Failed) }
	case signin.StepCodes:
		page = func(b io.Writer) error { return h.Pages.RecoveryCodes(b, lang, f, out.RecoveryCodes) }
	case signin.StepConsent:
		page = func(b io.Writer) error {
			return h.Pages.Consent(b, lang, f, displayName(out.User), out.Request.Scopes, out.Request.AuthorizationDetails)
		}
	case signin.StepPayment:
		st := pages.PaymentState{TOTP: out.PaymentTOTP, NoFactor: out.NoPaymentFactor, Failed: out.Failed, CodeUsed: out.CodeUsed}
		page = func(b io.Writer) error {
			return h.Pages.Payment(b, lang, f, displayName(out.User), out.Request.Scopes, out.Request.AuthorizationDetails, st)
		}
	case signin.StepAddPasskey:
		page = func(b io.Writer) error { return h.Pages.PasskeyAdd(b, lang, f) }
	default:
		h.errorPage(w, r, lang, "bad", http.StatusBadRequest)
		return
	}
	h.render(w, r, lang, redirect, f.Passkey != nil, page)
}

// sessionCookie sets the session cookie the outcome opened, or clears the one it ended.
func (h *AuthorizeHandler) sessionCookie(w http.ResponseWriter, out signin.Outcome) {
	switch {
	case out.NewSession != "":
		h.setCookie(w, "sid", out.NewSession, int(h.Service.Lifetimes.Session.Seconds()))
	case out.EndSession:
		h.setCookie(w, "sid", "", -1)
	}
}

// render writes a page of a pending request rendered whole beforehand (a page that fails to
// render becomes an error page), with a CSP whose form-action allows the client's redirect URI;
// script lets it load passkey.js from this origin (and nothing else: no inline script).
func (h *AuthorizeHandler) render(w http.ResponseWriter, r *http.Request, lang, redirectURI string, script bool, page func(io.Writer) error) {
	var b bytes.Buffer
	if err := page(&b); err != nil {
		h.failure(w, r, lang, err)
		return
	}
	writePage(w, http.StatusOK, cspSource(redirectURI), b.Bytes(), script)
}
