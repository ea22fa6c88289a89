package signin_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/signin"
)

// actor is someone at a browser, with what they know: alice (her password, her app, a
// recovery code) and bob (his password) share one browser; the stranger, at another, knows
// both passwords (stolen) and every page's request id and CSRF token (leaked), not alice's app.
type actor struct {
	name      string
	browser   *browser
	passwords map[string]string
	hasApp    bool
}

// seen is a page one of the browsers showed, kept: any of them may be posted again later.
type seen struct {
	page
	at *browser
}

var sequences, actions, paymentCodes atomic.Int64

// TestMachine_RandomSequencesKeepTheInvariants drives random sequences of actions by alice,
// bob and a stranger on shared and stale pages, and checks after every action:
//   - no panic, and no error but ErrRefused or ErrExpired (the store is healthy);
//   - a refused action (ErrRefused, ErrExpired) left the store byte for byte as it was;
//   - alice's factors never change but by her own use of them; bob's, once set up, never
//     change again (a first enrolment happens once, and nothing replaces it);
//   - every code issued for a payment scope carries strong authentication, and no code the
//     stranger gets for alice does;
//   - every code issued for a payment (authorization_details) carries evidence of the
//     customer's step over its details (dynamic linking; TOTP is allowed here so that alice
//     can pay), and the stranger never gets one for alice.
func TestMachine_RandomSequencesKeepTheInvariants(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		sequences.Add(1)
		f := newFixture(t)
		d := f.deps
		d.PaymentFactors = []string{oauth.PaymentFactorPasskey, oauth.PaymentFactorTOTP}
		f.build(d)
		shared, other := &browser{bid: "shared"}, &browser{bid: "stranger"}
		both := map[string]string{alice: alicePassword, bob: bobPassword}
		actors := []actor{
			{name: alice, browser: shared, passwords: map[string]string{alice: alicePassword}, hasApp: true},
			{name: bob, browser: shared, passwords: map[string]string{bob: bobPassword}},
			{name: "stranger", browser: other, passwords: both},
		}
		aliceFactor := f.factors(alice).Factors[0]
		var bobFactor *oauth.Factor
		var pages []seen
		n := rapid.IntRange(1, 40).Draw(rt, "actions")
		for range n {
			actions.Add(1)
			a := actors[rapid.IntRange(0, len(actors)-1).Draw(rt, "actor")]
			if len(pages) == 0 || rapid.IntRange(0, 5).Draw(rt, "new request") == 0 {
				scope := rapid.SampledFrom([]string{"openid", transfers, "payment"}).Draw(rt, "scope")
				details := ""
				if scope == "payment" {
					scope, details = "openid", payment10
				}
				pages = append(pages, seen{page: f.startWith(a.browser, scope, details), at: a.browser})
				continue
			}
			if rapid.IntRange(0, 7).Draw(rt, "wait") == 0 {
				f.advance(31 * time.Second) // the apps show their next codes
			}
			// Mostly the page the actor's browser shows now and an action it offers (so that
			// sequences get deep), else any page kept and any action.
			target := pages[rapid.IntRange(0, len(pages)-1).Draw(rt, "page")]
			if latest := latestAt(pages, a.browser); latest != nil && rapid.Bool().Draw(rt, "latest page") {
				target = *latest
			}
			action := rapid.SampledFrom(signin.Actions).Draw(rt, "action")
			if offered := offeredAt(target.out.Step); len(offered) > 0 && rapid.IntRange(0, 3).Draw(rt, "offered action") > 0 {
				action = rapid.SampledFrom(offered).Draw(rt, "action offered")
			}
			in := drawInput(rt, f, a, pages)
			before := f.digest()
			sid := a.browser.sid
			p, err := f.act(a.browser, target.page, action, in)
			switch {
			case errors.Is(err, signin.ErrRefused), errors.Is(err, signin.ErrExpired):
				if f.digest() != before {
					rt.Fatalf("%s's %s on a %q page was refused (%v) but wrote to the store", a.name, action, target.out.Step, err)
				}
				a.browser.sid = sid
				continue
			case err != nil:
				rt.Fatalf("%s's %s: %v", a.name, action, err)
			}
			if p.out.Redirect != nil {
				checkCode(rt, f, p.out.Redirect, a.browser == other)
				continue
			}
			pages = append(pages, seen{page: p, at: a.browser})
			// The factors.
			af := f.factors(alice)
			if len(af.Factors) != 1 || af.Factors[0].ID != aliceFactor.ID || af.Factors[0].Secret != aliceFactor.Secret {
				rt.Fatalf("alice's factors changed after %s's %s: %+v", a.name, action, af.Factors)
			}
			bf := f.factors(bob)
			switch {
			case bobFactor == nil && len(bf.Factors) > 0:
				bobFactor = &bf.Factors[0]
			case bobFactor != nil && (len(bf.Factors) != 1 || bf.Factors[0].ID != bobFactor.ID || bf.Factors[0].Secret != bobFactor.Secret):
				rt.Fatalf("bob's factor was replaced after %s's %s", a.name, action)
			}
		}
	})
	t.Logf("%d sequences, %d actions, %d payment codes", sequences.Load(), actions.Load(), paymentCodes.Load())
}

