package signin

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/oauth"
)

// Errors of Act, besides the service's (authn.ErrBusy: too many password checks at once;
// *oauth.Error: a dependency failed).
var (
	// ErrRefused is an action the request's step does not accept, an action on a bound request
	// without the session it is bound to, a form of another browser (its CSRF token), or a
	// request answered by a racing action meanwhile. Nothing stored has changed.
	ErrRefused = errors.New("signin: this action is not allowed at this step of the sign-in")
	// ErrExpired is an action on a request that does not exist (expired, or decided), or a
	// decision on a pushed request whose request_uri another page's decision spent.
	ErrExpired = errors.New("signin: no such pending request")
)

// DefaultTOTPIssuer names the bank in authenticator apps.
const DefaultTOTPIssuer = "Acme Bank"

// Machine runs the sign-in of pending requests with the domain's services and stores.
type Machine struct {
	// svc is the token domain: the clients, the pending requests, the consent's decision.
	svc *oauth.Service
	// users is the user's authentication: passwords, sessions, second factors.
	users *authn.Service
	// totpIssuer names the bank in authenticator apps.
	totpIssuer string
}

// New returns the machine over grants, which must have the client and interaction stores
// the sign-in reads and writes and a clock, and users (built by authn.New, which checks its
// own). Passkeys may be off (users.PasskeysOn false): the actions that need them are then
// refused.
func New(grants *oauth.Service, users *authn.Service) (*Machine, error) {
	switch {
	case grants == nil:
		return nil, errors.New("signin: no token service")
	case users == nil:
		return nil, errors.New("signin: no authentication service")
	case grants.Clients == nil, grants.Interactions == nil:
		return nil, errors.New("signin: the token service needs its client and interaction stores")
	case grants.Clock == nil:
		return nil, errors.New("signin: the token service needs a clock")
	}
	return &Machine{svc: grants, users: users, totpIssuer: DefaultTOTPIssuer}, nil
}

// Input is one action posted on a pending request's page.
type Input struct {
	RequestID string
	// CSRFHash is the hash of the form's CSRF token with the browser's binding cookie, as the
	// request stored it when its page was first shown.
	CSRFHash string
	// Session is the value of the session cookie ("" without one).
	Session  string
	ClientIP string
	Action   Action
	// Username and Password of a login; Code of a TOTP or recovery code; Credential, the
	// browser's WebAuthn answer as JSON.
	Username, Password, Code, Credential string
}

// Outcome is what the HTTP layer shows after an action: the page of Step for Request, or,
// once the request is decided, the Redirect back to the client.
type Outcome struct {
	Step    Step
	Request *oauth.AuthRequest
	Client  *oauth.Client
	User    *oauth.User
	// Redirect, when set, answers the client: the request is decided (or prompt=none).
	Redirect *oauth.Redirect
	// NewSession is the cookie value of a session this action opened; EndSession asks the
	// caller to clear the session cookie.
	NewSession string
	EndSession bool

	// Passkey is the WebAuthn ceremony the page offers (nil: none).
	Passkey *Passkey
	// Username is shown back on a login page whose sign-in failed (LoginFailed).
	Username    string
	LoginFailed bool
	// Failed: a second factor or a set-up code was refused; CodeUsed: the TOTP code was right
	// but its time step was used already (wait for the next code).
	Failed, CodeUsed bool
	// HasTOTP: the second-factor page offers the authenticator app and recovery codes.
	HasTOTP bool
	// OfferPasskey: the consent or payment page offers to add a passkey.
	OfferPasskey bool
	// PaymentTOTP: the payment page takes a TOTP code (the policy accepts it and the user has
	// an authenticator app); NoPaymentFactor: the user holds no factor the payment policy
	// accepts, and the page says so (add a passkey, if offered, or deny).
	PaymentTOTP, NoPaymentFactor bool
	// TOTP is the authenticator being set up (enrol); RecoveryCodes are shown once (codes).
	TOTP          *authn.TOTPEnrollment
	RecoveryCodes []string
}

// Passkey is a WebAuthn ceremony a page offers: Create (navigator.credentials.create) or get,
// its options as JSON, and the action its answer is posted with.
type Passkey struct {
	Create  bool
	Options string
	Action  Action
}

