package bankapp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/ciba"
	"github.com/acmebank/authserver/shared/oauth"
)

// ErrRefused is an action the step does not accept, or one that is not the customer's to
// take (another's request or attempt, a missing or wrong CSRF token): nothing was written.
var ErrRefused = errors.New("bankapp: action refused")

// recordStep marks the approval ceremony's pending record (oauth.AuthRequest.Step): the
// authorization endpoint's machine knows no such step and accepts no action on it.
const recordStep = "bank_app"

// attemptLifetime bounds an approval ceremony: the WebAuthn timeout (authn.NewPasskeys).
const attemptLifetime = 5 * time.Minute

// Requests is what the page asks of CIBA's use case (*ciba.Service).
type Requests interface {
	Pending(ctx context.Context, uid string) ([]ciba.DeviceRequest, error)
	Request(ctx context.Context, ref, uid string) (ciba.DeviceRequest, error)
	Decide(ctx context.Context, d ciba.Decision) error
}

var _ Requests = (*ciba.Service)(nil)

// Deps are the machine's dependencies, all required.
type Deps struct {
	Requests     Requests
	Users        *authn.Service
	Interactions oauth.InteractionStore
	Clock        oauth.Clock
}

// Machine is the bank app page's state machine.
type Machine struct {
	reqs  Requests
	users *authn.Service
	store oauth.InteractionStore
	clock oauth.Clock
}

// New returns the machine over d; it names every missing dependency.
func New(d Deps) (*Machine, error) {
	var missing []error
	if d.Requests == nil {
		missing = append(missing, errors.New("bankapp: Requests is required"))
	}
	if d.Users == nil {
		missing = append(missing, errors.New("bankapp: Users is required"))
	}
	if d.Interactions == nil {
		missing = append(missing, errors.New("bankapp: Interactions is required"))
	}
	if d.Clock == nil {
		missing = append(missing, errors.New("bankapp: Clock is required"))
	}
	if err := errors.Join(missing...); err != nil {
		return nil, err
	}
	return &Machine{reqs: d.Requests, users: d.Users, store: d.Interactions, clock: d.Clock}, nil
}

// Input is a post of the page, or (Action empty) a visit.
type Input struct {
	// Session is the bank app's session cookie; Browser the browser's binding cookie, which
	// the signed-out page's CSRF token is bound to.
	Session, Browser string
	// CSRF is the posted token: the signed-out page's (LoginCSRF) or the session's (CSRF).
	CSRF     string
	ClientIP string
	Action   Action
	// Username and Password sign in.
	Username, Password string
	// Ref names a request (ciba.DeviceRequest.Ref) on the list.
	Ref string
	// Attempt names the approval ceremony's record; Credential is the passkey's answer (JSON)
	// and Code a TOTP code.
	Attempt, Credential, Code string
}

// Outcome is what the page shows next.
type Outcome struct {
	Step Step
	User *oauth.User
	// CSRF is the token the page's forms carry (the session's, or the signed-out page's).
	CSRF string
	// NewSession is a session cookie to set; EndSession clears it.
	NewSession string
	EndSession bool
	// LoginFailed: the sign-in was refused (one message, whatever the reason).
	LoginFailed bool
	// Pending are the requests awaiting the customer (list, done).
	Pending []ciba.DeviceRequest
	// Request is the request being approved (approving) or just decided (done).
	Request *ciba.DeviceRequest
	// Attempt is the approval ceremony's record; Passkey its WebAuthn options (JSON), nil when
	// the customer has no passkey the request accepts; TOTP whether a code is accepted.
	Attempt string
	Passkey []byte
	TOTP    bool
	// Failed: the factor was refused (CodeUsed: a TOTP code of a step already used); a new
	// attempt is open.
	Failed, CodeUsed bool
	// Approved (done): approved, otherwise denied; Gone (done): the request was no longer
	// pending (decided elsewhere, or expired), nothing was decided here.
	Approved, Gone bool
}

// LoginCSRF is the signed-out page's CSRF token for the browser binding cookie browser: a
// sign-in posted from another site, which cannot read the cookie, is refused.
func LoginCSRF(browser string) string { return oauth.HashToken("bankapp-login." + browser) }

// CSRF is the CSRF token of a signed-in page's forms: a hash of the session cookie, which
// another site can neither read (HttpOnly) nor derive the token from.
func CSRF(session string) string { return oauth.HashToken("bankapp-csrf." + session) }

// approvalChallenge is the WebAuthn challenge that binds a passkey assertion to the approval
// of one CIBA request that is not a payment: SHA-256 of a label, the request's reference and
// binding message (each length-prefixed, so no two pairs share bytes) and the attempt's
// nonce. A payment's is oauth.PaymentChallenge over its details.
func approvalChallenge(ref, bindingMessage string, nonce []byte) []byte {
	h := sha256.New()
	h.Write([]byte("ciba-approval"))
	for _, s := range []string{ref, bindingMessage} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	h.Write(nonce)
	return h.Sum(nil)
}

