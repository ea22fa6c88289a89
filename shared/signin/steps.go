// Package signin is the sign-in of a pending authorization request, as one explicit state
// machine: the steps a request goes through between the authorization endpoint and the
// customer's decision, the actions each step accepts, and the user the request is bound to.
// Every sign-in rule lives here; the HTTP layer only renders the step the machine returns and
// posts the customer's action back.
//
// The steps and the actions each accepts (Allowed; any other action is ErrRefused and changes
// nothing stored):
//
//	step         accepts                                   bound to a user
//	login        login, passkey_login                      no
//	second       mfa_totp, mfa_recovery, mfa_passkey,      yes
//	             switch
//	enrol        totp_enroll, passkey_register, switch     yes
//	codes        continue                                  yes
//	consent      allow, deny, switch, passkey_offer        yes
//	payment      payment_passkey, payment_totp, deny,      yes
//	             switch, passkey_offer
//	add_passkey  passkey_register, continue, switch        yes
//
// A request leaves login, bound to the user whose first factor passed and to the session that
// sign-in opened, as a new request (a new id) with nothing of the old one's sign-in state
// carried over; a switch of account starts a new unbound one. Every action on a bound request
// must come with that same session. Which bound step follows a sign-in is decided by enter:
// second when the sign-in must be strong and the user holds a factor, enrol when it must be
// strong and they hold none, consent otherwise, unless the user's consent to the client is
// remembered (remember.go: never for a payment, never with prompt=consent), when the code is
// issued at once. For a payment (authorization_details with a payment_initiation) payment
// replaces consent, and comes at once when the user holds a factor the payment policy accepts
// (its check is the sign-in's strong step). A payment is never allowed by allow: only by
// payment_passkey, a passkey assertion over a challenge derived from its details and a nonce,
// or payment_totp when the policy (AUTH_PAYMENT_FACTORS) accepts TOTP (dynamic linking, oauth's
// dynamic_linking.go). allow, deny, payment_passkey and payment_totp take the request (decided:
// it is gone). The rules the steps guard are in SECURITY.md ("Sign-in integrity").
package signin

import "slices"

// Step is where a pending request stands in the sign-in (kept in oauth.AuthRequest.Step).
type Step string

// The steps of a sign-in.
const (
	// StepLogin: no one has signed in on the request; the login page (password, or a passkey
	// that names its user).
	StepLogin Step = ""
	// StepSecond: the first factor passed; the sign-in must be strong and the user holds a
	// second factor: they confirm with it.
	StepSecond Step = "second"
	// StepEnrol: the first factor passed; the sign-in must be strong and the user holds no
	// second factor: they set one up (their first), which is the sign-in's second step.
	StepEnrol Step = "enrol"
	// StepCodes: an authenticator app was just set up; its recovery codes are shown, once.
	StepCodes Step = "codes"
	// StepConsent: signed in as the request needs; the user allows or denies.
	StepConsent Step = "consent"
	// StepPayment: signed in, on a payment request: the user confirms the payment with a
	// factor the payment policy accepts (dynamic linking), or denies.
	StepPayment Step = "payment"
	// StepAddPasskey: the user chose, on the consent or payment page, to add a passkey.
	StepAddPasskey Step = "add_passkey"
)

// Steps are every step, for tests and documentation.
var Steps = []Step{StepLogin, StepSecond, StepEnrol, StepCodes, StepConsent, StepPayment, StepAddPasskey}

// Action is what a page posts back (its form's action field; the consent form's decision).
type Action string

// The actions of the pages.
const (
	ActLogin           Action = "login"
	ActPasskeyLogin    Action = "passkey_login"
	ActTOTP            Action = "mfa_totp"
	ActRecoveryCode    Action = "mfa_recovery"
	ActPasskey         Action = "mfa_passkey"
	ActEnrolTOTP       Action = "totp_enroll"
	ActRegisterPasskey Action = "passkey_register"
	ActOfferPasskey    Action = "passkey_offer"
	ActContinue        Action = "continue"
	ActAllow           Action = "allow"
	ActDeny            Action = "deny"
	ActSwitch          Action = "switch"
	// ActPayPasskey and ActPayTOTP confirm a payment (the payment step's allow).
	ActPayPasskey Action = "payment_passkey"
	ActPayTOTP    Action = "payment_totp"
)

// Actions are every action, for tests and documentation.
var Actions = []Action{ActLogin, ActPasskeyLogin, ActTOTP, ActRecoveryCode, ActPasskey, ActEnrolTOTP,
	ActRegisterPasskey, ActOfferPasskey, ActContinue, ActAllow, ActDeny, ActSwitch, ActPayPasskey, ActPayTOTP}

// accepts is the machine's table: the actions each step accepts.
var accepts = map[Step][]Action{
	StepLogin:      {ActLogin, ActPasskeyLogin},
	StepSecond:     {ActTOTP, ActRecoveryCode, ActPasskey, ActSwitch},
	StepEnrol:      {ActEnrolTOTP, ActRegisterPasskey, ActSwitch},
	StepCodes:      {ActContinue},
	StepConsent:    {ActAllow, ActDeny, ActSwitch, ActOfferPasskey},
	StepPayment:    {ActPayPasskey, ActPayTOTP, ActDeny, ActSwitch, ActOfferPasskey},
	StepAddPasskey: {ActRegisterPasskey, ActContinue, ActSwitch},
}

// Allowed reports whether step accepts action. An unknown step accepts nothing.
func Allowed(step Step, action Action) bool { return slices.Contains(accepts[step], action) }

// Bound reports whether a request at step must be bound to a user and a session.
func (s Step) Bound() bool { return s != StepLogin }
