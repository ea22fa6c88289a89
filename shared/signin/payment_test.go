package signin_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/signin"
)

// Two payments of alice's: 10.00 EUR and 9,999.00 EUR to another payee.
const (
	payment10   = `[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"10.00"},"creditorName":"Merchant A","creditorAccount":{"iban":"DE02100100109307118603"}}]`
	payment9999 = `[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"9999.00"},"creditorName":"Mule B","creditorAccount":{"iban":"FR7630006000011234567890189"}}]`
)

// withAlicePasskey gives alice a passkey (besides her app) and returns its authenticator.
func (f *fixture) withAlicePasskey(t *testing.T) *authenticator {
	t.Helper()
	u, err := f.st.GetUser(context.Background(), "u_"+alice)
	must(t, err)
	a := newAuthenticator(t)
	a.register(t, f.users, &u, authn.AnotherFactor)
	return a
}

// payPage signs alice in on a new payment request of details in browser b (or continues her
// session there) and returns its payment page.
func (f *fixture) payPage(t *testing.T, b *browser, details string) page {
	t.Helper()
	p := f.startWith(b, "openid", details)
	if p.out.Step == signin.StepLogin {
		var err error
		p, err = f.login(b, p, alice, alicePassword)
		must(t, err)
	}
	if p.out.Step != signin.StepPayment {
		t.Fatalf("a payment request with alice's passkey: %v, want the payment step", p.out)
	}
	return p
}

// grantOf redeems the code of a redirect in the store and returns its grant.
func (f *fixture) grantOf(t *testing.T, to *oauth.Redirect) oauth.Grant {
	t.Helper()
	raw := to.Params.Get("code")
	if raw == "" {
		t.Fatalf("no code: %v", to.Params)
	}
	c, err := f.st.ConsumeCode(context.Background(), oauth.HashToken(raw), clientID, f.clock())
	must(t, err)
	return c.Grant
}

func TestPayment_PasskeyAssertionOverTheDetailsApprovesAndTheGrantKeepsItsEvidence(t *testing.T) {
	f := newFixture(t)
	a := f.withAlicePasskey(t)
	b := &browser{bid: "b"}
	p := f.payPage(t, b, payment10)
	if p.out.Passkey == nil || p.out.Passkey.Action != signin.ActPayPasskey || p.out.PaymentTOTP || p.out.NoPaymentFactor {
		t.Fatalf("payment page: passkey %+v, totp %v, no factor %v; want the passkey alone", p.out.Passkey, p.out.PaymentTOTP, p.out.NoPaymentFactor)
	}
	out, err := f.act(b, p, signin.ActPayPasskey, signin.Input{Credential: a.get(t, p.out.Passkey.Options)})
	must(t, err)
	if out.out.Redirect == nil {
		t.Fatalf("confirmed payment: %v, want the redirect with a code", out.out)
	}
	g := f.grantOf(t, out.out.Redirect)
	ev := g.PaymentEvidence
	if ev == nil || ev.Factor != oauth.PaymentFactorPasskey || string(ev.CredentialID) != string(a.CredID) {
		t.Fatalf("the grant's evidence: %+v, want alice's passkey", ev)
	}
	if err := ev.Check(g.AuthorizationDetails); err != nil {
		t.Fatalf("the grant's evidence does not check against its details: %v", err)
	}
	if !oauth.AMRStrong(g.AMR) {
		t.Errorf("a payment confirmed with a passkey: amr %v, want mfa", g.AMR)
	}
}

// TestPayment_AllowWithoutAnAssertionIsRefusedAndWritesNothing: at the payment step, allow
// (the consent page's button: a password session's decision) is refused, as is a confirmation
// with no assertion or garbage, and nothing stored changes.
func TestPayment_AllowWithoutAnAssertionIsRefusedAndWritesNothing(t *testing.T) {
	f := newFixture(t)
	f.withAlicePasskey(t)
	b := &browser{bid: "b"}
	p := f.payPage(t, b, payment10)
	before := f.digest()
	for _, try := range []struct {
		a  signin.Action
		in signin.Input
	}{
		{signin.ActAllow, signin.Input{}},
		{signin.ActPayPasskey, signin.Input{}},
		{signin.ActPayPasskey, signin.Input{Credential: "{}"}},
		{signin.ActPayPasskey, signin.Input{Credential: `{"response":{"clientDataJSON":"e30"}}`}},
		{signin.ActTOTP, signin.Input{Code: f.totp(aliceSecret, 0)}},
	} {
		if _, err := f.act(b, p, try.a, try.in); !errors.Is(err, signin.ErrRefused) {
			t.Errorf("%s %q at the payment step: %v, want ErrRefused", try.a, try.in.Credential, err)
		}
	}
	if f.digest() != before {
		t.Fatal("a refused confirmation wrote to the store")
	}
}