// isPayment reports whether a request's details hold a payment_initiation.
func isPayment(r ciba.DeviceRequest) bool {
	return (&oauth.Grant{AuthorizationDetails: r.AuthorizationDetails}).IsPayment()
}

// Visit is a GET of the page: signed out, or the session's list.
func (m *Machine) Visit(ctx context.Context, in Input) (Outcome, error) {
	sess, user, err := m.users.SessionUser(ctx, in.Session)
	if err != nil {
		return Outcome{}, err
	}
	if sess == nil {
		return Outcome{Step: StepSignedOut, CSRF: LoginCSRF(in.Browser)}, nil
	}
	return m.list(ctx, user, in.Session, Outcome{Step: StepList})
}

// stepOf is the step a post stands at: the server's state, never the form's.
func stepOf(sess *oauth.Session, in Input) Step {
	switch {
	case sess == nil:
		return StepSignedOut
	case in.Attempt != "":
		return StepApproving
	}
	return StepList
}

// Act applies a posted action at the step the server's state puts it in.
func (m *Machine) Act(ctx context.Context, in Input) (Outcome, error) {
	sess, user, err := m.users.SessionUser(ctx, in.Session)
	if err != nil {
		return Outcome{}, err
	}
	step := stepOf(sess, in)
	uid := ""
	if user != nil {
		uid = user.UID
	}
	if !Allowed(step, in.Action) {
		return m.refuse(ctx, uid, step, in, "not_this_step")
	}
	want := LoginCSRF(in.Browser)
	if sess != nil {
		want = CSRF(in.Session)
	}
	if in.CSRF == "" || (sess == nil && in.Browser == "") || subtle.ConstantTimeCompare([]byte(in.CSRF), []byte(want)) != 1 {
		return m.refuse(ctx, uid, step, in, "csrf")
	}
	switch step {
	case StepSignedOut:
		return m.signIn(ctx, in)
	case StepList:
		switch in.Action {
		case ActApprove:
			return m.startApproval(ctx, sess, user, in, in.Ref, false, false)
		case ActDeny:
			return m.deny(ctx, user, in, in.Ref)
		case ActSignOut:
			return m.signOut(ctx, in)
		}
	case StepApproving:
		rec, err := m.takeAttempt(ctx, sess, user, in)
		if err != nil {
			return Outcome{}, err
		}
		switch in.Action {
		case ActPasskey, ActTOTP:
			return m.approve(ctx, sess, user, in, rec)
		case ActDeny:
			return m.deny(ctx, user, in, rec.BackchannelRef)
		case ActCancel:
			return m.list(ctx, user, in.Session, Outcome{Step: StepList})
		case ActSignOut:
			return m.signOut(ctx, in)
		}
	}
	return m.refuse(ctx, uid, step, in, "not_this_step") // unreachable while accepts and the switch agree
}

// refuse audits an action the page does not allow and returns ErrRefused; nothing is written.
func (m *Machine) refuse(ctx context.Context, uid string, step Step, in Input, why string) (Outcome, error) {
	m.users.AuditSignIn(ctx, "bankapp_refused", uid, slog.String("reason", why),
		slog.String("step", string(step)), slog.String("action", string(in.Action)))
	return Outcome{}, ErrRefused
}

// list is out with the customer's pending requests and the session's CSRF token.
func (m *Machine) list(ctx context.Context, user *oauth.User, session string, out Outcome) (Outcome, error) {
	pending, err := m.reqs.Pending(ctx, user.UID)
	if err != nil {
		return Outcome{}, err
	}
	if out.Request != nil { // just decided: a lagging index may list it for a moment more
		pending = slices.DeleteFunc(pending, func(r ciba.DeviceRequest) bool { return r.Ref == out.Request.Ref })
	}
	out.User, out.Pending, out.CSRF = user, pending, CSRF(session)
	return out, nil
}

// signIn is the app's own sign-in: the password, with the login's lockout (CheckPassword),
// then a session of its own.
func (m *Machine) signIn(ctx context.Context, in Input) (Outcome, error) {
	user, err := m.users.CheckPassword(ctx, in.Username, in.Password, in.ClientIP)
	if errors.Is(err, authn.ErrLoginFailed) {
		return Outcome{Step: StepSignedOut, CSRF: LoginCSRF(in.Browser), LoginFailed: true}, nil
	}
	if err != nil {
		return Outcome{}, err
	}
	_, token, err := m.users.StartSession(ctx, user, oauth.AMRPassword)
	if err != nil {
		return Outcome{}, err
	}
	return m.list(ctx, user, token, Outcome{Step: StepList, NewSession: token})
}

