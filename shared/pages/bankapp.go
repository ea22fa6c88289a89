package pages

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/acmebank/authserver/shared/oauth"
)

// The local bank app page (the local server only, standing in for the bank's mobile app): the
// customer signs in, sees the CIBA requests awaiting their decision (the client, the binding
// message to compare with the client's screen, the access asked for and a payment's amount and
// payee), and approves one with a passkey or a code, or denies it. The rules are package
// bankapp's; this renders the step it returns.

// Steps of the bank app page, as package bankapp names them.
const (
	BankAppSignedOut = "signed_out"
	BankAppList      = "list"
	BankAppApproving = "approving"
	BankAppDone      = "done"
)

// BankRequest is a request as the page shows it.
type BankRequest struct {
	Ref, ClientName string
	// BindingMessage is shown as it is (escaped), for the customer to compare with the
	// client's screen.
	BindingMessage string
	Scopes         oauth.Scopes
	// Details are the request's authorization_details (validated JSON, or empty).
	Details json.RawMessage
}

// BankApp is what one rendering of the page shows.
type BankApp struct {
	// Step is one of the BankApp* steps.
	Step     string
	UserName string
	// Form carries the forms' action and CSRF token; on the approving step its RequestID is
	// the approval attempt and Passkey, when set, the passkey ceremony (passkey.js).
	Form        Form
	LoginFailed bool
	Pending     []BankRequest
	// Current is the request being approved (approving) or just decided (done).
	Current *BankRequest
	// TOTP: a code is accepted; Failed, CodeUsed: the last factor was refused.
	TOTP, Failed, CodeUsed bool
	// Approved or denied (done); Gone: the request was no longer pending.
	Approved, Gone bool
}

// BankAppData is the bank app page.
type BankAppData struct {
	Common   Common
	Form     Form
	Step     string
	UserName string
	// LoginFailed shows the sign-in's one message.
	LoginFailed bool
	Pending     []BankRequestView
	Current     *BankRequestView
	TOTP        bool
	Failed      bool
	CodeUsed    bool
	Approved    bool
	Gone        bool
	// NoFactor: the customer has no factor this request accepts; they can only deny.
	NoFactor bool
}

// BankRequestView is a request in words, with the page's Common for its sub-template.
type BankRequestView struct {
	Common                          Common
	Ref, ClientName, BindingMessage string
	Scopes                          []ScopeView
	Details                         []DetailView
	MovesMoney                      bool
}

func bankRequestView(c Common, r BankRequest) (BankRequestView, error) {
	lang, m := c.Lang, c.M
	dv, err := detailViews(lang, r.Details)
	if err != nil {
		return BankRequestView{}, fmt.Errorf("render bank app page: request %s: %w", r.Ref, err)
	}
	v := BankRequestView{Common: c, Ref: r.Ref, ClientName: r.ClientName, BindingMessage: r.BindingMessage, Scopes: scopeViews(m, r.Scopes), Details: dv}
	for _, d := range dv {
		v.MovesMoney = v.MovesMoney || d.MovesMoney
	}
	return v, nil
}

// BankApp renders the bank app page.
func (p *Pages) BankApp(w io.Writer, lang string, a BankApp) error {
	m := Messages(lang)
	title := map[string]string{BankAppSignedOut: "bankapp.signin.title", BankAppList: "bankapp.list.title",
		BankAppApproving: "bankapp.approve.title", BankAppDone: "bankapp.list.title"}[a.Step]
	if title == "" {
		return fmt.Errorf("render bank app page: unknown step %q", a.Step)
	}
	t := m[title]
	if a.LoginFailed || a.Failed {
		t = fmt.Sprintf(m["page.title.err"], t)
	}
	d := BankAppData{Common: p.common(lang, t), Form: a.Form, Step: a.Step, UserName: a.UserName, LoginFailed: a.LoginFailed,
		TOTP: a.TOTP, Failed: a.Failed, CodeUsed: a.CodeUsed, Approved: a.Approved, Gone: a.Gone}
	d.NoFactor = a.Step == BankAppApproving && !a.TOTP && a.Form.Passkey == nil
	for _, r := range a.Pending {
		v, err := bankRequestView(d.Common, r)
		if err != nil {
			return err
		}
		d.Pending = append(d.Pending, v)
	}
	if a.Current != nil {
		v, err := bankRequestView(d.Common, *a.Current)
		if err != nil {
			return err
		}
		d.Current = &v
	}
	return p.render(w, "bankapp", &d)
}