// Start opens the sign-in of a request the authorization endpoint validated: prompt=none is
// answered at once; a session that may answer the request binds it (at the step the session
// and the user's factors call for), else the login page. The request is stored.
func (m *Machine) Start(ctx context.Context, req *oauth.AuthRequest, client *oauth.Client, session string) (Outcome, error) {
	sess, user, err := m.users.SessionUser(ctx, session)
	if err != nil {
		return Outcome{}, err
	}
	now := m.svc.Clock.Now()
	if req.HasPrompt("none") {
		code := "login_required"
		if req.SessionSatisfies(sess, now) {
			code = "consent_required" // consent is asked for every authorization
		}
		to, err := m.svc.LoginRequiredRedirect(ctx, req, client, code)
		if err != nil {
			return Outcome{}, err
		}
		return Outcome{Redirect: to}, nil
	}
	req.Step, req.UID, req.SessionHash, req.PendingTOTP, req.Ceremony, req.PaymentNonce = string(StepLogin), "", "", "", nil, nil
	var out Outcome
	if req.SessionSatisfies(sess, now) && !req.HasPrompt("select_account") {
		bind(req, user, sess)
		out, err = m.enter(ctx, req, client, user, sess)
	} else {
		out, err = m.loginPage(req, client)
	}
	if err != nil {
		return Outcome{}, err
	}
	return out, m.keep(ctx, out, req)
}

// Act answers one action on a pending request. An action the request's step does not accept,
// or one on a bound request without its session, is ErrRefused and writes nothing.
func (m *Machine) Act(ctx context.Context, in Input) (Outcome, error) {
	now := m.svc.Clock.Now()
	req, err := m.svc.Interactions.GetAuthRequest(ctx, in.RequestID, now)
	if errors.Is(err, oauth.ErrNotFound) {
		return Outcome{}, ErrExpired
	}
	if err != nil {
		return Outcome{}, oauth.AsError(err)
	}
	ctx = withClient(ctx, req.ClientID, in.ClientIP) // every audit line of the sign-in names its client
	step := Step(req.Step)
	if in.CSRFHash == "" || subtle.ConstantTimeCompare([]byte(in.CSRFHash), []byte(req.CSRFHash)) != 1 {
		return m.refuse(ctx, step, in, "csrf")
	}
	if !Allowed(step, in.Action) {
		return m.refuse(ctx, step, in, "step")
	}
	client, err := m.svc.Clients.GetClient(ctx, req.ClientID)
	if err != nil {
		return Outcome{}, oauth.AsError(err)
	}
	if !step.Bound() {
		if req.UID != "" || req.SessionHash != "" {
			return m.refuse(ctx, step, in, "binding")
		}
		if in.Action == ActLogin {
			return m.login(ctx, &req, &client, in)
		}
		return m.passkeyLogin(ctx, &req, &client, in)
	}
	sess, user, err := m.users.SessionUser(ctx, in.Session)
	if err != nil {
		return Outcome{}, err
	}
	if sess == nil || req.UID == "" || !sameHash(sess.Hash, req.SessionHash) || user.UID != req.UID {
		return m.refuse(ctx, step, in, "session")
	}
	b := bound{req: &req, client: &client, user: user, sess: sess, in: in}
	switch in.Action {
	case ActTOTP, ActRecoveryCode:
		return m.code(ctx, b)
	case ActPasskey:
		return m.passkeyStep(ctx, b)
	case ActEnrolTOTP:
		return m.enrolTOTP(ctx, b)
	case ActRegisterPasskey:
		return m.registerPasskey(ctx, b, step)
	case ActOfferPasskey:
		return m.offerPasskey(ctx, b)
	case ActContinue:
		return m.continueTo(ctx, b)
	case ActAllow, ActDeny:
		return m.decide(ctx, b)
	case ActPayPasskey:
		return m.payPasskey(ctx, b)
	case ActPayTOTP:
		return m.payTOTP(ctx, b)
	case ActSwitch:
		return m.switchAccount(ctx, b)
	}
	return m.refuse(ctx, step, in, "action") // not reached: Allowed knows only these actions
}

// bound is an action on a request bound to user and their session sess.
type bound struct {
	req    *oauth.AuthRequest
	client *oauth.Client
	user   *oauth.User
	sess   *oauth.Session
	in     Input
}

// refuse audits an action refused by the machine and returns ErrRefused; nothing is written.
func (m *Machine) refuse(ctx context.Context, step Step, in Input, why string) (Outcome, error) {
	m.users.AuditSignIn(ctx, "signin_refused", "", slog.String("reason", why),
		slog.String("step", string(step)), slog.String("action", string(in.Action)))
	return Outcome{}, ErrRefused
}

