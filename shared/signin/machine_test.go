package signin_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/signin"
)

// reach drives a new browser's sign-in to step, as its user would: login (a request), second
// (alice, a payment), enrol (bob, a payment), codes (bob set up an app), consent (bob, openid),
// add_passkey (bob chose to add a passkey), payment (bob, a payment_initiation: he holds no
// passkey, so the page says so and offers to add one).
func reach(t *testing.T, f *fixture, step signin.Step) (*browser, page) {
	t.Helper()
	b := &browser{bid: "browser-1"}
	scope, details := transfers, ""
	switch step {
	case signin.StepConsent, signin.StepAddPasskey:
		scope = "openid"
	case signin.StepPayment:
		scope, details = "openid", payment10
	}
	p := f.startWith(b, scope, details)
	var err error
	step1 := func(action signin.Action, in signin.Input) {
		t.Helper()
		if err == nil {
			p, err = f.act(b, p, action, in)
		}
	}
	switch step {
	case signin.StepSecond:
		step1(signin.ActLogin, signin.Input{Username: alice, Password: alicePassword})
	case signin.StepEnrol, signin.StepConsent, signin.StepPayment:
		step1(signin.ActLogin, signin.Input{Username: bob, Password: bobPassword})
	case signin.StepCodes:
		step1(signin.ActLogin, signin.Input{Username: bob, Password: bobPassword})
		if err == nil {
			step1(signin.ActEnrolTOTP, signin.Input{Code: f.totp(p.out.TOTP.Secret, 0)})
		}
	case signin.StepAddPasskey:
		step1(signin.ActLogin, signin.Input{Username: bob, Password: bobPassword})
		step1(signin.ActOfferPasskey, signin.Input{})
	}
	if err != nil || p.out.Step != step {
		t.Fatalf("reach %q: at %v, %v", step, p.out, err)
	}
	return b, p
}

// attackerInput is what each action posts in TestMachine_EveryActionInEveryStep: bob's own
// password, a wrong code, a credential that is no WebAuthn answer.
var attackerInput = map[signin.Action]signin.Input{
	signin.ActLogin:           {Username: bob, Password: bobPassword},
	signin.ActPasskeyLogin:    {Credential: "{}"},
	signin.ActTOTP:            {Code: "000000"},
	signin.ActRecoveryCode:    {Code: "aaaa-bbbb-cccc-dddd"},
	signin.ActPasskey:         {Credential: "{}"},
	signin.ActEnrolTOTP:       {Code: "000000"},
	signin.ActRegisterPasskey: {Credential: "{}"},
	signin.ActPayPasskey:      {Credential: "{}"},
	signin.ActPayTOTP:         {Code: "000000"},
}

// redirect stands for an outcome that answers the client (the request is decided).
const redirect signin.Step = "(redirect)"

