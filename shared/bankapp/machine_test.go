package bankapp_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/acmebank/authserver/shared/bankapp"
	"github.com/acmebank/authserver/shared/oauth"
)

// reach puts a fresh phone of alice's at step, with one pending request of hers, and returns
// the phone, the request and the input each action posts there (the step's right CSRF token,
// her request, the approval attempt, bob's credentials, a wrong code, no WebAuthn answer).
func reach(f *fixture, step bankapp.Step) (*phone, string, bankapp.Input) {
	f.t.Helper()
	ref := f.request(alice, "A1B2", "")
	p := newPhone(alice)
	in := bankapp.Input{CSRF: bankapp.LoginCSRF(p.bid), Username: bob, Password: bobPassword, Ref: ref, Code: "000000", Credential: "{}"}
	if step == bankapp.StepSignedOut {
		return p, ref, in
	}
	f.signIn(p, alice, alicePassword)
	in.CSRF = bankapp.CSRF(p.session)
	if step == bankapp.StepApproving {
		in.Attempt = f.startApproval(p, ref).Attempt
	}
	return p, ref, in
}

// TestMachine_EveryActionInEveryStep: every action posted at every step. An action the step
// does not accept is refused (ErrRefused) and the store is byte for byte as it was; an
// accepted one leads where the table says, for these inputs, and only approve_passkey or
// approve_totp with a factor that passed could approve: here none passes, so no request is
// ever approved.
func TestMachine_EveryActionInEveryStep(t *testing.T) {
	const refused = bankapp.Step("(refused)")
	next := map[bankapp.Step]map[bankapp.Action]bankapp.Step{
		bankapp.StepSignedOut: {bankapp.ActSignIn: bankapp.StepList},
		bankapp.StepList: {bankapp.ActApprove: bankapp.StepApproving, bankapp.ActDeny: bankapp.StepDone,
			bankapp.ActSignOut: bankapp.StepSignedOut},
		// "{}" is no assertion and 000000 no code of alice's: a new attempt, marked failed.
		bankapp.StepApproving: {bankapp.ActPasskey: bankapp.StepApproving, bankapp.ActTOTP: bankapp.StepApproving,
			bankapp.ActDeny: bankapp.StepDone, bankapp.ActCancel: bankapp.StepList, bankapp.ActSignOut: bankapp.StepSignedOut},
	}
	for _, step := range bankapp.Steps {
		for _, action := range bankapp.Actions {
			t.Run(fmt.Sprintf("%s/%s", step, action), func(t *testing.T) {
				f := newFixture(t)
				p, ref, in := reach(f, step)
				in.Action = action
				before := f.digest()
				out, err := f.act(p, in)
				want, accepted := next[step][action]
				if accepted != bankapp.Allowed(step, action) {
					t.Fatalf("the test's table and the machine's disagree on %s at %s", action, step)
				}
				got := out.Step
				switch {
				case errors.Is(err, bankapp.ErrRefused):
					got = refused
				case err != nil:
					t.Fatalf("%s at %s: %v", action, step, err)
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
				if s := f.stored(ref).State; s == oauth.CIBAApproved {
					t.Fatalf("%s at %s approved the request without a factor", action, step)
				}
				if (action == bankapp.ActPasskey || action == bankapp.ActTOTP) && accepted && !out.Failed {
					t.Fatalf("%s at %s with no valid factor: not marked failed", action, step)
				}
			})
		}
	}
}

// TestBankApp_BobNeverSeesOrDecidesAlicesRequest: alice has a pending request and has opened
// its approval. bob, signed in on his own phone, does not see it, and every action of his
// naming it (by its reference or by alice's attempt) is refused and writes nothing; alice's
// attempt still approves it afterwards.
func TestBankApp_BobNeverSeesOrDecidesAlicesRequest(t *testing.T) {
	f := newFixture(t)
	ref := f.request(alice, "A1B2", "")
	ap := newPhone(alice)
	f.signIn(ap, alice, alicePassword)
	approving := f.startApproval(ap, ref)

	bp := newPhone(bob)
	if out := f.signIn(bp, bob, bobPassword); len(out.Pending) != 0 {
		t.Fatalf("bob's list shows %d requests, want none of alice's", len(out.Pending))
	}
	if out, err := f.m.Visit(context.Background(), bankapp.Input{Session: bp.session}); err != nil || len(out.Pending) != 0 {
		t.Fatalf("bob's page: %d requests, %v; want none", len(out.Pending), err)
	}
	before := f.digest()
	csrf := bankapp.CSRF(bp.session)
	for _, in := range []bankapp.Input{
		{Action: bankapp.ActApprove, CSRF: csrf, Ref: ref},
		{Action: bankapp.ActDeny, CSRF: csrf, Ref: ref},
		{Action: bankapp.ActPasskey, CSRF: csrf, Attempt: approving.Attempt, Credential: f.assert(bob, approving)},
		{Action: bankapp.ActTOTP, CSRF: csrf, Attempt: approving.Attempt, Code: f.totp(aliceSecret, 0)},
		{Action: bankapp.ActDeny, CSRF: csrf, Attempt: approving.Attempt},
		{Action: bankapp.ActCancel, CSRF: csrf, Attempt: approving.Attempt},
		{Action: bankapp.ActSignOut, CSRF: csrf, Attempt: approving.Attempt},
	} {
		if _, err := f.act(bp, in); !errors.Is(err, bankapp.ErrRefused) {
			t.Fatalf("bob's %s of alice's request: %v, want refused", in.Action, err)
		}
	}
	if f.digest() != before {
		t.Fatal("bob's refused actions wrote to the store")
	}
	out, err := f.act(ap, bankapp.Input{Action: bankapp.ActPasskey, CSRF: bankapp.CSRF(ap.session), Attempt: approving.Attempt, Credential: f.assert(alice, approving)})
	if err != nil || out.Step != bankapp.StepDone || !out.Approved {
		t.Fatalf("alice's approval after bob's attempts: %+v, %v", out, err)
	}
}

// TestBankApp_AStrangerGetsNothing: without a session the page shows no list, and every
// action but the sign-in is refused, writing nothing, whatever reference or attempt it names.
func TestBankApp_AStrangerGetsNothing(t *testing.T) {
	f := newFixture(t)
	ref := f.request(alice, "A1B2", "")
	ap := newPhone(alice)
	f.signIn(ap, alice, alicePassword)
	approving := f.startApproval(ap, ref)

	sp := newPhone("stranger")
	out, err := f.m.Visit(context.Background(), bankapp.Input{Browser: sp.bid})
	if err != nil || out.Step != bankapp.StepSignedOut || len(out.Pending) != 0 || out.User != nil {
		t.Fatalf("a stranger's visit: %+v, %v; want the sign-in only", out, err)
	}
	before := f.digest()
	for _, action := range bankapp.Actions {
		if action == bankapp.ActSignIn {
			continue
		}
		for _, csrf := range []string{bankapp.LoginCSRF(sp.bid), bankapp.CSRF(ap.session)} {
			_, err := f.act(sp, bankapp.Input{Action: action, CSRF: csrf, Ref: ref, Attempt: approving.Attempt, Code: f.totp(aliceSecret, 0)})
			if !errors.Is(err, bankapp.ErrRefused) {
				t.Fatalf("a stranger's %s: %v, want refused", action, err)
			}
		}
	}
	if f.digest() != before {
		t.Fatal("a stranger's refused actions wrote to the store")
	}
	if f.stored(ref).State != oauth.CIBAPending {
		t.Fatal("a stranger's actions decided alice's request")
	}
}

// TestBankApp_APostWithoutTheSessionsCSRFTokenIsRefused: a post from list or approving without
// the session's CSRF token, or with another session's, or a sign-in without the browser's, is
// refused and writes nothing.
func TestBankApp_APostWithoutTheSessionsCSRFTokenIsRefused(t *testing.T) {
	f := newFixture(t)
	ref := f.request(alice, "A1B2", "")
	ap := newPhone(alice)
	f.signIn(ap, alice, alicePassword)
	bp := newPhone(bob)
	f.signIn(bp, bob, bobPassword)
	approving := f.startApproval(ap, ref)
	before := f.digest()
	for _, csrf := range []string{"", bankapp.CSRF(bp.session), bankapp.LoginCSRF(ap.bid), "x"} {
		for _, in := range []bankapp.Input{
			{Action: bankapp.ActDeny, Ref: ref},
			{Action: bankapp.ActApprove, Ref: ref},
			{Action: bankapp.ActSignOut},
			{Action: bankapp.ActDeny, Attempt: approving.Attempt},
			{Action: bankapp.ActTOTP, Attempt: approving.Attempt, Code: f.totp(aliceSecret, 0)},
		} {
			in.CSRF = csrf
			if _, err := f.act(ap, in); !errors.Is(err, bankapp.ErrRefused) {
				t.Fatalf("%s with CSRF token %q: %v, want refused", in.Action, csrf, err)
			}
		}
	}
	sp := newPhone("stranger")
	for _, csrf := range []string{"", bankapp.LoginCSRF("another-browser")} {
		if _, err := f.act(sp, bankapp.Input{Action: bankapp.ActSignIn, CSRF: csrf, Username: alice, Password: alicePassword}); !errors.Is(err, bankapp.ErrRefused) {
			t.Fatalf("a sign-in with CSRF token %q: %v, want refused", csrf, err)
		}
	}
	if f.digest() != before {
		t.Fatal("a refused post wrote to the store")
	}
}

// TestBankApp_AReplayedApprovalIsRefused: the post that approved, sent again, is refused and
// writes nothing; the request was decided once.
func TestBankApp_AReplayedApprovalIsRefused(t *testing.T) {
	f := newFixture(t)
	ref := f.request(alice, "A1B2", "")
	ap := newPhone(alice)
	f.signIn(ap, alice, alicePassword)
	approving := f.startApproval(ap, ref)
	in := bankapp.Input{Action: bankapp.ActPasskey, CSRF: bankapp.CSRF(ap.session), Attempt: approving.Attempt, Credential: f.assert(alice, approving)}
	out, err := f.act(ap, in)
	if err != nil || !out.Approved {
		t.Fatalf("approval: %+v, %v", out, err)
	}
	decided := f.stored(ref)
	before := f.digest()
	if _, err := f.act(ap, in); !errors.Is(err, bankapp.ErrRefused) {
		t.Fatalf("the replayed approval: %v, want refused", err)
	}
	if f.digest() != before || !f.stored(ref).DecidedAt.Equal(decided.DecidedAt) {
		t.Fatal("the replayed approval wrote to the store")
	}
	if n := f.auditCount("ciba_approved"); n != 1 {
		t.Fatalf("%d approvals audited, want 1", n)
	}
}

// TestBankApp_APasswordAloneNeverApproves: signed in with her password, alice can open the
// approval but not complete it without a factor: no assertion, an empty or wrong code, an
// assertion of bob's passkey; the request stays pending. The approval that passes carries
// mfa in its amr.
func TestBankApp_APasswordAloneNeverApproves(t *testing.T) {
	f := newFixture(t)
	ref := f.request(alice, "A1B2", "")
	ap := newPhone(alice)
	f.signIn(ap, alice, alicePassword)
	approving := f.startApproval(ap, ref)
	csrf := bankapp.CSRF(ap.session)
	for _, in := range []bankapp.Input{
		{Action: bankapp.ActPasskey, Credential: ""},
		{Action: bankapp.ActPasskey, Credential: f.assert(bob, approving)},
		{Action: bankapp.ActTOTP, Code: ""},
		{Action: bankapp.ActTOTP, Code: "123456"},
	} {
		in.CSRF, in.Attempt = csrf, approving.Attempt
		out, err := f.act(ap, in)
		if err != nil || out.Step != bankapp.StepApproving || !out.Failed {
			t.Fatalf("%s %q: %+v, %v; want a failed attempt", in.Action, in.Credential+in.Code, out, err)
		}
		approving = out
		if f.stored(ref).State != oauth.CIBAPending {
			t.Fatalf("%s without a valid factor decided the request", in.Action)
		}
	}
	out, err := f.act(ap, bankapp.Input{Action: bankapp.ActTOTP, CSRF: csrf, Attempt: approving.Attempt, Code: f.totp(aliceSecret, 0)})
	if err != nil || !out.Approved {
		t.Fatalf("approval with the code: %+v, %v", out, err)
	}
	g := f.stored(ref).Grant
	if g == nil || !oauth.AMRStrong(g.AMR) {
		t.Fatalf("the approved grant's amr %v, want mfa", g)
	}
}

// TestBankApp_WrongCodesCountTowardTheFactorLockout: with a limit of 3 failures, three wrong
// codes lock alice's factor, and then her right code is refused too: the request stays pending.
func TestBankApp_WrongCodesCountTowardTheFactorLockout(t *testing.T) {
	f := newFixtureWith(t, options{maxFailures: 3})
	ref := f.request(alice, "A1B2", "")
	ap := newPhone(alice)
	f.signIn(ap, alice, alicePassword)
	out := f.startApproval(ap, ref)
	csrf := bankapp.CSRF(ap.session)
	for range 3 {
		var err error
		out, err = f.act(ap, bankapp.Input{Action: bankapp.ActTOTP, CSRF: csrf, Attempt: out.Attempt, Code: "000000"})
		if err != nil || !out.Failed {
			t.Fatalf("a wrong code: %+v, %v", out, err)
		}
	}
	out, err := f.act(ap, bankapp.Input{Action: bankapp.ActTOTP, CSRF: csrf, Attempt: out.Attempt, Code: f.totp(aliceSecret, 0)})
	if err != nil || !out.Failed || out.Approved {
		t.Fatalf("the right code after the lockout: %+v, %v; want refused", out, err)
	}
	if f.stored(ref).State != oauth.CIBAPending {
		t.Fatal("a locked factor approved the request")
	}
	if f.auditCount("factor_locked") == 0 {
		t.Fatal("the lockout was not audited")
	}
}

// TestBankApp_RacingApprovalsOfOneRequestDecideItOnce: 50 approval attempts of one request,
// each with its own valid passkey assertion, posted at once: exactly one approves; the others
// are told the request is gone (or their assertion lost the counter race); one decision is
// stored and audited. Then 50 racing posts of one attempt: one takes it.
func TestBankApp_RacingApprovalsOfOneRequestDecideItOnce(t *testing.T) {
	const n = 50
	f := newFixture(t)
	ref := f.request(alice, "A1B2", "")
	ap := newPhone(alice)
	f.signIn(ap, alice, alicePassword)
	csrf := bankapp.CSRF(ap.session)
	ins := make([]bankapp.Input, n)
	for i := range ins {
		a := f.startApproval(ap, ref)
		ins[i] = bankapp.Input{Action: bankapp.ActPasskey, CSRF: csrf, Attempt: a.Attempt, Credential: f.assert(alice, a),
			Session: ap.session, Browser: ap.bid}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	approved := 0
	for i := range ins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := f.m.Act(context.Background(), ins[i])
			if err != nil && !errors.Is(err, bankapp.ErrRefused) {
				t.Errorf("racing approval: %v", err)
			}
			if err == nil && out.Approved {
				mu.Lock()
				approved++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if approved != 1 {
		t.Fatalf("%d racing approvals approved, want exactly 1", approved)
	}
	if r := f.stored(ref); r.State != oauth.CIBAApproved || r.Grant == nil {
		t.Fatalf("the request is %s, want approved with a grant", r.State)
	}
	if got := f.auditCount("ciba_approved"); got != 1 {
		t.Fatalf("%d approvals audited, want 1", got)
	}

	// One attempt, posted 50 times at once: one post takes it.
	ref2 := f.request(alice, "C3D4", "")
	a := f.startApproval(ap, ref2)
	in := bankapp.Input{Action: bankapp.ActPasskey, CSRF: csrf, Attempt: a.Attempt, Credential: f.assert(alice, a), Session: ap.session, Browser: ap.bid}
	taken := 0
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.m.Act(context.Background(), in)
			if err == nil {
				mu.Lock()
				taken++
				mu.Unlock()
			} else if !errors.Is(err, bankapp.ErrRefused) {
				t.Errorf("racing post of one attempt: %v", err)
			}
		}()
	}
	wg.Wait()
	if taken != 1 || f.stored(ref2).State != oauth.CIBAApproved {
		t.Fatalf("%d of %d posts of one attempt were answered (want 1), request %s", taken, n, f.stored(ref2).State)
	}
}

// TestBankApp_APaymentIsApprovedWithEvidenceOverItsDetails: a payment's approval asks for the
// passkey over the dynamic-linking challenge of its details (TOTP is not offered under the
// default payment policy), and the grant keeps evidence that checks against those details.
func TestBankApp_APaymentIsApprovedWithEvidenceOverItsDetails(t *testing.T) {
	f := newFixture(t)
	ref := f.request(alice, "PAY-10", payment10)
	ap := newPhone(alice)
	f.signIn(ap, alice, alicePassword)
	a := f.startApproval(ap, ref)
	if a.TOTP {
		t.Fatal("a payment offers TOTP though the payment policy does not accept it")
	}
	if _, err := f.act(ap, bankapp.Input{Action: bankapp.ActTOTP, CSRF: bankapp.CSRF(ap.session), Attempt: a.Attempt, Code: f.totp(aliceSecret, 0)}); !errors.Is(err, bankapp.ErrRefused) {
		t.Fatalf("a payment approved with TOTP against the policy: %v, want refused", err)
	}
	a = f.startApproval(ap, ref)
	out, err := f.act(ap, bankapp.Input{Action: bankapp.ActPasskey, CSRF: bankapp.CSRF(ap.session), Attempt: a.Attempt, Credential: f.assert(alice, a)})
	if err != nil || !out.Approved {
		t.Fatalf("the payment's approval: %+v, %v", out, err)
	}
	r := f.stored(ref)
	if r.Grant == nil || r.Grant.PaymentEvidence == nil || r.Grant.PaymentEvidence.Check(r.AuthorizationDetails) != nil {
		t.Fatalf("the payment's grant holds no evidence over its details: %+v", r.Grant)
	}
}

// TestBankApp_DenyNeedsOnlyTheSession: alice denies from the list; the request is denied
// once, and a second deny is refused.
func TestBankApp_DenyNeedsOnlyTheSession(t *testing.T) {
	f := newFixture(t)
	ref := f.request(alice, "A1B2", "")
	ap := newPhone(alice)
	f.signIn(ap, alice, alicePassword)
	out, err := f.act(ap, bankapp.Input{Action: bankapp.ActDeny, CSRF: bankapp.CSRF(ap.session), Ref: ref})
	if err != nil || out.Step != bankapp.StepDone || out.Approved || len(out.Pending) != 0 {
		t.Fatalf("deny: %+v, %v", out, err)
	}
	if f.stored(ref).State != oauth.CIBADenied {
		t.Fatalf("the request is %s, want denied", f.stored(ref).State)
	}
	if _, err := f.act(ap, bankapp.Input{Action: bankapp.ActDeny, CSRF: bankapp.CSRF(ap.session), Ref: ref}); !errors.Is(err, bankapp.ErrRefused) {
		t.Fatalf("a second deny: %v, want refused", err)
	}
}

// TestBankApp_AnAssertionMadeForAnotherRequestDoesNotApproveThisOne: alice's passkey answer
// to the approval of one request, posted on the attempt of another, is refused; neither is
// approved, and the answer still approves the request it was made for only through its own
// attempt.
func TestBankApp_AnAssertionMadeForAnotherRequestDoesNotApproveThisOne(t *testing.T) {
	f := newFixture(t)
	ref1, ref2 := f.request(alice, "ONE-1", ""), f.request(alice, "TWO-2", "")
	ap := newPhone(alice)
	f.signIn(ap, alice, alicePassword)
	a1, a2 := f.startApproval(ap, ref1), f.startApproval(ap, ref2)
	forOne := f.assert(alice, a1)
	out, err := f.act(ap, bankapp.Input{Action: bankapp.ActPasskey, CSRF: bankapp.CSRF(ap.session), Attempt: a2.Attempt, Credential: forOne})
	if err != nil || !out.Failed || out.Approved {
		t.Fatalf("an assertion for another request: %+v, %v; want a failed attempt", out, err)
	}
	if f.stored(ref1).State != oauth.CIBAPending || f.stored(ref2).State != oauth.CIBAPending {
		t.Fatal("an assertion made for another request decided one")
	}
}

// TestBankApp_APaymentTakesACodeWhenThePolicyAcceptsTOTP: with totp in the payment policy, the
// payment's approval offers the code, and the grant keeps TOTP evidence over its details.
func TestBankApp_APaymentTakesACodeWhenThePolicyAcceptsTOTP(t *testing.T) {
	f := newFixtureWith(t, options{paymentFactors: []string{oauth.PaymentFactorPasskey, oauth.PaymentFactorTOTP}})
	ref := f.request(alice, "PAY-10", payment10)
	ap := newPhone(alice)
	f.signIn(ap, alice, alicePassword)
	a := f.startApproval(ap, ref)
	if !a.TOTP {
		t.Fatal("the payment does not offer the code the policy accepts")
	}
	out, err := f.act(ap, bankapp.Input{Action: bankapp.ActTOTP, CSRF: bankapp.CSRF(ap.session), Attempt: a.Attempt, Code: f.totp(aliceSecret, 0)})
	if err != nil || !out.Approved {
		t.Fatalf("the payment's approval with a code: %+v, %v", out, err)
	}
	r := f.stored(ref)
	if ev := r.Grant.PaymentEvidence; ev == nil || ev.Factor != oauth.PaymentFactorTOTP || ev.Check(r.AuthorizationDetails) != nil {
		t.Fatalf("the grant's evidence %+v, want TOTP evidence over the details", r.Grant.PaymentEvidence)
	}
}
