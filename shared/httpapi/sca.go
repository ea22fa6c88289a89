package httpapi

import (
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/pages"
)

// Strong customer authentication on the pages: after a sign-in the request may need a second
// factor (oauth.Service.NeedsStrongAuth); the user then confirms with a passkey, an
// authenticator app code or a recovery code, or, holding none, sets one up. Every step is a
// form of the pending request, with its CSRF token, answered by the authorize endpoint.

// totpIssuer names the bank in authenticator apps.
const totpIssuer = "Acme Bank"

// flow is one answer of the pages: the pending request, its client, the form state and the
// page language.
type flow struct {
	w      http.ResponseWriter
	r      *http.Request
	req    *oauth.AuthRequest
	client *oauth.Client
	form   pages.Form
	lang   string
}

// next shows what follows a sign-in or a second factor: the step the request still needs,
// else the consent page (with the offer of a passkey to a user who has none).
func (h *AuthorizeHandler) next(f flow, user *oauth.User, sess *oauth.Session) {
	factors, err := h.Service.Factors.Factors(f.r.Context(), user.UID)
	if err != nil {
		h.failure(f.w, f.r, f.lang, err)
		return
	}
	if h.Service.NeedsStrongAuth(f.req, sess, factors) {
		if factors.Any() {
			h.showMFA(f, user, factors, false)
		} else {
			h.showEnrolment(f, user, false)
		}
		return
	}
	f.form.OfferPasskey = h.Service.Passkeys != nil && !factors.Has(oauth.FactorPasskey)
	h.render(f.w, f.r, f.req, f.client, func(b io.Writer) error {
		return h.Pages.Consent(b, f.lang, f.form, displayName(user), f.req.Scopes)
	})
}

// showMFA asks for the second factor, offering the user's passkeys when they have one.
func (h *AuthorizeHandler) showMFA(f flow, user *oauth.User, factors oauth.UserFactors, failed bool) {
	if h.Service.Passkeys != nil && factors.Has(oauth.FactorPasskey) {
		c, err := h.Service.BeginPasskeyStepUp(f.r.Context(), user)
		if err != nil {
			h.failure(f.w, f.r, f.lang, err)
			return
		}
		if !h.keepCeremony(f, c) {
			return
		}
		f.form.Passkey = &pages.PasskeyView{Mode: "get", Options: string(c.Options), Action: "mfa_passkey", Label: "passkey.use"}
	}
	h.renderPage(f, func(b io.Writer) error { return h.Pages.MFA(b, f.lang, f.form, factors.Has(oauth.FactorTOTP), failed) })
}

// showEnrolment sets up a second factor for a user who has none: an authenticator app (the
// secret is kept in the pending request until a code proves the app holds it), or a passkey.
func (h *AuthorizeHandler) showEnrolment(f flow, user *oauth.User, failed bool) {
	e, err := h.Service.NewTOTP(user, totpIssuer, f.req.PendingTOTP)
	if err != nil {
		h.failure(f.w, f.r, f.lang, err)
		return
	}
	f.req.PendingTOTP = e.Secret
	if h.Service.Passkeys != nil {
		c, err := h.Service.BeginPasskeyRegistration(f.r.Context(), user)
		if err != nil {
			h.failure(f.w, f.r, f.lang, err)
			return
		}
		f.req.Ceremony = c.State
		f.form.Passkey = &pages.PasskeyView{Mode: "create", Options: string(c.Options), Action: "passkey_register", Label: "passkey.add"}
	}
	if err := h.Service.Interactions.PutAuthRequest(f.r.Context(), *f.req); err != nil {
		h.failure(f.w, f.r, f.lang, err)
		return
	}
	h.renderPage(f, func(b io.Writer) error { return h.Pages.TOTP(b, f.lang, f.form, e.QRCode, e.Secret, failed) })
}

// showPasskeyAdd offers a signed-in user to add a passkey.
func (h *AuthorizeHandler) showPasskeyAdd(f flow, user *oauth.User) {
	c, err := h.Service.BeginPasskeyRegistration(f.r.Context(), user)
	if err != nil {
		h.failure(f.w, f.r, f.lang, err)
		return
	}
	if !h.keepCeremony(f, c) {
		return
	}
	f.form.Passkey = &pages.PasskeyView{Mode: "create", Options: string(c.Options), Action: "passkey_register", Label: "passkey.add", Primary: true}
	h.renderPage(f, func(b io.Writer) error { return h.Pages.PasskeyAdd(b, f.lang, f.form) })
}