// TestMachine_EveryActionInEveryStep: every action posted at every step. An action the step
// does not accept is refused (ErrRefused) and the store is byte for byte as it was; an accepted
// one leads where the table below says, for these inputs.
func TestMachine_EveryActionInEveryStep(t *testing.T) {
	refused := signin.Step("(refused)")
	next := map[signin.Step]map[signin.Action]signin.Step{
		signin.StepLogin: {signin.ActLogin: signin.StepEnrol, signin.ActPasskeyLogin: signin.StepLogin},
		signin.StepSecond: {signin.ActTOTP: signin.StepSecond, signin.ActRecoveryCode: signin.StepSecond,
			signin.ActPasskey: refused /* alice holds no passkey: no ceremony */, signin.ActSwitch: signin.StepLogin},
		signin.StepEnrol: {signin.ActEnrolTOTP: signin.StepEnrol, signin.ActRegisterPasskey: signin.StepEnrol,
			signin.ActSwitch: signin.StepLogin},
		signin.StepCodes: {signin.ActContinue: signin.StepConsent},
		signin.StepConsent: {signin.ActAllow: redirect, signin.ActDeny: redirect, signin.ActSwitch: signin.StepLogin,
			signin.ActOfferPasskey: signin.StepAddPasskey},
		signin.StepAddPasskey: {signin.ActRegisterPasskey: signin.StepAddPasskey, signin.ActContinue: signin.StepConsent,
			signin.ActSwitch: signin.StepLogin},
		// bob holds no passkey: no ceremony to answer; TOTP is not in the default payment
		// policy; allow is no action of this step (dynamic linking).
		signin.StepPayment: {signin.ActPayPasskey: refused, signin.ActPayTOTP: refused, signin.ActDeny: redirect,
			signin.ActSwitch: signin.StepLogin, signin.ActOfferPasskey: signin.StepAddPasskey},
	}
	for _, step := range signin.Steps {
		for _, action := range signin.Actions {
			t.Run(fmt.Sprintf("%s/%s", step, action), func(t *testing.T) {
				f := newFixture(t)
				b, p := reach(t, f, step)
				before := f.digest()
				out, err := f.act(b, p, action, attackerInput[action])
				want, accepted := next[step][action]
				if accepted != signin.Allowed(step, action) {
					t.Fatalf("the test's table and the machine's disagree on %s at %s", action, step)
				}
				got := out.out.Step
				switch {
				case errors.Is(err, signin.ErrRefused):
					got = refused
				case err != nil:
					t.Fatalf("%s at %s: %v", action, step, err)
				case out.out.Redirect != nil:
					got = redirect
				}
				if !accepted {
					want = refused
				}
				if got != want {
					t.Fatalf("%s at %s: %q, want %q", action, step, got, want)
				}
				if got == refused && f.digest() != before {
					t.Fatalf("%s at %s was refused but wrote to the store", action, step)
				}
			})
		}
	}
}

// TestMachine_PasswordAloneNeverAddsAFactor: alice, signed in with her password alone, cannot
// start adding a passkey, neither at her second step nor on a consent page that needed no
// second step; with her app passed, she can, and the new passkey is not her second step.
func TestMachine_PasswordAloneNeverAddsAFactor(t *testing.T) {
	f := newFixture(t)
	for _, scope := range []string{transfers, "openid"} {
		b := &browser{bid: "b-" + scope}
		p, err := f.login(b, f.start(b, scope), alice, alicePassword)
		must(t, err)
		if scope == "openid" && (p.out.Step != signin.StepConsent || p.out.OfferPasskey) {
			t.Fatalf("openid: at %v, offer %v: want the consent page without the offer", p.out, p.out.OfferPasskey)
		}
		before := f.digest()
		for _, a := range []signin.Action{signin.ActOfferPasskey, signin.ActRegisterPasskey} {
			if _, err := f.act(b, p, a, signin.Input{Credential: "{}"}); !errors.Is(err, signin.ErrRefused) {
				t.Fatalf("%s: %s with the password alone: %v, want ErrRefused", scope, a, err)
			}
		}
		if f.digest() != before {
			t.Fatalf("%s: a refused factor change wrote to the store", scope)
		}
	}
	// With the app passed, the offer is there.
	b := &browser{bid: "b-strong"}
	p, err := f.login(b, f.start(b, transfers), alice, alicePassword)
	must(t, err)
	p, err = f.act(b, p, signin.ActTOTP, signin.Input{Code: f.totp(aliceSecret, 0)})
	must(t, err)
	if p.out.Step != signin.StepConsent || !p.out.OfferPasskey {
		t.Fatalf("after the app: %v offer %v", p.out, p.out.OfferPasskey)
	}
	if p, err = f.act(b, p, signin.ActOfferPasskey, signin.Input{}); err != nil || p.out.Step != signin.StepAddPasskey {
		t.Fatalf("offer after a strong sign-in: %v %v", p.out, err)
	}
}

