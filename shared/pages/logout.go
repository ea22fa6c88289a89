package pages

import "io"

// The end-session pages (shared/web's logout handler, OpenID RP-Initiated Logout 1.0): the
// confirmation asked before a session ends, and the page of a browser signed out with nowhere
// to go back to.

// LogoutForm is the confirmation's form: where it posts, its CSRF token, and the checked
// request it carries back (the client's id, the registered post_logout_redirect_uri, state and
// ui_locales), with the client's name to show ("" when no app asked).
type LogoutForm struct {
	Action, CSRF                            string
	ClientID, RedirectURI, State, UILocales string
	ClientName                              string
}

// LogoutData is the end-session page.
type LogoutData struct {
	Common Common
	LogoutForm
	// Done shows that the browser is signed out, instead of the confirmation.
	Done bool
}

// LogoutConfirm renders the confirmation: "Sign out of Acme Bank?".
func (p *Pages) LogoutConfirm(w io.Writer, lang string, f LogoutForm) error {
	m := Messages(lang)
	return p.render(w, "logout", &LogoutData{Common: p.common(lang, m["logout.title"]), LogoutForm: f})
}

// LoggedOut renders the page of a browser signed out.
func (p *Pages) LoggedOut(w io.Writer, lang string) error {
	m := Messages(lang)
	return p.render(w, "logout", &LogoutData{Common: p.common(lang, m["logout.done.heading"]), Done: true})
}
