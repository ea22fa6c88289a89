package pages

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// The Connected apps page: after sign-in, the customer sees each app's live grant (its
// scopes and authorization details, said as the consent page says them, when it was given
// and last used) and withdraws any of them.

// App is one grant the Connected apps page lists.
type App struct {
	GrantID    string
	ClientName string
	Scopes     oauth.Scopes
	// Details are the grant's authorization_details (validated JSON, or empty).
	Details json.RawMessage
	// Granted is when the user gave it; LastUsed when it was last exchanged, refreshed or
	// spent (zero: never).
	Granted, LastUsed time.Time
	// ReceiptURL downloads the grant's signed consent receipt; empty: none can be made for
	// its client, and the page links none.
	ReceiptURL string
}

// AppsForm is what the page's withdraw forms carry: where they post and their CSRF token.
type AppsForm struct {
	Action string
	CSRF   string
	// SignOut and SignOutCSRF are the sign-out form's action (the end-session endpoint) and
	// its CSRF token; empty: the page has no sign-out button.
	SignOut, SignOutCSRF string
}

// AppsData is the Connected apps page.
type AppsData struct {
	Common Common
	Action string
	CSRF   string
	// SignOut and SignOutCSRF are the sign-out form's (AppsForm).
	SignOut, SignOutCSRF string
	UserName             string
	Apps                 []AppView
	// Withdrawn shows that a withdrawal just succeeded.
	Withdrawn bool
	// SignedOut shows that no one is signed in, instead of a list.
	SignedOut bool
}

// AppView is one listed grant in words.
type AppView struct {
	GrantID, ClientName string
	Scopes              []ScopeView
	Details             []DetailView
	Granted, LastUsed   string
	ReceiptURL          string
}

// Apps renders the Connected apps page of userName with apps (newest first); withdrawn says a
// withdrawal just succeeded.
func (p *Pages) Apps(w io.Writer, lang string, f AppsForm, userName string, apps []App, withdrawn bool) error {
	m := Messages(lang)
	views := make([]AppView, 0, len(apps))
	for _, a := range apps {
		dv, err := detailViews(lang, a.Details)
		if err != nil {
			return fmt.Errorf("render apps page: grant %s: %w", a.GrantID, err)
		}
		v := AppView{GrantID: a.GrantID, ClientName: a.ClientName, Scopes: scopeViews(m, a.Scopes), Details: dv, Granted: dateOf(m, a.Granted), ReceiptURL: a.ReceiptURL}
		if !a.LastUsed.IsZero() {
			v.LastUsed = dateOf(m, a.LastUsed)
		}
		views = append(views, v)
	}
	d := AppsData{Common: p.common(lang, m["apps.title"]), Action: f.Action, CSRF: f.CSRF, SignOut: f.SignOut, SignOutCSRF: f.SignOutCSRF,
		UserName: userName, Apps: views, Withdrawn: withdrawn}
	return p.render(w, "apps", &d)
}

// AppsSignedOut renders the Connected apps page of a browser where no one is signed in.
func (p *Pages) AppsSignedOut(w io.Writer, lang string) error {
	m := Messages(lang)
	return p.render(w, "apps", &AppsData{Common: p.common(lang, m["apps.signedout.heading"]), SignedOut: true})
}

// dateOf writes the day of t (UTC) in words of the catalogue.
func dateOf(m map[string]string, t time.Time) string {
	u := t.UTC()
	return fmt.Sprintf(m["detail.date.format"], u.Day(), m[fmt.Sprintf("month.%d", int(u.Month()))], u.Year())
}