// loginWithPasskey renders the login page with the passkey sign-in (discoverable
// credentials), its ceremony kept in req: the caller stores req.
func (h *AuthorizeHandler) loginWithPasskey(f *flow) error {
	if h.Service.Passkeys == nil {
		return nil
	}
	c, err := h.Service.BeginPasskeyLogin()
	if err != nil {
		return err
	}
	f.req.Ceremony = c.State
	f.form.Passkey = &pages.PasskeyView{Mode: "get", Options: string(c.Options), Action: "passkey_login", Label: "passkey.signin"}
	return nil
}

// keepCeremony stores a started ceremony with the pending request.
func (h *AuthorizeHandler) keepCeremony(f flow, c oauth.Ceremony) bool {
	f.req.Ceremony = c.State
	if err := h.Service.Interactions.PutAuthRequest(f.r.Context(), *f.req); err != nil {
		h.failure(f.w, f.r, f.lang, err)
		return false
	}
	return true
}

// takeCeremony takes the ceremony of the pending request, once: the request is taken (of
// racing answers one gets it) and put back without it. ok is false when the page was answered
// already (the error page is shown).
func (h *AuthorizeHandler) takeCeremony(f flow) ([]byte, bool) {
	ctx := f.r.Context()
	taken, err := h.Service.Interactions.TakeAuthRequest(ctx, f.req.ID, h.Service.Clock.Now())
	if errors.Is(err, oauth.ErrNotFound) {
		h.errorPage(f.w, f.r, f.lang, "expired", http.StatusBadRequest)
		return nil, false
	}
	if err != nil {
		h.failure(f.w, f.r, f.lang, err)
		return nil, false
	}
	state := taken.Ceremony
	taken.Ceremony = nil
	if err := h.Service.Interactions.PutAuthRequest(ctx, taken); err != nil {
		h.failure(f.w, f.r, f.lang, err)
		return nil, false
	}
	*f.req = taken
	if len(state) == 0 {
		h.errorPage(f.w, f.r, f.lang, "forbidden", http.StatusForbidden)
		return nil, false
	}
	return state, true
}

// factorStep answers the second-factor and set-up forms of a signed-in user.
func (h *AuthorizeHandler) factorStep(f flow, action string, v map[string][]string) {
	ctx := f.r.Context()
	sess, user, err := h.Service.SessionUser(ctx, h.cookie(f.r, "sid"))
	if err != nil {
		h.failure(f.w, f.r, f.lang, err)
		return
	}
	if sess == nil {
		if err := h.loginWithPasskey(&f); err != nil {
			h.failure(f.w, f.r, f.lang, err)
			return
		}
		if err := h.Service.Interactions.PutAuthRequest(ctx, *f.req); err != nil {
			h.failure(f.w, f.r, f.lang, err)
			return
		}
		h.renderPage(f, func(b io.Writer) error { return h.Pages.Login(b, f.lang, f.form, "", pages.LoginProblem{}) })
		return
	}
	get := func(k string) string {
		if vs := v[k]; len(vs) > 0 {
			return strings.TrimSpace(vs[0])
		}
		return ""
	}
	ip := clientIP(f.r)
	var methods []string
	switch action {
	case "continue":
		h.next(f, user, sess)
		return
	case "passkey_offer":
		h.showPasskeyAdd(f, user)
		return
	case "mfa_totp", "mfa_recovery":
		check := h.Service.VerifyTOTP
		if action == "mfa_recovery" {
			check = h.Service.UseRecoveryCode
		}
		if err := check(ctx, user.UID, get("code"), ip); err != nil {
			h.factorFailed(f, user, err)
			return
		}
		methods = []string{oauth.AMROTP}
	case "mfa_passkey":
		state, ok := h.takeCeremony(f)
		if !ok {
			return
		}
		if _, methods, err = h.Service.FinishPasskey(ctx, user.UID, state, []byte(get("credential")), ip); err != nil {
			h.factorFailed(f, user, err)
			return
		}
	case "totp_enroll":
		if f.req.PendingTOTP == "" {
			h.errorPage(f.w, f.r, f.lang, "bad", http.StatusBadRequest)
			return
		}
		codes, err := h.Service.EnrollTOTP(ctx, user.UID, f.req.PendingTOTP, get("code"), ip)
		if errors.Is(err, oauth.ErrFactorFailed) {
			h.showEnrolment(f, user, true)
			return
		}
		if err != nil {
			h.failure(f.w, f.r, f.lang, err)
			return
		}
		f.req.PendingTOTP = ""
		if err := h.Service.Interactions.PutAuthRequest(ctx, *f.req); err != nil {
			h.failure(f.w, f.r, f.lang, err)
			return
		}
		if err := h.Service.StepUp(ctx, sess, oauth.AMROTP); err != nil {
			h.failure(f.w, f.r, f.lang, err)
			return
		}
		h.renderPage(f, func(b io.Writer) error { return h.Pages.RecoveryCodes(b, f.lang, f.form, codes) })
		return
	case "passkey_register":
		state, ok := h.takeCeremony(f)
		if !ok {
			return
		}
		if methods, err = h.Service.FinishPasskeyRegistration(ctx, user, state, []byte(get("credential")), ip); err != nil {
			h.factorFailed(f, user, err)
			return
		}
	default:
		h.errorPage(f.w, f.r, f.lang, "bad", http.StatusBadRequest)
		return
	}
	if err := h.Service.StepUp(ctx, sess, methods...); err != nil {
		h.failure(f.w, f.r, f.lang, err)
		return
	}
	h.next(f, user, sess)
}