// login checks a username and password; on success the request is taken (of racing sign-ins
// on one request one gets it; the others are refused and open no session) and replaced by a
// new one bound to the user and the session the login opens.
func (m *Machine) login(ctx context.Context, req *oauth.AuthRequest, client *oauth.Client, in Input) (Outcome, error) {
	user, err := m.users.CheckPassword(ctx, in.Username, in.Password, in.ClientIP)
	if errors.Is(err, authn.ErrLoginFailed) {
		return Outcome{Step: StepLogin, Request: req, Client: client, Username: in.Username, LoginFailed: true}, nil
	}
	if err != nil {
		return Outcome{}, err
	}
	taken, err := m.takeAsRead(ctx, req)
	if err != nil {
		return Outcome{}, err
	}
	sess, token, err := m.users.StartSession(ctx, user, oauth.AMRPassword)
	if err != nil {
		return Outcome{}, err
	}
	return m.signedIn(ctx, taken, client, user, sess, token, in.Session)
}

// passkeyLogin answers the login page's passkey: the user is whoever the passkey names.
func (m *Machine) passkeyLogin(ctx context.Context, req *oauth.AuthRequest, client *oauth.Client, in Input) (Outcome, error) {
	if !m.users.PasskeysOn() {
		return m.refuse(ctx, StepLogin, in, "passkeys_off")
	}
	if len(req.Ceremony) == 0 {
		return m.refuse(ctx, StepLogin, in, "no_ceremony")
	}
	taken, state, err := m.takeCeremony(ctx, req)
	if err != nil {
		return Outcome{}, err
	}
	user, methods, err := m.users.FinishPasskey(ctx, "", state, []byte(in.Credential), in.ClientIP)
	if errors.Is(err, authn.ErrFactorFailed) {
		out, err := m.loginPage(taken, client)
		if err != nil {
			return Outcome{}, err
		}
		out.LoginFailed = true
		return out, m.put(ctx, taken)
	}
	if err != nil {
		return Outcome{}, err
	}
	sess, token, err := m.users.StartSession(ctx, user, methods...)
	if err != nil {
		return Outcome{}, err
	}
	return m.signedIn(ctx, taken, client, user, sess, token, in.Session)
}

// signedIn replaces the request, taken, by a new one bound to user and sess, ends the
// browser's previous session, and shows the step that follows.
func (m *Machine) signedIn(ctx context.Context, taken *oauth.AuthRequest, client *oauth.Client, user *oauth.User, sess *oauth.Session, token, oldSession string) (Outcome, error) {
	if oldSession != "" {
		_ = m.users.Logout(ctx, oldSession) // a new session id at every sign-in: no fixation
	}
	next := fresh(taken)
	bind(next, user, sess)
	out, err := m.enter(ctx, next, client, user, sess)
	if err != nil {
		return Outcome{}, err
	}
	out.NewSession = token
	return out, m.keep(ctx, out, next)
}

// code checks a TOTP or recovery code as the sign-in's second factor.
func (m *Machine) code(ctx context.Context, b bound) (Outcome, error) {
	check := m.users.VerifyTOTP
	if b.in.Action == ActRecoveryCode {
		check = m.users.UseRecoveryCode
	}
	if err := m.takeBound(ctx, &b); err != nil {
		return Outcome{}, err
	}
	err := check(ctx, b.user.UID, b.in.Code, b.in.ClientIP)
	if errors.Is(err, authn.ErrFactorFailed) {
		return m.again(ctx, b, err)
	}
	if err != nil {
		return Outcome{}, err
	}
	return m.stepUp(ctx, b, oauth.AMROTP)
}

// passkeyStep checks one of the bound user's passkeys as the sign-in's second factor.
func (m *Machine) passkeyStep(ctx context.Context, b bound) (Outcome, error) {
	if !m.users.PasskeysOn() {
		return m.refuse(ctx, StepSecond, b.in, "passkeys_off")
	}
	if len(b.req.Ceremony) == 0 {
		return m.refuse(ctx, StepSecond, b.in, "no_ceremony")
	}
	taken, state, err := m.takeCeremony(ctx, b.req)
	if err != nil {
		return Outcome{}, err
	}
	b.req = taken
	_, methods, err := m.users.FinishPasskey(ctx, b.user.UID, state, []byte(b.in.Credential), b.in.ClientIP)
	if errors.Is(err, authn.ErrFactorFailed) {
		return m.again(ctx, b, err)
	}
	if err != nil {
		return Outcome{}, err
	}
	return m.stepUp(ctx, b, methods...)
}