// TestPayment_AssertionOfAnotherPendingPaymentIsRefused: alice confirms 10.00 EUR on one page;
// her assertion posted to another pending payment of hers (9,999.00 EUR to another payee) is
// refused and writes nothing; it still confirms the payment it was made for.
func TestPayment_AssertionOfAnotherPendingPaymentIsRefused(t *testing.T) {
	f := newFixture(t)
	a := f.withAlicePasskey(t)
	b := &browser{bid: "b"}
	small := f.payPage(t, b, payment10)
	big := f.payPage(t, b, payment9999)
	cred := a.get(t, small.out.Passkey.Options)
	before := f.digest()
	if _, err := f.act(b, big, signin.ActPayPasskey, signin.Input{Credential: cred}); !errors.Is(err, signin.ErrRefused) {
		t.Fatalf("the 10.00 assertion on the 9,999.00 payment: %v, want ErrRefused", err)
	}
	if f.digest() != before {
		t.Fatal("the refused assertion wrote to the store")
	}
	out, err := f.act(b, small, signin.ActPayPasskey, signin.Input{Credential: cred})
	if err != nil || out.out.Redirect == nil {
		t.Fatalf("the assertion on its own payment: %v %v", out.out, err)
	}
	if g := f.grantOf(t, out.out.Redirect); string(g.AuthorizationDetails) != payment10 {
		t.Fatalf("the code is for %s, want the 10.00 payment", g.AuthorizationDetails)
	}
}

// TestPayment_ReplayedAssertionIsRefused: an assertion that confirmed a payment confirms
// nothing else: not its request again (decided), not a new request for the same payment (a
// new nonce), and the refusals write nothing.
func TestPayment_ReplayedAssertionIsRefused(t *testing.T) {
	f := newFixture(t)
	a := f.withAlicePasskey(t)
	b := &browser{bid: "b"}
	p := f.payPage(t, b, payment10)
	cred := a.get(t, p.out.Passkey.Options)
	if out, err := f.act(b, p, signin.ActPayPasskey, signin.Input{Credential: cred}); err != nil || out.out.Redirect == nil {
		t.Fatalf("first use: %v %v", out.out, err)
	}
	again := f.payPage(t, b, payment10)
	before := f.digest()
	if _, err := f.act(b, p, signin.ActPayPasskey, signin.Input{Credential: cred}); !errors.Is(err, signin.ErrExpired) && !errors.Is(err, signin.ErrRefused) {
		t.Errorf("replay on the decided request: %v, want refused", err)
	}
	if _, err := f.act(b, again, signin.ActPayPasskey, signin.Input{Credential: cred}); !errors.Is(err, signin.ErrRefused) {
		t.Errorf("replay on a new request for the same payment: %v, want ErrRefused", err)
	}
	if f.digest() != before {
		t.Fatal("a replayed assertion wrote to the store")
	}
}

// TestPayment_AssertionOverTheRequestBeforeItsNonceChangedIsRefused: a failed confirmation
// (an unknown passkey) gives the page a new nonce; an assertion made over the page as it was
// is then refused, and one over the new page passes.
func TestPayment_AssertionOverTheRequestBeforeItsNonceChangedIsRefused(t *testing.T) {
	f := newFixture(t)
	a := f.withAlicePasskey(t)
	b := &browser{bid: "b"}
	p := f.payPage(t, b, payment10)
	old := a.get(t, p.out.Passkey.Options)
	stranger := newAuthenticator(t)
	stranger.UserHandle = []byte("u_" + alice)
	failed, err := f.act(b, p, signin.ActPayPasskey, signin.Input{Credential: stranger.get(t, p.out.Passkey.Options)})
	if err != nil || !failed.out.Failed || failed.out.Step != signin.StepPayment {
		t.Fatalf("an unknown passkey: %v %v, want the payment page again, failed", failed.out, err)
	}
	if slices.Equal(failed.out.Request.PaymentNonce, p.out.Request.PaymentNonce) {
		t.Fatal("the failed confirmation kept the nonce")
	}
	before := f.digest()
	if _, err := f.act(b, failed, signin.ActPayPasskey, signin.Input{Credential: old}); !errors.Is(err, signin.ErrRefused) {
		t.Fatalf("the assertion over the old nonce: %v, want ErrRefused", err)
	}
	if f.digest() != before {
		t.Fatal("the refused assertion wrote to the store")
	}
	if out, err := f.act(b, failed, signin.ActPayPasskey, signin.Input{Credential: a.get(t, failed.out.Passkey.Options)}); err != nil || out.out.Redirect == nil {
		t.Fatalf("an assertion over the new page: %v %v", out.out, err)
	}
}