// factorFailed shows the step again with the one message of every refused attempt.
func (h *AuthorizeHandler) factorFailed(f flow, user *oauth.User, err error) {
	if !errors.Is(err, oauth.ErrFactorFailed) {
		h.failure(f.w, f.r, f.lang, err)
		return
	}
	factors, ferr := h.Service.Factors.Factors(f.r.Context(), user.UID)
	if ferr != nil {
		h.failure(f.w, f.r, f.lang, ferr)
		return
	}
	if !factors.Any() {
		h.showEnrolment(f, user, true)
		return
	}
	h.showMFA(f, user, factors, true)
}

// passkeyLogin answers the login page's passkey sign-in: the user is whoever the passkey names.
func (h *AuthorizeHandler) passkeyLogin(f flow, credential string) {
	ctx := f.r.Context()
	state, ok := h.takeCeremony(f)
	if !ok {
		return
	}
	user, methods, err := h.Service.FinishPasskey(ctx, "", state, []byte(credential), clientIP(f.r))
	if errors.Is(err, oauth.ErrFactorFailed) {
		if err := h.loginWithPasskey(&f); err != nil {
			h.failure(f.w, f.r, f.lang, err)
			return
		}
		if err := h.Service.Interactions.PutAuthRequest(ctx, *f.req); err != nil {
			h.failure(f.w, f.r, f.lang, err)
			return
		}
		h.renderPage(f, func(b io.Writer) error {
			return h.Pages.Login(b, f.lang, f.form, "", pages.LoginProblem{Failed: true})
		})
		return
	}
	if err != nil {
		h.failure(f.w, f.r, f.lang, err)
		return
	}
	sess, token, err := h.Service.StartSession(ctx, user, methods...)
	if err != nil {
		h.failure(f.w, f.r, f.lang, err)
		return
	}
	if old := h.cookie(f.r, "sid"); old != "" {
		_ = h.Service.Logout(ctx, old)
	}
	h.setCookie(f.w, "sid", token, int(h.Service.Lifetimes.Session.Seconds()))
	h.next(f, user, sess)
}

// renderPage writes a page of the flow; a page with a passkey form may run passkey.js.
func (h *AuthorizeHandler) renderPage(f flow, page func(io.Writer) error) {
	if f.form.Passkey != nil {
		h.renderScripted(f.w, f.r, f.req, f.client, page)
		return
	}
	h.render(f.w, f.r, f.req, f.client, page)
}