// TestMachine_AnotherUsersCredentialsCarryNothingOver: bob's set-up page holds a secret; the
// login form cannot be posted again on his request; alice signs in after a switch on a new
// request that carries none of bob's state, and bob's secret cannot become her factor.
func TestMachine_AnotherUsersCredentialsCarryNothingOver(t *testing.T) {
	f := newFixture(t)
	b := &browser{bid: "shared"}
	first := f.start(b, transfers)
	p, err := f.login(b, first, bob, bobPassword)
	must(t, err)
	if p.out.Step != signin.StepEnrol || p.id == first.id {
		t.Fatalf("bob's login: %v on %s (first %s): want enrol on a new request", p.out, p.id, first.id)
	}
	secret := p.out.TOTP.Secret
	if _, err := f.login(b, first, alice, alicePassword); !errors.Is(err, signin.ErrExpired) {
		t.Fatalf("a login on the request bob's sign-in replaced: %v, want ErrExpired", err)
	}
	if _, err := f.login(b, p, alice, alicePassword); !errors.Is(err, signin.ErrRefused) {
		t.Fatalf("alice's login on bob's bound request: %v, want ErrRefused", err)
	}
	p, err = f.act(b, p, signin.ActSwitch, signin.Input{})
	must(t, err)
	if p.out.Step != signin.StepLogin || b.sid != "" {
		t.Fatalf("switch: %v, session %q", p.out, b.sid)
	}
	p, err = f.login(b, p, alice, alicePassword)
	must(t, err)
	stored, err := f.st.GetAuthRequest(context.Background(), p.id, f.clock())
	must(t, err)
	if stored.PendingTOTP != "" || stored.UID != "u_"+alice || p.out.Step != signin.StepSecond {
		t.Fatalf("alice's request: step %q uid %q pending %v", stored.Step, stored.UID, stored.PendingTOTP != "")
	}
	if _, err := f.act(b, p, signin.ActEnrolTOTP, signin.Input{Code: f.totp(secret, 0)}); !errors.Is(err, signin.ErrRefused) {
		t.Fatalf("bob's secret posted on alice's second step: %v, want ErrRefused", err)
	}
	if fs := f.factors(alice); len(fs.Factors) != 1 || fs.Factors[0].Secret != aliceSecret {
		t.Fatalf("alice's factors changed: %+v", fs.Factors)
	}
}

// TestMachine_StaleSetUpPageCannotReplaceAFactor: bob opens two set-up pages; he sets up the
// app of the second; a code of the first page's secret then sets up nothing, and the request
// moves to the second step of the app he holds.
func TestMachine_StaleSetUpPageCannotReplaceAFactor(t *testing.T) {
	f := newFixture(t)
	b1, b2 := &browser{bid: "one"}, &browser{bid: "two"}
	stale, err := f.login(b1, f.start(b1, transfers), bob, bobPassword)
	must(t, err)
	p, err := f.login(b2, f.start(b2, transfers), bob, bobPassword)
	must(t, err)
	kept := p.out.TOTP.Secret
	if _, err = f.act(b2, p, signin.ActEnrolTOTP, signin.Input{Code: f.totp(kept, 0)}); err != nil {
		t.Fatal(err)
	}
	recovery := f.factors(bob).Factors[0].RecoveryHashes
	p, err = f.act(b1, stale, signin.ActEnrolTOTP, signin.Input{Code: f.totp(stale.out.TOTP.Secret, 0)})
	must(t, err)
	fs := f.factors(bob)
	if len(fs.Factors) != 1 || fs.Factors[0].Secret != kept || strings.Join(fs.Factors[0].RecoveryHashes, ",") != strings.Join(recovery, ",") {
		t.Fatal("the stale set-up page replaced bob's app or his recovery codes")
	}
	if p.out.Step != signin.StepSecond || p.out.RecoveryCodes != nil {
		t.Fatalf("the stale page: %v, want the second step and no recovery codes", p.out)
	}
}