// TestPayment_TOTPIsRefusedUnderTheDefaultPolicy: alice holds her app, no passkey. Her payment
// page says none of her factors may authorize it and offers to add a passkey (after her app as
// second step, since a password alone adds no factor); a valid TOTP code posted there is
// refused and writes nothing.
func TestPayment_TOTPIsRefusedUnderTheDefaultPolicy(t *testing.T) {
	f := newFixture(t)
	b := &browser{bid: "b"}
	p, err := f.login(b, f.startWith(b, "openid", payment10), alice, alicePassword)
	must(t, err)
	if p.out.Step != signin.StepSecond {
		t.Fatalf("alice, no passkey, a payment: %v, want her second step first", p.out)
	}
	p, err = f.act(b, p, signin.ActTOTP, signin.Input{Code: f.totp(aliceSecret, 0)})
	must(t, err)
	if p.out.Step != signin.StepPayment || !p.out.NoPaymentFactor || !p.out.OfferPasskey || p.out.PaymentTOTP || p.out.Passkey != nil {
		t.Fatalf("payment page: %v no factor %v offer %v totp %v; want no factor, the offer of a passkey", p.out, p.out.NoPaymentFactor, p.out.OfferPasskey, p.out.PaymentTOTP)
	}
	f.advance(31 * time.Second)
	before := f.digest()
	if _, err := f.act(b, p, signin.ActPayTOTP, signin.Input{Code: f.totp(aliceSecret, 0)}); !errors.Is(err, signin.ErrRefused) {
		t.Fatalf("a TOTP code under the default policy: %v, want ErrRefused", err)
	}
	if f.digest() != before {
		t.Fatal("the refused TOTP wrote to the store")
	}
	// Not a dead end: she cancels, and the client gets access_denied.
	out, err := f.act(b, p, signin.ActDeny, signin.Input{})
	if err != nil || out.out.Redirect == nil || out.out.Redirect.Params.Get("error") != "access_denied" {
		t.Fatalf("deny: %v %v, want access_denied", out.out, err)
	}
}

// TestPayment_TOTPIsAcceptedWhenThePolicyAllowsIt: with AUTH_PAYMENT_FACTORS=passkey,totp,
// alice's app confirms the payment on its page; the grant's evidence says TOTP, over the
// details the page showed. A wrong code shows the page again.
func TestPayment_TOTPIsAcceptedWhenThePolicyAllowsIt(t *testing.T) {
	f := newFixture(t)
	d := f.deps
	d.PaymentFactors = []string{oauth.PaymentFactorPasskey, oauth.PaymentFactorTOTP}
	f.build(d)
	b := &browser{bid: "b"}
	p := f.payPage(t, b, payment10)
	if !p.out.PaymentTOTP || p.out.Passkey != nil || p.out.NoPaymentFactor {
		t.Fatalf("payment page: totp %v passkey %+v; want the TOTP field", p.out.PaymentTOTP, p.out.Passkey)
	}
	wrong, err := f.act(b, p, signin.ActPayTOTP, signin.Input{Code: "000000"})
	if err != nil || !wrong.out.Failed || wrong.out.Step != signin.StepPayment {
		t.Fatalf("a wrong code: %v %v, want the payment page, failed", wrong.out, err)
	}
	out, err := f.act(b, wrong, signin.ActPayTOTP, signin.Input{Code: f.totp(aliceSecret, 0)})
	if err != nil || out.out.Redirect == nil {
		t.Fatalf("a TOTP code: %v %v", out.out, err)
	}
	g := f.grantOf(t, out.out.Redirect)
	if ev := g.PaymentEvidence; ev == nil || ev.Factor != oauth.PaymentFactorTOTP || ev.Check(g.AuthorizationDetails) != nil {
		t.Fatalf("evidence %+v: want TOTP over the details", ev)
	}
	if !oauth.AMRStrong(g.AMR) {
		t.Errorf("password and TOTP: amr %v, want mfa", g.AMR)
	}
}