// drawInput is what actor a posts: a username and a password it knows (or a wrong one), a code
// of alice's app if it is alice, a code of a set-up secret its browser showed, a recovery code,
// or a wrong code; a credential that is no WebAuthn answer.
func drawInput(rt *rapid.T, f *fixture, a actor, pages []seen) signin.Input {
	in := signin.Input{Credential: "{}"}
	in.Username = rapid.SampledFrom([]string{alice, bob}).Draw(rt, "username")
	in.Password = a.passwords[in.Username]
	if in.Password == "" || rapid.IntRange(0, 4).Draw(rt, "wrong password") == 0 {
		in.Password = "wrong"
	}
	codes := []string{"000000"}
	if a.hasApp {
		codes = append(codes, f.totp(aliceSecret, 0), f.aliceRecovery)
	}
	for _, p := range pages {
		if p.at == a.browser && p.out.TOTP != nil {
			codes = append(codes, f.totp(p.out.TOTP.Secret, 0))
		}
	}
	in.Code = rapid.SampledFrom(codes).Draw(rt, "code")
	return in
}

// checkCode redeems the code of a redirect and checks its grant: strong authentication for a
// payment scope; never strong for alice in the stranger's browser.
func checkCode(rt *rapid.T, f *fixture, to *oauth.Redirect, stranger bool) {
	raw := to.Params.Get("code")
	if raw == "" {
		if to.Params.Get("error") != "access_denied" {
			rt.Fatalf("a redirect with neither a code nor access_denied: %v", to.Params)
		}
		return
	}
	code, err := f.st.ConsumeCode(context.Background(), oauth.HashToken(raw), clientID, f.clock())
	if err != nil {
		rt.Fatalf("the issued code: %v", err)
	}
	g := code.Grant
	if g.Scopes.Has(oauth.ScopeTransfersWrite) && !oauth.AMRStrong(g.AMR) {
		rt.Fatalf("a payment code for %s without strong authentication: amr %v", g.UID, g.AMR)
	}
	if stranger && g.UID == "u_"+alice && slices.Contains(g.AMR, oauth.AMRMFA) {
		rt.Fatalf("the stranger got a strongly authenticated code for alice: amr %v", g.AMR)
	}
	if g.IsPayment() {
		paymentCodes.Add(1)
		if err := g.PaymentEvidence.Check(g.AuthorizationDetails); err != nil {
			rt.Fatalf("a payment code for %s without evidence over its details: %v", g.UID, err)
		}
		if stranger && g.UID == "u_"+alice {
			rt.Fatalf("the stranger got a payment code for alice")
		}
	}
}

// latestAt is the last page browser b showed, if any.
func latestAt(pages []seen, b *browser) *seen {
	for i := len(pages) - 1; i >= 0; i-- {
		if pages[i].at == b {
			return &pages[i]
		}
	}
	return nil
}

// offeredAt are the actions step accepts.
func offeredAt(step signin.Step) []signin.Action {
	var out []signin.Action
	for _, a := range signin.Actions {
		if signin.Allowed(step, a) {
			out = append(out, a)
		}
	}
	return out
}
