package authn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/acmebank/authserver/shared/oauth"
)

// Passkeys (WebAuthn Level 3, through github.com/go-webauthn/webauthn): a user adds one after a
// password sign-in, and signs in with it from the login page (a discoverable credential) or
// uses it as the second factor. User verification is required in every ceremony, so a passkey
// sign-in is two factors: the device (possession) and its PIN or biometric.

// Passkeys is the relying party: its id and the origins its pages are served from.
type Passkeys struct {
	wa *webauthn.WebAuthn
}

// NewPasskeys returns the relying party of a deployment whose pages are at baseURL: the RP ID
// is its host (rpID overrides it, e.g. the registrable domain shared by several hosts), and
// the origin is baseURL's (plus origins, if the pages are also served elsewhere).
func NewPasskeys(baseURL, rpID, rpName string, origins ...string) (*Passkeys, error) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("passkeys: base URL %q has no host", baseURL)
	}
	if rpID == "" {
		rpID = u.Hostname()
	}
	wa, err := webauthn.New(&webauthn.Config{
		RPID: rpID, RPDisplayName: rpName, RPOrigins: append([]string{u.Scheme + "://" + u.Host}, origins...),
		Timeouts: webauthn.TimeoutsConfig{
			Login:        webauthn.TimeoutConfig{Enforce: true, Timeout: 5 * time.Minute},
			Registration: webauthn.TimeoutConfig{Enforce: true, Timeout: 5 * time.Minute},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("passkeys: %w", err)
	}
	return &Passkeys{wa: wa}, nil
}

// Ceremony is a started WebAuthn ceremony: the options for the browser
// (navigator.credentials.create or get, as JSON) and the state to keep, single use, until the
// browser answers.
type Ceremony struct {
	Options []byte
	State   []byte
}

// passkeyUser is a user as go-webauthn sees them: the user handle is the uid.
type passkeyUser struct {
	u     *oauth.User
	creds []webauthn.Credential
}

func (p passkeyUser) WebAuthnID() []byte                         { return []byte(p.u.UID) }
func (p passkeyUser) WebAuthnName() string                       { return p.u.Username }
func (p passkeyUser) WebAuthnDisplayName() string                { return p.u.Username }
func (p passkeyUser) WebAuthnCredentials() []webauthn.Credential { return p.creds }

// credentials decodes the user's passkeys.
func credentials(f oauth.UserFactors) ([]webauthn.Credential, error) {
	var out []webauthn.Credential
	for _, x := range f.Factors {
		if x.Kind != oauth.FactorPasskey {
			continue
		}
		var c webauthn.Credential
		if err := json.Unmarshal(x.Credential, &c); err != nil {
			return nil, fmt.Errorf("passkey %s: %w", x.ID, err)
		}
		out = append(out, c)
	}
	return out, nil
}

func ceremony(options any, state *webauthn.SessionData) (Ceremony, error) {
	o, err := json.Marshal(options)
	if err != nil {
		return Ceremony{}, err
	}
	st, err := json.Marshal(state)
	if err != nil {
		return Ceremony{}, err
	}
	return Ceremony{Options: o, State: st}, nil
}

// BeginPasskeyRegistration starts adding a passkey to u: a discoverable credential with user
// verification, excluding the passkeys u already has.
func (s *Service) BeginPasskeyRegistration(ctx context.Context, u *oauth.User) (Ceremony, error) {
	f, err := s.factors.Factors(ctx, u.UID)
	if err != nil {
		return Ceremony{}, oauth.AsError(err)
	}
	creds, err := credentials(f)
	if err != nil {
		return Ceremony{}, oauth.AsError(err)
	}
	user := passkeyUser{u: u, creds: creds}
	exclude := make([]protocol.CredentialDescriptor, len(creds))
	for i, c := range creds {
		exclude[i] = c.Descriptor()
	}
	opts, state, err := s.passkeys.wa.BeginRegistration(user,
		webauthn.WithAuthenticatorSelection(protocol.AuthenticatorSelection{
			ResidentKey: protocol.ResidentKeyRequirementRequired, UserVerification: protocol.VerificationRequired}),
		webauthn.WithResidentKeyRequirement(protocol.ResidentKeyRequirementRequired),
		webauthn.WithExclusions(exclude))
	if err != nil {
		return Ceremony{}, oauth.AsError(err)
	}
	return ceremony(opts, state)
}

// Enrolment says which factor a registration adds, and so what the factor record must hold
// when it is written.
type Enrolment int

const (
	// FirstFactor is the set-up of a user who holds no second factor: refused with
	// ErrFactorExists, inside the record's compare-and-swap, if they hold one by then.
	FirstFactor Enrolment = iota + 1
	// AnotherFactor is a factor added by a user who has passed one of theirs in this sign-in
	// (the caller checks that); it never counts as the sign-in's second step.
	AnotherFactor
)

// FinishPasskeyRegistration verifies the browser's answer (the attestation, none accepted) and
// stores the new passkey, as the kind of enrolment says. It returns the amr methods the new
// passkey proved, with user verification required; only a FirstFactor enrolment may count
// them as the sign-in's second factor (the caller decides).
func (s *Service) FinishPasskeyRegistration(ctx context.Context, u *oauth.User, kind Enrolment, state, response []byte, clientIP string) ([]string, error) {
	if kind != FirstFactor && kind != AnotherFactor {
		return nil, fmt.Errorf("passkey registration: unknown enrolment %d", kind)
	}
	var st webauthn.SessionData
	if err := json.Unmarshal(state, &st); err != nil {
		return nil, ErrFactorFailed
	}
	parsed, err := protocol.ParseCredentialCreationResponseBytes(response)
	if err != nil {
		s.auditLogin(ctx, "factor_failed", u.UID, clientIP, "passkey_registration_malformed")
		return nil, ErrFactorFailed
	}
	cred, err := s.passkeys.wa.CreateCredential(passkeyUser{u: u}, st, parsed)
	if err != nil {
		s.auditLogin(ctx, "factor_failed", u.UID, clientIP, "passkey_registration")
		return nil, ErrFactorFailed
	}
	raw, err := json.Marshal(cred)
	if err != nil {
		return nil, oauth.AsError(err)
	}
	now := s.now()
	err = s.updateFactors(ctx, u.UID, func(f oauth.UserFactors) (oauth.UserFactors, error) {
		if kind == FirstFactor && f.Any() {
			return f, ErrFactorExists
		}
		for _, x := range f.Factors {
			if bytes.Equal(x.CredentialID, cred.ID) {
				return f, ErrFactorFailed
			}
		}
		f.UID = u.UID
		f.Factors = append(f.Factors, oauth.Factor{ID: oauth.NewID("f_"), Kind: oauth.FactorPasskey, CreatedAt: now, LastUsedAt: now, Credential: raw, CredentialID: cred.ID})
		f.LastStrongAuth = now
		return f, nil
	})
	if err != nil {
		if errors.Is(err, ErrFactorExists) {
			s.auditLogin(ctx, "factor_refused", u.UID, clientIP, "passkey_enrolment_factor_exists")
		}
		if errors.Is(err, ErrFactorFailed) || errors.Is(err, ErrFactorExists) {
			return nil, err
		}
		return nil, oauth.AsError(err)
	}
	s.auditLogin(ctx, "factor_enrolled", u.UID, clientIP, oauth.FactorPasskey)
	return passkeyMethods(cred), nil
}

// passkeyMethods are the amr of a passkey verified with user verification: hwk for one bound
// to its device, swk for a synced one.
func passkeyMethods(cred *webauthn.Credential) []string {
	if cred.Flags.BackupEligible {
		return []string{oauth.AMRSoftware, oauth.AMRUser}
	}
	return []string{oauth.AMRHardware, oauth.AMRUser}
}

// BeginPasskeyLogin starts a sign-in with any passkey of this site the browser holds
// (discoverable credentials, also offered by the browser's autofill: conditional mediation).
func (s *Service) BeginPasskeyLogin() (Ceremony, error) {
	opts, state, err := s.passkeys.wa.BeginDiscoverableLogin(webauthn.WithUserVerification(protocol.VerificationRequired))
	if err != nil {
		return Ceremony{}, oauth.AsError(err)
	}
	return ceremony(opts, state)
}

// BeginPasskeyStepUp starts the check of one of u's passkeys as a second factor.
func (s *Service) BeginPasskeyStepUp(ctx context.Context, u *oauth.User) (Ceremony, error) {
	return s.beginAssertion(ctx, u)
}

// beginAssertion starts an assertion, user verification required, of one of u's passkeys (a
// user without one is ErrFactorFailed); opts add to the ceremony (a payment's challenge).
func (s *Service) beginAssertion(ctx context.Context, u *oauth.User, opts ...webauthn.LoginOption) (Ceremony, error) {
	f, err := s.factors.Factors(ctx, u.UID)
	if err != nil {
		return Ceremony{}, oauth.AsError(err)
	}
	creds, err := credentials(f)
	if err != nil || len(creds) == 0 {
		return Ceremony{}, ErrFactorFailed
	}
	opts = append([]webauthn.LoginOption{webauthn.WithUserVerification(protocol.VerificationRequired)}, opts...)
	assertion, state, err := s.passkeys.wa.BeginLogin(passkeyUser{u: u, creds: creds}, opts...)
	if err != nil {
		return Ceremony{}, oauth.AsError(err)
	}
	return ceremony(assertion, state)
}

// FinishPasskey verifies a passkey assertion: for a sign-in (uid empty: the user is whoever
// the passkey's user handle names) or a step-up of uid. The signature counter must increase
// (a clone is refused), and the stored credential is updated in a compare-and-swap, so of two
// racing uses of one assertion one is accepted. It returns the user and the amr methods the
// passkey proved.
func (s *Service) FinishPasskey(ctx context.Context, uid string, state, response []byte, clientIP string) (*oauth.User, []string, error) {
	user, cred, err := s.finishAssertion(ctx, uid, state, response, clientIP, nil)
	if err != nil {
		return nil, nil, err
	}
	return user, passkeyMethods(cred), nil
}

// finishAssertion is FinishPasskey's check of an assertion; check, when set, is a further
// condition on the verified assertion (a payment's link to its details), applied before the
// credential's use is written: refused, the assertion is ErrFactorFailed and writes nothing.
func (s *Service) finishAssertion(ctx context.Context, uid string, state, response []byte, clientIP string,
	check func(st *webauthn.SessionData, parsed *protocol.ParsedCredentialAssertionData, cred *webauthn.Credential) error) (*oauth.User, *webauthn.Credential, error) {
	now := s.now()
	var st webauthn.SessionData
	if err := json.Unmarshal(state, &st); err != nil {
		return nil, nil, ErrFactorFailed
	}
	parsed, err := protocol.ParseCredentialRequestResponseBytes(response)
	if err != nil {
		s.auditLogin(ctx, "factor_failed", uid, clientIP, "passkey_malformed")
		return nil, nil, ErrFactorFailed
	}
	var user *oauth.User
	load := func(handle []byte) (passkeyUser, error) {
		u, err := s.users.GetUser(ctx, string(handle))
		if err != nil {
			return passkeyUser{}, err
		}
		if u.Disabled {
			return passkeyUser{}, oauth.ErrNotFound
		}
		f, err := s.factors.Factors(ctx, u.UID)
		if err != nil {
			return passkeyUser{}, err
		}
		creds, err := credentials(f)
		if err != nil {
			return passkeyUser{}, err
		}
		user = &u
		return passkeyUser{u: &u, creds: creds}, nil
	}
	var cred *webauthn.Credential
	if uid == "" {
		_, cred, err = s.passkeys.wa.ValidatePasskeyLogin(func(_, handle []byte) (webauthn.User, error) { return load(handle) }, st, parsed)
	} else {
		var pu passkeyUser
		if pu, err = load([]byte(uid)); err == nil {
			cred, err = s.passkeys.wa.ValidateLogin(pu, st, parsed)
		}
	}
	if err == nil && cred.Authenticator.CloneWarning {
		err = errors.New("the signature counter went back: a cloned authenticator")
	}
	reason := "passkey"
	if err == nil && user != nil && check != nil {
		if cerr := check(&st, parsed, cred); cerr != nil {
			err, reason = cerr, "passkey_payment_link"
		}
	}
	if err != nil || user == nil {
		var pe *protocol.Error
		if err != nil && !errors.As(err, &pe) && !errors.Is(err, oauth.ErrNotFound) && !errors.Is(err, oauth.ErrPaymentNotLinked) {
			s.log.WarnContext(ctx, "passkey check failed", "cause", err)
		}
		s.auditLogin(ctx, "factor_failed", uid, clientIP, reason)
		return nil, nil, ErrFactorFailed
	}
	raw, err := json.Marshal(cred)
	if err != nil {
		return nil, nil, oauth.AsError(err)
	}
	err = s.updateFactors(ctx, user.UID, func(f oauth.UserFactors) (oauth.UserFactors, error) {
		for i, x := range f.Factors {
			if x.Kind != oauth.FactorPasskey || !bytes.Equal(x.CredentialID, cred.ID) {
				continue
			}
			var stored webauthn.Credential
			if err := json.Unmarshal(x.Credential, &stored); err != nil {
				return f, err
			}
			// The counter checked above was read before this write; a racing use of the same
			// assertion has the same counter, and is refused here.
			if c := cred.Authenticator.SignCount; c != 0 && c <= stored.Authenticator.SignCount {
				return f, ErrFactorFailed
			}
			f.Factors[i].Credential, f.Factors[i].LastUsedAt = raw, now
			f.LastStrongAuth = now
			return f, nil
		}
		return f, ErrFactorFailed
	})
	if err := s.factorResult(ctx, user.UID, clientIP, "passkey", err); err != nil {
		return nil, nil, err
	}
	return user, cred, nil
}