// stepUp records a second factor just checked in the session and moves on.
func (m *Machine) stepUp(ctx context.Context, b bound, methods ...string) (Outcome, error) {
	if err := m.users.StepUp(ctx, b.sess, methods...); err != nil {
		return Outcome{}, err
	}
	out, err := m.enter(ctx, b.req, b.client, b.user, b.sess)
	if err != nil {
		return Outcome{}, err
	}
	return out, m.keep(ctx, out, b.req)
}

// again shows the bound step anew after a refused factor (err), with the one message of every
// refused attempt.
func (m *Machine) again(ctx context.Context, b bound, err error) (Outcome, error) {
	out, eerr := m.enter(ctx, b.req, b.client, b.user, b.sess)
	if eerr != nil {
		return Outcome{}, eerr
	}
	out.Failed, out.CodeUsed = true, errors.Is(err, authn.ErrTOTPCodeUsed)
	return out, m.keep(ctx, out, b.req)
}

// enrolTOTP sets up the authenticator app whose secret the set-up page showed the bound user:
// their first factor, which is the sign-in's second step; the recovery codes follow.
func (m *Machine) enrolTOTP(ctx context.Context, b bound) (Outcome, error) {
	if b.req.PendingTOTP == "" {
		return m.refuse(ctx, StepEnrol, b.in, "no_pending_secret")
	}
	if err := m.takeBound(ctx, &b); err != nil {
		return Outcome{}, err
	}
	codes, err := m.users.EnrollTOTP(ctx, b.user.UID, b.req.PendingTOTP, b.in.Code, b.in.ClientIP)
	switch {
	case errors.Is(err, authn.ErrFactorExists):
		// Set up elsewhere meanwhile: this page's secret is dropped; the user confirms with
		// the factor they hold.
		b.req.PendingTOTP = ""
		return m.moveOn(ctx, b)
	case errors.Is(err, authn.ErrFactorFailed):
		return m.again(ctx, b, err)
	case err != nil:
		return Outcome{}, err
	}
	if err := m.users.StepUp(ctx, b.sess, oauth.AMROTP); err != nil {
		return Outcome{}, err
	}
	b.req.Step, b.req.PendingTOTP, b.req.Ceremony = string(StepCodes), "", nil
	if err := m.put(ctx, b.req); err != nil {
		return Outcome{}, err
	}
	return Outcome{Step: StepCodes, Request: b.req, Client: b.client, User: b.user, RecoveryCodes: codes}, nil
}

// moveOn decides the step that follows now (enter), with no factor passed by this action, and
// stores the request at it.
func (m *Machine) moveOn(ctx context.Context, b bound) (Outcome, error) {
	out, err := m.enter(ctx, b.req, b.client, b.user, b.sess)
	if err != nil {
		return Outcome{}, err
	}
	return out, m.keep(ctx, out, b.req)
}

// registerPasskey finishes adding a passkey: the user's first factor (at the set-up step, or
// from the consent page by a user who holds none), which completes the sign-in's second step
// after the password; or, from the consent page, another factor of a user who has passed one of
// theirs in this sign-in, which never counts as its second step.
func (m *Machine) registerPasskey(ctx context.Context, b bound, step Step) (Outcome, error) {
	if !m.users.PasskeysOn() {
		return m.refuse(ctx, step, b.in, "passkeys_off")
	}
	kind := authn.FirstFactor
	if step == StepAddPasskey {
		factors, err := m.users.Factors(ctx, b.user.UID)
		if err != nil {
			return Outcome{}, oauth.AsError(err)
		}
		if !mayAddFactor(factors, b.sess) {
			return m.refuse(ctx, step, b.in, "factor_not_passed")
		}
		if factors.Any() {
			kind = authn.AnotherFactor
		}
	}
	if len(b.req.Ceremony) == 0 {
		return m.refuse(ctx, step, b.in, "no_ceremony")
	}
	taken, state, err := m.takeCeremony(ctx, b.req)
	if err != nil {
		return Outcome{}, err
	}
	b.req = taken
	methods, err := m.users.FinishPasskeyRegistration(ctx, b.user, kind, state, []byte(b.in.Credential), b.in.ClientIP)
	switch {
	case errors.Is(err, authn.ErrFactorExists):
		b.req.PendingTOTP = ""
		return m.moveOn(ctx, b)
	case errors.Is(err, authn.ErrFactorFailed) && step == StepAddPasskey:
		out, err := m.addPasskeyPage(ctx, b)
		if err != nil {
			return Outcome{}, err
		}
		out.Failed = true
		return out, m.put(ctx, b.req)
	case errors.Is(err, authn.ErrFactorFailed):
		return m.again(ctx, b, err)
	case err != nil:
		return Outcome{}, err
	}
	if kind == authn.FirstFactor {
		// The user's first factor, right after their password: two factors, as at enrol.
		return m.stepUp(ctx, b, methods...)
	}
	return m.moveOn(ctx, b) // another factor: the consent page again, the amr as it was
}