// TestMachine_PasskeyActionsWithPasskeysOffAreRefused: with passkeys off, every passkey action
// at every step that would accept it is a refusal, 200 times over, never a panic.
func TestMachine_PasskeyActionsWithPasskeysOffAreRefused(t *testing.T) {
	f := newFixture(t)
	f.passkeysOff()
	b, p := reach(t, f, signin.StepConsent)
	before := f.digest()
	for range 200 {
		if _, err := f.act(b, p, signin.ActOfferPasskey, signin.Input{}); !errors.Is(err, signin.ErrRefused) {
			t.Fatalf("passkey_offer with passkeys off: %v", err)
		}
	}
	if f.digest() != before {
		t.Fatal("a refused passkey_offer wrote to the store")
	}
	login := f.start(&browser{bid: "other"}, "openid")
	if _, err := f.act(&browser{bid: "other"}, login, signin.ActPasskeyLogin, signin.Input{Credential: "{}"}); !errors.Is(err, signin.ErrRefused) {
		t.Fatalf("passkey_login with passkeys off: %v", err)
	}
}

// TestMachine_AStrangerIsRefused: another browser that knows a request's id and its CSRF
// token, with or without a session of its own, can do nothing on it, and writes nothing.
func TestMachine_AStrangerIsRefused(t *testing.T) {
	for _, step := range signin.Steps {
		t.Run(string(step), func(t *testing.T) {
			f := newFixture(t)
			_, p := reach(t, f, step)
			stranger := &browser{bid: "stranger"}
			signedIn := &browser{bid: "stranger-2"}
			_, err := f.login(signedIn, f.start(signedIn, "openid"), alice, alicePassword)
			must(t, err)
			before := f.digest()
			for _, s := range []*browser{stranger, signedIn} {
				for _, a := range signin.Actions {
					sid := s.sid
					if _, err := f.act(s, p, a, attackerInput[a]); !errors.Is(err, signin.ErrRefused) {
						t.Fatalf("%s by a stranger at %s: %v", a, step, err)
					}
					s.sid = sid
				}
			}
			if f.digest() != before {
				t.Fatal("a stranger's refused actions wrote to the store")
			}
		})
	}
}

// TestMachine_ActionsNeedTheBoundSession: after another sign-in in the same browser (a second
// tab), the first request's page can do nothing: its session is no longer the browser's.
func TestMachine_ActionsNeedTheBoundSession(t *testing.T) {
	f := newFixture(t)
	b := &browser{bid: "tabs"}
	bobs, err := f.login(b, f.start(b, "openid"), bob, bobPassword)
	must(t, err)
	bobSession := b.sid
	tab := f.start(b, "openid") // bob's session answers it: his consent page
	tab, err = f.act(b, tab, signin.ActSwitch, signin.Input{})
	must(t, err)
	_, err = f.login(b, tab, alice, alicePassword)
	must(t, err)
	if _, err := f.act(b, bobs, signin.ActAllow, signin.Input{}); !errors.Is(err, signin.ErrRefused) {
		t.Fatalf("bob's consent with alice's session: %v", err)
	}
	b.sid = bobSession // ended by alice's sign-in in the same browser
	if _, err := f.act(b, bobs, signin.ActAllow, signin.Input{}); !errors.Is(err, signin.ErrRefused) {
		t.Fatalf("bob's consent with his ended session: %v", err)
	}
}

// TestMachine_RacingSignInsOnOneRequestOneWins: 50 logins posted at once on one request: one
// binds it, the others are refused.
func TestMachine_RacingSignInsOnOneRequestOneWins(t *testing.T) {
	f := newFixture(t)
	p := f.start(&browser{bid: "race"}, "openid")
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, refusals := 0, 0
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user, pw := bob, bobPassword
			if i%2 == 0 {
				user, pw = alice, alicePassword
			}
			_, err := f.login(&browser{bid: "race"}, p, user, pw)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, signin.ErrRefused), errors.Is(err, signin.ErrExpired):
				refusals++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 || refusals != 49 {
		t.Fatalf("%d sign-ins bound the request, %d refused; want 1 and 49", wins, refusals)
	}
}