// TestPayment_UserWithoutAPasskeyAddsOneAndPays: bob, no factor at all, is offered to add a
// passkey on the payment page; once added, the page asks for it over the payment.
func TestPayment_UserWithoutAPasskeyAddsOneAndPays(t *testing.T) {
	f := newFixture(t)
	b, p := reach(t, f, signin.StepPayment)
	if !p.out.NoPaymentFactor || !p.out.OfferPasskey {
		t.Fatalf("bob's payment page: no factor %v offer %v", p.out.NoPaymentFactor, p.out.OfferPasskey)
	}
	p, err := f.act(b, p, signin.ActOfferPasskey, signin.Input{})
	must(t, err)
	u, err := f.st.GetUser(context.Background(), "u_"+bob)
	must(t, err)
	a := newAuthenticator(t)
	a.UserHandle = []byte(u.UID)
	p, err = f.act(b, p, signin.ActRegisterPasskey, signin.Input{Credential: a.createFor(t, u.UID, p.out.Passkey.Options)})
	must(t, err)
	if p.out.Step != signin.StepPayment || p.out.Passkey == nil {
		t.Fatalf("after adding a passkey: %v, want the payment page with it", p.out)
	}
	out, err := f.act(b, p, signin.ActPayPasskey, signin.Input{Credential: a.get(t, p.out.Passkey.Options)})
	if err != nil || out.out.Redirect == nil {
		t.Fatalf("pay: %v %v", out.out, err)
	}
}

// TestPayment_FiftyRacingConfirmationsGetOneCode: the same valid assertion posted 50 times at
// once on its page: exactly one gets a code, the others are refused.
func TestPayment_FiftyRacingConfirmationsGetOneCode(t *testing.T) {
	f := newFixture(t)
	a := f.withAlicePasskey(t)
	b := &browser{bid: "b"}
	p := f.payPage(t, b, payment10)
	cred := a.get(t, p.out.Passkey.Options)
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes, refused := 0, 0
	for range 50 {
		wg.Go(func() {
			bb := *b
			out, err := f.act(&bb, p, signin.ActPayPasskey, signin.Input{Credential: cred})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && out.out.Redirect != nil && out.out.Redirect.Params.Get("code") != "":
				codes++
			case errors.Is(err, signin.ErrRefused), errors.Is(err, signin.ErrExpired):
				refused++
			default:
				t.Errorf("a racing confirmation: %v %v", out.out, err)
			}
		})
	}
	wg.Wait()
	if codes != 1 || refused != 49 {
		t.Fatalf("%d codes, %d refused; want 1 and 49", codes, refused)
	}
}

// TestPayment_FinishRecomputesTheChallengeFromTheDetails: authn's check of a payment's passkey
// recomputes the challenge from the details and nonce it is given (the request's at the
// decision), whatever the ceremony says: a ceremony and assertion made over 10.00 EUR, checked
// as 9,999.00, is ErrFactorFailed and leaves the passkey's record (its counter) as it was.
func TestPayment_FinishRecomputesTheChallengeFromTheDetails(t *testing.T) {
	f := newFixture(t)
	a := f.withAlicePasskey(t)
	u, err := f.st.GetUser(context.Background(), "u_"+alice)
	must(t, err)
	nonce := oauth.NewPaymentNonce()
	c, err := f.users.BeginPaymentPasskey(context.Background(), &u, json.RawMessage(payment10), nonce)
	must(t, err)
	cred := a.get(t, string(c.Options))
	before := f.factors(alice)
	_, _, err = f.users.FinishPaymentPasskey(context.Background(), u.UID, c.State, []byte(cred), json.RawMessage(payment9999), nonce, "")
	if !errors.Is(err, authn.ErrFactorFailed) {
		t.Fatalf("checked against other details: %v, want ErrFactorFailed", err)
	}
	if after := f.factors(alice); after.Version != before.Version {
		t.Fatal("a refused payment assertion wrote the factor record")
	}
	ev, _, err := f.users.FinishPaymentPasskey(context.Background(), u.UID, c.State, []byte(cred), json.RawMessage(payment10), nonce, "")
	if err != nil || ev.Check(json.RawMessage(payment10)) != nil {
		t.Fatalf("checked against its own details: %v", err)
	}
}