// offerPasskey starts adding a passkey from the consent or payment page.
func (m *Machine) offerPasskey(ctx context.Context, b bound) (Outcome, error) {
	step := Step(b.req.Step)
	if !m.users.PasskeysOn() {
		return m.refuse(ctx, step, b.in, "passkeys_off")
	}
	factors, err := m.users.Factors(ctx, b.user.UID)
	if err != nil {
		return Outcome{}, oauth.AsError(err)
	}
	if !mayAddFactor(factors, b.sess) || factors.Has(oauth.FactorPasskey) {
		return m.refuse(ctx, step, b.in, "factor_not_passed")
	}
	if err := m.takeBound(ctx, &b); err != nil {
		return Outcome{}, err
	}
	out, err := m.addPasskeyPage(ctx, b)
	if err != nil {
		return Outcome{}, err
	}
	return out, m.put(ctx, b.req)
}

// addPasskeyPage starts a passkey registration for the bound user at the add_passkey step.
func (m *Machine) addPasskeyPage(ctx context.Context, b bound) (Outcome, error) {
	c, err := m.users.BeginPasskeyRegistration(ctx, b.user)
	if err != nil {
		return Outcome{}, err
	}
	b.req.Step, b.req.Ceremony = string(StepAddPasskey), c.State
	return Outcome{Step: StepAddPasskey, Request: b.req, Client: b.client, User: b.user,
		Passkey: &Passkey{Create: true, Options: string(c.Options), Action: ActRegisterPasskey}}, nil
}

// mayAddFactor reports whether a user holding factors may add one in the sign-in of sess: a
// user with none may (their first), one with a factor only after passing it in this sign-in.
func mayAddFactor(factors oauth.UserFactors, sess *oauth.Session) bool {
	return !factors.Any() || oauth.AMRStrong(sess.AMR)
}

// continueTo leaves the recovery codes, or the passkey offer, for the step that follows.
func (m *Machine) continueTo(ctx context.Context, b bound) (Outcome, error) {
	if err := m.takeBound(ctx, &b); err != nil {
		return Outcome{}, err
	}
	b.req.Ceremony = nil
	return m.moveOn(ctx, b)
}

// decide answers the consent page: the request is taken (a consent is answered once) and the
// browser goes back to the client with a code, or with access_denied. This is the decision
// that spends a pushed request's request_uri (Service.Approve, Service.Deny).
func (m *Machine) decide(ctx context.Context, b bound) (Outcome, error) {
	if b.in.Action == ActAllow {
		factors, err := m.users.Factors(ctx, b.user.UID)
		if err != nil {
			return Outcome{}, oauth.AsError(err)
		}
		if m.users.NeedsStrongAuth(b.req, b.sess, factors) {
			return m.refuse(ctx, StepConsent, b.in, "not_strong")
		}
	}
	taken, err := m.takeAsRead(ctx, b.req)
	if err != nil {
		return Outcome{}, err
	}
	var to *oauth.Redirect
	if b.in.Action == ActDeny {
		to, err = m.svc.Deny(ctx, taken, b.client)
	} else {
		to, err = m.svc.Approve(ctx, taken, b.client, b.user, b.sess)
	}
	if errors.Is(err, oauth.ErrRequestURIUsed) {
		// Another page of the same pushed request was decided first (another browser): this
		// request is decided too, with nothing issued.
		return Outcome{}, ErrExpired
	}
	if err != nil {
		return Outcome{}, err
	}
	return Outcome{Redirect: to}, nil
}

// switchAccount signs the user out and starts the request again, unbound, at the login page.
func (m *Machine) switchAccount(ctx context.Context, b bound) (Outcome, error) {
	taken, err := m.takeAsRead(ctx, b.req)
	if err != nil {
		return Outcome{}, err
	}
	_ = m.users.Logout(ctx, b.in.Session)
	next := fresh(taken)
	out, err := m.loginPage(next, b.client)
	if err != nil {
		return Outcome{}, err
	}
	out.EndSession = true
	return out, m.put(ctx, next)
}