// signOut ends the session.
func (m *Machine) signOut(ctx context.Context, in Input) (Outcome, error) {
	if err := m.users.Logout(ctx, in.Session); err != nil {
		return Outcome{}, err
	}
	return Outcome{Step: StepSignedOut, EndSession: true, CSRF: LoginCSRF(in.Browser)}, nil
}

// startApproval opens an approval ceremony of the customer's pending request ref: a record
// bound to the session, the customer and ref with a fresh nonce and, when the customer has a
// passkey the request accepts, the WebAuthn ceremony over the request's challenge. Another
// customer's, an unknown or an expired request is refused, nothing written.
func (m *Machine) startApproval(ctx context.Context, sess *oauth.Session, user *oauth.User, in Input, ref string, failed, codeUsed bool) (Outcome, error) {
	r, err := m.reqs.Request(ctx, ref, user.UID)
	if errors.Is(err, ciba.ErrUnknownRequest) {
		if failed { // the request went while the customer typed: say so
			return m.list(ctx, user, in.Session, Outcome{Step: StepDone, Gone: true})
		}
		return m.refuse(ctx, user.UID, StepList, in, "unknown_request")
	}
	if err != nil {
		return Outcome{}, err
	}
	now := m.clock.Now()
	nonce := oauth.NewPaymentNonce()
	payment := isPayment(r)
	var c authn.Ceremony
	if !payment || m.users.PaymentFactorAllowed(oauth.PaymentFactorPasskey) {
		if payment {
			c, err = m.users.BeginPaymentPasskey(ctx, user, r.AuthorizationDetails, nonce)
		} else {
			c, err = m.users.BeginBoundPasskey(ctx, user, approvalChallenge(r.Ref, r.BindingMessage, nonce))
		}
		switch {
		case errors.Is(err, authn.ErrFactorFailed), errors.Is(err, authn.ErrPaymentFactorRefused):
			c = authn.Ceremony{} // no passkey: the code, if any, is the way
		case err != nil:
			return Outcome{}, err
		}
	}
	f, err := m.users.Factors(ctx, user.UID)
	if err != nil {
		return Outcome{}, err
	}
	totp := slices.ContainsFunc(f.Factors, func(x oauth.Factor) bool { return x.Kind == oauth.FactorTOTP }) &&
		(!payment || m.users.PaymentFactorAllowed(oauth.PaymentFactorTOTP))
	expires := now.Add(attemptLifetime)
	if r.ExpiresAt.Before(expires) {
		expires = r.ExpiresAt
	}
	rec := oauth.AuthRequest{ID: oauth.NewID(oauth.PrefixRequest), ClientID: r.ClientID, Step: recordStep, UID: user.UID,
		SessionHash: sess.Hash, Ceremony: c.State, PaymentNonce: nonce, BackchannelRef: r.Ref,
		CSRFHash: oauth.HashToken(CSRF(in.Session)), CreatedAt: now, ExpiresAt: expires}
	if err := m.store.PutAuthRequest(ctx, rec); err != nil {
		return Outcome{}, oauth.AsError(fmt.Errorf("put approval attempt: %w", err))
	}
	return Outcome{Step: StepApproving, User: user, CSRF: CSRF(in.Session), Request: &r, Attempt: rec.ID,
		Passkey: c.Options, TOTP: totp, Failed: failed, CodeUsed: codeUsed}, nil
}

// takeAttempt takes the approval ceremony's record the post names, once, if it is this
// session's: read first, so another session's or customer's attempt is refused without
// being spent; then taken, and compared with what was read (a racing post took it first:
// refused).
func (m *Machine) takeAttempt(ctx context.Context, sess *oauth.Session, user *oauth.User, in Input) (oauth.AuthRequest, error) {
	now := m.clock.Now()
	mine := func(r oauth.AuthRequest) bool {
		return r.Step == recordStep && r.UID == user.UID && r.BackchannelRef != "" &&
			subtle.ConstantTimeCompare([]byte(r.SessionHash), []byte(sess.Hash)) == 1
	}
	if len(in.Attempt) > 64 {
		_, err := m.refuse(ctx, user.UID, StepApproving, in, "unknown_attempt")
		return oauth.AuthRequest{}, err
	}
	read, err := m.store.GetAuthRequest(ctx, in.Attempt, now)
	if errors.Is(err, oauth.ErrNotFound) || (err == nil && !mine(read)) {
		_, err := m.refuse(ctx, user.UID, StepApproving, in, "unknown_attempt")
		return oauth.AuthRequest{}, err
	}
	if err != nil {
		return oauth.AuthRequest{}, oauth.AsError(err)
	}
	taken, err := m.store.TakeAuthRequest(ctx, in.Attempt, now)
	if errors.Is(err, oauth.ErrNotFound) || (err == nil && (!mine(taken) || !bytes.Equal(taken.PaymentNonce, read.PaymentNonce))) {
		_, err := m.refuse(ctx, user.UID, StepApproving, in, "attempt_taken")
		return oauth.AuthRequest{}, err
	}
	if err != nil {
		return oauth.AuthRequest{}, oauth.AsError(err)
	}
	return taken, nil
}

