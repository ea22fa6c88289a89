// Package bankapp is the local bank app page's rules, as one explicit state machine: the page
// of the local server that stands in for the bank's mobile app, where a customer signs in and
// answers the CIBA requests awaiting them (package ciba: Pending, Request, Decide). The HTTP
// layer (shared/web's bank app page) only renders the step the machine returns and posts the
// customer's action back.
//
// The steps and the actions each accepts (Allowed; any other action is ErrRefused and changes
// nothing stored):
//
//	step         accepts                                        bound to
//	signed_out   sign_in                                        the browser (login CSRF)
//	list         approve, deny, sign_out                        the session
//	approving    approve_passkey, approve_totp, deny, cancel,   the session and one request
//	             sign_out
//
// done is no step one acts in: it is what a decision leads to (the page says what was decided
// and lists what is still pending). The step of a post is the server's, never the form's: no
// session is signed_out; a session and an attempt (the approval ceremony's record) is
// approving; a session and none is list. Every post from list or approving carries the
// session's CSRF token.
//
// An approval is never the password alone: approve only starts the ceremony, which keeps its
// state (the WebAuthn challenge, a nonce) in a pending record (oauth.AuthRequest, Step
// "bank_app") bound to the session, its user and the request's reference, taken once by the
// answer. The answer is a passkey assertion whose challenge binds the request (for a payment
// the dynamic-linking challenge over its details, authn.BeginPaymentPasskey; otherwise
// approvalChallenge over the reference and binding message) or a TOTP code (for a payment
// authn.PayWithTOTP, when the payment policy allows it); the decision carries the session's
// amr plus the step's methods (ciba.Decide refuses one that is not strong). deny needs the
// session only. A wrong code counts toward the factor lockout and starts a new attempt.
package bankapp

import "slices"

// Step is where the customer stands on the page.
type Step string

// The steps of the page.
const (
	// StepSignedOut: no session; the page asks for the app's own sign-in (the password).
	StepSignedOut Step = "signed_out"
	// StepList: signed in; the requests awaiting the customer's decision.
	StepList Step = "list"
	// StepApproving: the customer chose to approve one request; the page asks for the strong
	// step (a passkey or a TOTP code) bound to it.
	StepApproving Step = "approving"
	// StepDone: the request was decided (an outcome, not a step one acts in).
	StepDone Step = "done"
)

// Steps are the steps one acts in, for tests and documentation.
var Steps = []Step{StepSignedOut, StepList, StepApproving}

// Action is what the page posts back (its form's action field).
type Action string

// The actions of the page.
const (
	ActSignIn  Action = "sign_in"
	ActSignOut Action = "sign_out"
	ActApprove Action = "approve"
	ActDeny    Action = "deny"
	ActCancel  Action = "cancel"
	ActPasskey Action = "approve_passkey"
	ActTOTP    Action = "approve_totp"
)

// Actions are every action, for tests and documentation.
var Actions = []Action{ActSignIn, ActSignOut, ActApprove, ActDeny, ActCancel, ActPasskey, ActTOTP}

// accepts is the machine's table: the actions each step accepts.
var accepts = map[Step][]Action{
	StepSignedOut: {ActSignIn},
	StepList:      {ActApprove, ActDeny, ActSignOut},
	StepApproving: {ActPasskey, ActTOTP, ActDeny, ActCancel, ActSignOut},
}

// Allowed reports whether step accepts action. An unknown step accepts nothing.
func Allowed(step Step, action Action) bool { return slices.Contains(accepts[step], action) }