// enter decides the bound step that follows for the user and their session, and prepares its
// page on req (the caller stores req: keep): the second factor when the sign-in must be strong
// and the user holds one, the set-up of a first factor when it must be strong and they hold
// none, the consent page otherwise, unless the user's consent is remembered (remember.go):
// then the code is issued at once and req is decided (the outcome's Redirect).
func (m *Machine) enter(ctx context.Context, req *oauth.AuthRequest, client *oauth.Client, user *oauth.User, sess *oauth.Session) (Outcome, error) {
	factors, err := m.users.Factors(ctx, user.UID)
	if err != nil {
		return Outcome{}, oauth.AsError(err)
	}
	out := Outcome{Request: req, Client: client, User: user}
	req.Ceremony, req.PaymentNonce = nil, nil
	strong := m.users.NeedsStrongAuth(req, sess, factors)
	payment := req.IsPaymentRequest()
	if payment && !m.holdsPaymentFactor(factors) && !mayAddFactor(factors, sess) {
		// A payment they hold no factor for needs a passkey added, which takes a factor of
		// theirs passed first: the second step comes before the payment page.
		strong = true
	}
	switch {
	case payment && m.holdsPaymentFactor(factors):
		// The payment's own confirmation is the strong step (a passkey with user
		// verification, or a TOTP code after the password): no second factor before it.
		if err := m.paymentPage(ctx, req, user, sess, factors, &out); err != nil {
			return Outcome{}, err
		}
	case strong && factors.Any():
		out.Step, out.HasTOTP = StepSecond, factors.Has(oauth.FactorTOTP)
		req.PendingTOTP = ""
		if m.users.PasskeysOn() && factors.Has(oauth.FactorPasskey) {
			c, err := m.users.BeginPasskeyStepUp(ctx, user)
			if err != nil {
				return Outcome{}, err
			}
			req.Ceremony = c.State
			out.Passkey = &Passkey{Options: string(c.Options), Action: ActPasskey}
		}
	case strong:
		out.Step = StepEnrol
		e, err := m.users.NewTOTP(user, m.totpIssuer, req.PendingTOTP)
		if err != nil {
			return Outcome{}, oauth.AsError(err)
		}
		req.PendingTOTP, out.TOTP = e.Secret, &e
		if m.users.PasskeysOn() {
			c, err := m.users.BeginPasskeyRegistration(ctx, user)
			if err != nil {
				return Outcome{}, err
			}
			req.Ceremony = c.State
			out.Passkey = &Passkey{Create: true, Options: string(c.Options), Action: ActRegisterPasskey}
		}
	case payment:
		if err := m.paymentPage(ctx, req, user, sess, factors, &out); err != nil {
			return Outcome{}, err
		}
	default:
		rec, err := m.remembered(ctx, req)
		if err != nil {
			return Outcome{}, err
		}
		if rec != nil {
			return m.approveRemembered(ctx, req, client, user, sess, rec)
		}
		out.Step = StepConsent
		req.PendingTOTP = ""
		out.OfferPasskey = m.users.PasskeysOn() && !factors.Has(oauth.FactorPasskey) && mayAddFactor(factors, sess)
	}
	req.Step = string(out.Step)
	return out, nil
}

// holdsPaymentFactor reports whether the user holds a factor the payment policy accepts.
func (m *Machine) holdsPaymentFactor(factors oauth.UserFactors) bool {
	return m.users.PaymentFactorAllowed(oauth.PaymentFactorPasskey) && factors.Has(oauth.FactorPasskey) ||
		m.users.PaymentFactorAllowed(oauth.PaymentFactorTOTP) && factors.Has(oauth.FactorTOTP)
}

// paymentPage prepares the payment step on req (the caller stores req): a fresh nonce, the
// passkey assertion over the challenge of the details and that nonce when the policy accepts
// passkeys and the user holds one, the TOTP field when it accepts TOTP and they hold an app;
// else the page says no factor of theirs may authorize the payment, and offers to add a
// passkey when they may (dynamic linking, oauth's dynamic_linking.go).
func (m *Machine) paymentPage(ctx context.Context, req *oauth.AuthRequest, user *oauth.User, sess *oauth.Session, factors oauth.UserFactors, out *Outcome) error {
	out.Step = StepPayment
	req.PendingTOTP = ""
	req.PaymentNonce = oauth.NewPaymentNonce()
	passkeys := m.users.PaymentFactorAllowed(oauth.PaymentFactorPasskey)
	if passkeys && factors.Has(oauth.FactorPasskey) {
		c, err := m.users.BeginPaymentPasskey(ctx, user, req.AuthorizationDetails, req.PaymentNonce)
		if err != nil {
			return err
		}
		req.Ceremony = c.State
		out.Passkey = &Passkey{Options: string(c.Options), Action: ActPayPasskey}
	}
	out.PaymentTOTP = m.users.PaymentFactorAllowed(oauth.PaymentFactorTOTP) && factors.Has(oauth.FactorTOTP)
	out.NoPaymentFactor = out.Passkey == nil && !out.PaymentTOTP
	out.OfferPasskey = passkeys && !factors.Has(oauth.FactorPasskey) && mayAddFactor(factors, sess)
	return nil
}