// approve answers the approval ceremony rec (taken) with the posted passkey assertion or
// TOTP code, checked against the request as it is now; a refused factor opens a new attempt
// (a wrong code has counted toward the lockout). Passed, the decision goes to ciba.Decide
// with the session's amr plus the step's methods and, for a payment, the evidence.
func (m *Machine) approve(ctx context.Context, sess *oauth.Session, user *oauth.User, in Input, rec oauth.AuthRequest) (Outcome, error) {
	r, err := m.reqs.Request(ctx, rec.BackchannelRef, user.UID)
	if errors.Is(err, ciba.ErrUnknownRequest) {
		return m.list(ctx, user, in.Session, Outcome{Step: StepDone, Gone: true})
	}
	if err != nil {
		return Outcome{}, err
	}
	payment := isPayment(r)
	var methods []string
	var ev *oauth.PaymentEvidence
	switch in.Action {
	case ActPasskey:
		if len(rec.Ceremony) == 0 {
			return m.refuse(ctx, user.UID, StepApproving, in, "no_ceremony")
		}
		if payment {
			ev, methods, err = m.users.FinishPaymentPasskey(ctx, user.UID, rec.Ceremony, []byte(in.Credential), r.AuthorizationDetails, rec.PaymentNonce, in.ClientIP)
		} else {
			methods, err = m.users.FinishBoundPasskey(ctx, user.UID, rec.Ceremony, []byte(in.Credential),
				approvalChallenge(r.Ref, r.BindingMessage, rec.PaymentNonce), in.ClientIP)
		}
	case ActTOTP:
		if payment {
			ev, err = m.users.PayWithTOTP(ctx, user.UID, in.Code, r.AuthorizationDetails, rec.PaymentNonce, in.ClientIP)
		} else {
			err = m.users.VerifyTOTP(ctx, user.UID, in.Code, in.ClientIP)
		}
		methods = []string{oauth.AMROTP}
	}
	switch {
	case errors.Is(err, authn.ErrPaymentFactorRefused):
		return m.refuse(ctx, user.UID, StepApproving, in, "factor_not_accepted")
	case errors.Is(err, authn.ErrFactorFailed):
		return m.startApproval(ctx, sess, user, in, r.Ref, true, errors.Is(err, authn.ErrTOTPCodeUsed))
	case err != nil:
		return Outcome{}, err
	}
	err = m.reqs.Decide(ctx, ciba.Decision{Ref: r.Ref, UID: user.UID, Approve: true,
		AMR: authn.WithMethods(sess.AMR, methods...), AuthTime: m.clock.Now(), Evidence: ev})
	return m.decided(ctx, user, in, r, true, err)
}

// deny records the customer's denial of their request ref: the session suffices.
func (m *Machine) deny(ctx context.Context, user *oauth.User, in Input, ref string) (Outcome, error) {
	r, err := m.reqs.Request(ctx, ref, user.UID)
	if errors.Is(err, ciba.ErrUnknownRequest) {
		return m.refuse(ctx, user.UID, StepList, in, "unknown_request")
	}
	if err != nil {
		return Outcome{}, err
	}
	err = m.reqs.Decide(ctx, ciba.Decision{Ref: r.Ref, UID: user.UID, Approve: false, AMR: nil, AuthTime: m.clock.Now()})
	return m.decided(ctx, user, in, r, false, err)
}

// decided is the page after Decide: done, or gone when the request was decided or expired
// meanwhile (a racing decision won).
func (m *Machine) decided(ctx context.Context, user *oauth.User, in Input, r ciba.DeviceRequest, approve bool, err error) (Outcome, error) {
	switch {
	case errors.Is(err, ciba.ErrDecided), errors.Is(err, ciba.ErrUnknownRequest):
		return m.list(ctx, user, in.Session, Outcome{Step: StepDone, Gone: true, Request: &r})
	case errors.Is(err, ciba.ErrNotStrong), errors.Is(err, ciba.ErrPaymentLink):
		return m.refuse(ctx, user.UID, StepApproving, in, "decision_refused")
	case err != nil:
		return Outcome{}, err
	}
	return m.list(ctx, user, in.Session, Outcome{Step: StepDone, Approved: approve, Request: &r})
}
