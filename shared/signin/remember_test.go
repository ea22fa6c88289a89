package signin_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/signin"
)

// Details of the remembered-consent tests: an account_information the user granted, one
// narrower (within it), one wider (a permission more), and a payment.
const (
	accountsGranted = `[{"type":"account_information","permissions":["balances","transactions"]}]`
	accountsNarrow  = `[{"type":"account_information","permissions":["balances"]}]`
	accountsWider   = `[{"type":"account_information","permissions":["balances","transactions","details"]}]`
	payment         = `[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"10.00"},"creditorName":"Shop","creditorAccount":{"iban":"FR7630006000011234567890189"}}]`
)

// grant writes a live grant of user for client with scope and details, as an exchange of its
// code would (IssueTokens from the code), and returns its id.
func (f *fixture) grant(user, client, scope, details string) string {
	f.t.Helper()
	now := f.clock()
	g := oauth.Grant{ID: oauth.NewID(oauth.PrefixGrant), ClientID: client, UID: "u_" + user, Scopes: oauth.ParseScopes(scope),
		AuthTime: now, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if details != "" {
		g.AuthorizationDetails = json.RawMessage(details)
	}
	at := oauth.Token{Hash: oauth.HashToken(oauth.NewSecret("at_")), Kind: oauth.KindAccess, Scopes: g.Scopes, Grant: g,
		IssuedAt: now, ExpiresAt: now.Add(time.Hour)}
	must(f.t, f.st.IssueTokens(context.Background(), oauth.Issue{Grant: g, Access: at, FromCode: true, Tokens: []string{at.Hash}}, now))
	return g.ID
}

// TestRememberedConsent_SkipsTheConsentPageOnlyWhenEveryRuleAllows: bob signs in with his
// password on a request, holding the grants the case writes first; the sign-in leads to the
// consent page or, when his consent is remembered, straight back to the client with a code.
// Each "consent" case is one rule of remember.go: without that rule the case would skip the
// page. The "remembered" cases fail without the feature.
func TestRememberedConsent_SkipsTheConsentPageOnlyWhenEveryRuleAllows(t *testing.T) {
	otherClient := "other-app"
	cases := []struct {
		name string
		// held are the grants bob (or another user, "alice:") holds before: client, scope, details.
		held    [][3]string
		scope   string
		details string
		prompt  string
		want    signin.Step
	}{
		{"a grant of the same scopes is remembered", [][3]string{{clientID, "openid profile", ""}}, "openid profile", "", "", redirect},
		{"a grant of more scopes is remembered", [][3]string{{clientID, "openid profile", ""}}, "openid", "", "", redirect},
		{"the same account_information is remembered", [][3]string{{clientID, "openid", accountsGranted}}, "openid", accountsGranted, "", redirect},
		{"a narrower account_information is remembered", [][3]string{{clientID, "openid", accountsGranted}}, "openid", accountsNarrow, "", redirect},
		{"no grant: consent", nil, "openid", "", "", signin.StepConsent},
		{"prompt=consent: consent", [][3]string{{clientID, "openid profile", ""}}, "openid", "", "consent", signin.StepConsent},
		{"prompt=login consent: consent", [][3]string{{clientID, "openid profile", ""}}, "openid", "", "login consent", signin.StepConsent},
		{"a scope more than granted: consent", [][3]string{{clientID, "openid", ""}}, "openid profile", "", "", signin.StepConsent},
		{"another client's grant: consent", [][3]string{{otherClient, "openid profile", ""}}, "openid", "", "", signin.StepConsent},
		{"another user's grant: consent", [][3]string{{"alice:" + clientID, "openid profile", ""}}, "openid", "", "", signin.StepConsent},
		{"a wider account_information: consent", [][3]string{{clientID, "openid", accountsGranted}}, "openid", accountsWider, "", signin.StepConsent},
		{"details asked of a grant without: consent", [][3]string{{clientID, "openid", ""}}, "openid", accountsNarrow, "", signin.StepConsent},
		{"a payment, even one granted before: its confirmation", [][3]string{{clientID, "openid", payment}}, "openid", payment, "", signin.StepPayment},
		{"a detail of another type, even granted before: consent", [][3]string{{clientID, "openid", `[{"type":"other"}]`}}, "openid", `[{"type":"other"}]`, "", signin.StepConsent},
		{"a payment grant covers nothing: consent", [][3]string{{clientID, "openid profile", payment}}, "openid", "", "", signin.StepConsent},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			for _, h := range c.held {
				user, client := bob, h[0]
				if u, cl, ok := strings.Cut(h[0], ":"); ok {
					user, client = u, cl
				}
				f.grant(user, client, h[1], h[2])
			}
			b := &browser{bid: "b"}
			p := f.startSet(b, c.scope, func(r *oauth.AuthRequest) {
				r.Prompt = c.prompt
				if c.details != "" {
					r.AuthorizationDetails = json.RawMessage(c.details)
				}
			})
			p, err := f.login(b, p, bob, bobPassword)
			must(t, err)
			got := p.out.Step
			if p.out.Redirect != nil {
				got = redirect
				if p.out.Redirect.String() == "" || !strings.Contains(p.out.Redirect.String(), "code=") {
					t.Fatalf("a remembered consent answered %q, want a code", p.out.Redirect)
				}
			}
			if got != c.want {
				t.Fatalf("%s: %q, want %q", c.name, got, c.want)
			}
			if got == redirect {
				if _, err := f.st.GetAuthRequest(context.Background(), p.id, f.clock()); err == nil {
					t.Fatal("a request decided by a remembered consent is still pending")
				}
				if !strings.Contains(f.audit.String(), `"consent_remembered"`) {
					t.Fatal("a remembered consent was not audited")
				}
			}
		})
	}
}

// TestRememberedConsent_TheStrongStepComesFirst: a request that needs a strong sign-in
// (acr_values) goes to alice's second step although her grant covers it; once she has passed
// her app, her consent is remembered. And a request for the transfers scope shows the consent
// page even after a strong sign-in and with a grant of that scope: it can move money.
func TestRememberedConsent_TheStrongStepComesFirst(t *testing.T) {
	f := newFixture(t)
	f.grant(alice, clientID, "openid "+oauth.ScopeTransfersWrite, "")
	b := &browser{bid: "strong"}
	p := f.startSet(b, "openid", func(r *oauth.AuthRequest) { r.ACRValues = oauth.ACRStrong })
	p, err := f.login(b, p, alice, alicePassword)
	must(t, err)
	if p.out.Step != signin.StepSecond {
		t.Fatalf("a request that must be strong, with a covering grant: %v, want the second step", p.out)
	}
	p, err = f.act(b, p, signin.ActTOTP, signin.Input{Code: f.totp(aliceSecret, 0)})
	must(t, err)
	if p.out.Redirect == nil {
		t.Fatalf("after the strong step, with a covering grant: %v, want the code", p.out)
	}

	p = f.start(b, transfers) // alice's session is strong now
	if p.out.Step != signin.StepConsent {
		t.Fatalf("a transfers request with a strong session and a grant of it: %v, want the consent page", p.out)
	}
}