// payPasskey confirms a payment with a passkey assertion over the challenge of the request's
// details and nonce. An assertion made over anything else (another request, other details, a
// nonce since replaced) is refused before the request is taken: nothing is written. Then the
// library verifies it against the user's passkey (authn.FinishPaymentPasskey) and the grant
// keeps its evidence.
func (m *Machine) payPasskey(ctx context.Context, b bound) (Outcome, error) {
	if !m.users.PaymentFactorAllowed(oauth.PaymentFactorPasskey) {
		return m.refuse(ctx, StepPayment, b.in, "payment_policy")
	}
	if len(b.req.Ceremony) == 0 || len(b.req.PaymentNonce) == 0 {
		return m.refuse(ctx, StepPayment, b.in, "no_ceremony")
	}
	if !oauth.AssertionLinked(b.req.AuthorizationDetails, b.req.PaymentNonce, []byte(b.in.Credential)) {
		return m.refuse(ctx, StepPayment, b.in, "payment_link")
	}
	taken, state, err := m.takeCeremony(ctx, b.req)
	if err != nil {
		return Outcome{}, err
	}
	b.req = taken
	ev, methods, err := m.users.FinishPaymentPasskey(ctx, b.user.UID, state, []byte(b.in.Credential), taken.AuthorizationDetails, taken.PaymentNonce, b.in.ClientIP)
	if errors.Is(err, authn.ErrFactorFailed) {
		return m.again(ctx, b, err)
	}
	if err != nil {
		return Outcome{}, err
	}
	return m.pay(ctx, b, ev, methods...)
}

// payTOTP confirms a payment with a TOTP code, when the payment policy accepts TOTP (else
// refused, nothing written). The evidence records that it was a TOTP code entered on the page
// that showed these details.
func (m *Machine) payTOTP(ctx context.Context, b bound) (Outcome, error) {
	if !m.users.PaymentFactorAllowed(oauth.PaymentFactorTOTP) {
		return m.refuse(ctx, StepPayment, b.in, "payment_policy")
	}
	if len(b.req.PaymentNonce) == 0 {
		return m.refuse(ctx, StepPayment, b.in, "no_nonce")
	}
	if err := m.takeBound(ctx, &b); err != nil {
		return Outcome{}, err
	}
	ev, err := m.users.PayWithTOTP(ctx, b.user.UID, b.in.Code, b.req.AuthorizationDetails, b.req.PaymentNonce, b.in.ClientIP)
	if errors.Is(err, authn.ErrFactorFailed) {
		return m.again(ctx, b, err)
	}
	if err != nil {
		return Outcome{}, err
	}
	return m.pay(ctx, b, ev, oauth.AMROTP)
}

// pay approves a payment request, taken, whose confirmation was just checked: the methods
// join the session (the confirmation is a strong step), and the grant keeps the evidence.
func (m *Machine) pay(ctx context.Context, b bound, ev *oauth.PaymentEvidence, methods ...string) (Outcome, error) {
	if err := m.users.StepUp(ctx, b.sess, methods...); err != nil {
		return Outcome{}, err
	}
	b.req.PaymentEvidence = ev
	to, err := m.svc.Approve(ctx, b.req, b.client, b.user, b.sess)
	if errors.Is(err, oauth.ErrRequestURIUsed) {
		return Outcome{}, ErrExpired
	}
	if err != nil {
		return Outcome{}, err
	}
	return Outcome{Redirect: to}, nil
}