// TestMachine_UsedCodeSaysWaitForTheNext: a second sign-in within the same 30 seconds with the
// code just used is refused with the hint to wait for the next code.
func TestMachine_UsedCodeSaysWaitForTheNext(t *testing.T) {
	f := newFixture(t)
	code := f.totp(aliceSecret, 0)
	for i, wantUsed := range []bool{false, true} {
		b := &browser{bid: fmt.Sprint("b", i)}
		p, err := f.login(b, f.start(b, transfers), alice, alicePassword)
		must(t, err)
		p, err = f.act(b, p, signin.ActTOTP, signin.Input{Code: code})
		must(t, err)
		if used := p.out.Step == signin.StepSecond && p.out.Failed && p.out.CodeUsed; used != wantUsed {
			t.Fatalf("sign-in %d: %v failed %v used %v", i, p.out, p.out.Failed, p.out.CodeUsed)
		}
	}
}

// TestMachine_EveryAuditLineNamesTheClient: every audit record of sign-ins, refusals and
// second factors carries the request's client_id.
func TestMachine_EveryAuditLineNamesTheClient(t *testing.T) {
	f := newFixture(t)
	b := &browser{bid: "audit"}
	p, err := f.login(b, f.start(b, transfers), alice, alicePassword)
	must(t, err)
	_, _ = f.act(b, p, signin.ActTOTP, signin.Input{Code: "000000"})
	_, _ = f.act(b, p, signin.ActOfferPasskey, signin.Input{})
	p, err = f.act(b, p, signin.ActTOTP, signin.Input{Code: f.totp(aliceSecret, 0)})
	must(t, err)
	_, err = f.act(b, p, signin.ActAllow, signin.Input{})
	must(t, err)
	f.mu.Lock()
	defer f.mu.Unlock()
	events := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(f.audit.String()))
	for sc.Scan() {
		var line struct {
			Event    string `json:"event"`
			ClientID string `json:"client_id"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("%v: %s", err, sc.Text())
		}
		events[line.Event] = true
		if line.Event != "factor_enrolled" && line.ClientID != clientID { // the fixture's own set-up has no client
			t.Errorf("%s: client_id %q", line.Event, line.ClientID)
		}
	}
	for _, e := range []string{"login_succeeded", "factor_failed", "signin_refused", "factor_succeeded", "consent_granted"} {
		if !events[e] {
			t.Errorf("no %s record", e)
		}
	}
}

// TestNew_RefusesAMachineWithoutItsServices: the machine needs the token service with its
// client and interaction stores and a clock, and the user's authentication; without any of
// them New is an error, never a machine that fails on its first action.
func TestNew_RefusesAMachineWithoutItsServices(t *testing.T) {
	f := newFixture(t)
	noClients, noInteractions, noClock := *f.svc, *f.svc, *f.svc
	noClients.Clients, noInteractions.Interactions, noClock.Clock = nil, nil, nil
	for name, c := range map[string]struct {
		grants *oauth.Service
		users  *authn.Service
	}{
		"no token service":              {nil, f.users},
		"no authentication":             {f.svc, nil},
		"no client store":               {&noClients, f.users},
		"no interaction store":          {&noInteractions, f.users},
		"no clock in the token service": {&noClock, f.users},
	} {
		if m, err := signin.New(c.grants, c.users); m != nil || err == nil {
			t.Errorf("%s: New = %v, %v; want an error", name, m, err)
		}
	}
	if m, err := signin.New(f.svc, f.users); m == nil || err != nil {
		t.Fatalf("New(the fixture's services) = %v, %v", m, err)
	}
}