// loginPage prepares the login page on req, unbound, with the passkey sign-in when passkeys
// are on (the caller stores req).
func (m *Machine) loginPage(req *oauth.AuthRequest, client *oauth.Client) (Outcome, error) {
	out := Outcome{Step: StepLogin, Request: req, Client: client}
	req.Step, req.Ceremony = string(StepLogin), nil
	if m.users.PasskeysOn() {
		c, err := m.users.BeginPasskeyLogin()
		if err != nil {
			return Outcome{}, err
		}
		req.Ceremony = c.State
		out.Passkey = &Passkey{Options: string(c.Options), Action: ActPasskeyLogin}
	}
	return out, nil
}

// takeCeremony takes the request as read (takeAsRead) with the WebAuthn ceremony its page
// started; the caller stores the request again, without it.
func (m *Machine) takeCeremony(ctx context.Context, read *oauth.AuthRequest) (*oauth.AuthRequest, []byte, error) {
	taken, err := m.takeAsRead(ctx, read)
	if err != nil {
		return nil, nil, err
	}
	state := taken.Ceremony
	taken.Ceremony = nil
	return taken, state, nil
}

// takeBound takes the bound action's request as read, before the action changes anything.
func (m *Machine) takeBound(ctx context.Context, b *bound) error {
	taken, err := m.takeAsRead(ctx, b.req)
	if err != nil {
		return err
	}
	b.req = taken
	return nil
}

// takeAsRead takes the request from the store, once (of racing actions one gets it, the others
// are ErrRefused and write nothing), and only as the action read it: a request another action
// changed in between (its step, binding, CSRF binding, set-up secret, ceremony or payment nonce) is put back
// as it was taken, and the action refused. Every accepted action takes its request before it
// changes anything and stores the request it leads to (or none, once decided), so the actions
// on one request are serialized: a decided request cannot be brought back, a switch of account
// and a second factor cannot both act, two set-ups cannot both write.
func (m *Machine) takeAsRead(ctx context.Context, read *oauth.AuthRequest) (*oauth.AuthRequest, error) {
	taken, err := m.svc.Interactions.TakeAuthRequest(ctx, read.ID, m.svc.Clock.Now())
	if errors.Is(err, oauth.ErrNotFound) {
		return nil, ErrRefused
	}
	if err != nil {
		return nil, oauth.AsError(err)
	}
	if taken.Step != read.Step || taken.UID != read.UID || !sameHash(taken.SessionHash, read.SessionHash) ||
		!sameHash(taken.CSRFHash, read.CSRFHash) || taken.PendingTOTP != read.PendingTOTP || !bytes.Equal(taken.Ceremony, read.Ceremony) ||
		!bytes.Equal(taken.PaymentNonce, read.PaymentNonce) {
		return nil, errors.Join(ErrRefused, m.put(ctx, &taken))
	}
	return &taken, nil
}

// keep stores req at the step out shows, unless out decided it (a remembered consent's
// redirect): a decided request is gone.
func (m *Machine) keep(ctx context.Context, out Outcome, req *oauth.AuthRequest) error {
	if out.Redirect != nil {
		return nil
	}
	return m.put(ctx, req)
}

func (m *Machine) put(ctx context.Context, req *oauth.AuthRequest) error {
	if err := m.svc.Interactions.PutAuthRequest(ctx, *req); err != nil {
		return oauth.AsError(err)
	}
	return nil
}

// fresh is a new request with old's authorization parameters, its CSRF binding and its
// expiry, under a new id, with nothing of old's sign-in state.
func fresh(old *oauth.AuthRequest) *oauth.AuthRequest {
	next := *old
	next.ID = oauth.NewID(oauth.PrefixRequest)
	next.Scopes = slices.Clone(old.Scopes)
	next.Step, next.UID, next.SessionHash, next.PendingTOTP, next.Ceremony, next.PaymentNonce = string(StepLogin), "", "", "", nil, nil
	return &next
}

// bind binds req to user and their session.
func bind(req *oauth.AuthRequest, user *oauth.User, sess *oauth.Session) {
	req.UID, req.SessionHash = user.UID, sess.Hash
}

// withClient names the request's client and the caller's address in the audit records.
func withClient(ctx context.Context, clientID, clientIP string) context.Context {
	info := oauth.AuditInfoFrom(ctx)
	info.ClientID = clientID
	if info.ClientIP == "" {
		info.ClientIP = clientIP
	}
	return oauth.WithAuditInfo(ctx, info)
}

// String describes an outcome for logs and test failures (no secrets: the page's kind only).
func (o Outcome) String() string {
	if o.Redirect != nil {
		return "redirect"
	}
	return fmt.Sprintf("step %q", o.Step)
}

// sameHash compares two hashes of secrets (a session's, a CSRF token's) in constant time.
func sameHash(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
