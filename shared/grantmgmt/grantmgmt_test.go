package grantmgmt_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/grantmgmt"
	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/localkey"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/receipt"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// TestNew_NamesEveryMissingDependency: a use case built without its grants, replay store,
// clock or maker of consent receipts says which, rather than failing at its first request.
func TestNew_NamesEveryMissingDependency(t *testing.T) {
	if _, err := grantmgmt.New(grantmgmt.Deps{}); err == nil || !strings.Contains(err.Error(), "Tokens") {
		t.Fatalf("New without Tokens: %v", err)
	}
	_, err := grantmgmt.New(grantmgmt.Deps{Tokens: &oauth.Service{}})
	for _, name := range []string{"Tokens.Grants", "Tokens.Replay", "Tokens.Clock", "Receipts"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("New without %s: %v", name, err)
		}
	}
}

// receipts is a Maker of consent receipts over st, signing with a local key file the
// rotation made.
func receipts(t *testing.T, st *embedded.Store, clock oauth.Clock) *receipt.Maker {
	t.Helper()
	backend, err := localkey.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keys.NewRotator(st, backend, keys.Policy{}, nil, nil).Rotate(t.Context()); err != nil {
		t.Fatal(err)
	}
	m, err := receipt.New(t.Context(), receipt.Deps{Signer: keys.NewSigner(st, backend, nil, 0), Clients: st, Salts: st,
		Issuer: "https://auth.example.test", Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// issued writes a grant of uid to client with scopes and one access token (as the code
// exchange writes them), and returns the grant and the token's value.
func issued(t *testing.T, st oauth.Store, client, uid string, scopes oauth.Scopes, now time.Time) (oauth.Grant, string) {
	t.Helper()
	g := oauth.Grant{ID: oauth.NewID(oauth.PrefixGrant), ClientID: client, UID: uid, Scopes: scopes, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	access := oauth.NewSecret(oauth.PrefixAccess)
	tok := oauth.Token{Hash: oauth.HashToken(access), Kind: oauth.KindAccess, Scopes: scopes, IssuedAt: now, ExpiresAt: now.Add(time.Minute), Grant: g}
	if err := st.IssueTokens(context.Background(), oauth.Issue{Grant: g, Access: tok, FromCode: true, Tokens: []string{tok.Hash}}, now); err != nil {
		t.Fatal(err)
	}
	return g, access
}

// TestQuery_AnotherUsersGrantOfTheSameClientIsNotFound: the client's token of one user cannot
// read or revoke the same client's grant of another user, nor a revoked grant: 404
// invalid_grant_id, the same answer as an unknown grant, and the grant is left as it was.
func TestQuery_AnotherUsersGrantOfTheSameClientIsNotFound(t *testing.T) {
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now().UTC().Truncate(time.Second)
	scopes := oauth.Scopes{oauth.ScopeOpenID, oauth.ScopeGrantQuery, oauth.ScopeGrantRevoke}
	_, alice := issued(t, st, "cl_a", "uid-alice", scopes, now)
	bobs, _ := issued(t, st, "cl_a", "uid-bob", scopes, now)
	revoked, _ := issued(t, st, "cl_a", "uid-alice", scopes, now)
	if err := st.RevokeGrant(context.Background(), revoked.ID, now); err != nil {
		t.Fatal(err)
	}
	clock := oauth.ClockFunc(func() time.Time { return now })
	m, err := grantmgmt.New(grantmgmt.Deps{Tokens: &oauth.Service{Grants: st, Replay: st, Clock: clock}, Receipts: receipts(t, st, clock)})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{bobs.ID, revoked.ID} {
		_, qerr := m.Query(context.Background(), grantmgmt.Request{Method: http.MethodGet, GrantID: id, Token: alice})
		rerr := m.Revoke(context.Background(), grantmgmt.Request{Method: http.MethodDelete, GrantID: id, Token: alice})
		for _, err := range []error{qerr, rerr} {
			var e *oauth.Error
			if !errors.As(err, &e) || e.Status != http.StatusNotFound || e.Code != oauth.ErrCodeInvalidGrantID {
				t.Errorf("grant %s with alice's token: %v, want 404 invalid_grant_id", id, err)
			}
		}
	}
	if rec, err := st.GetGrant(context.Background(), bobs.ID, now); err != nil || rec.Revoked {
		t.Fatalf("bob's grant after refused requests: %+v %v", rec, err)
	}
}

// TestQuery_ClientOnSeveralHostsGetsTheAnswerWithoutAReceipt: a client whose redirect URIs are
// on two hosts has no pairwise sector (receipt.ErrNoSector): its query is answered, without
// consent_receipt, rather than refused; a client on one host gets its receipt.
func TestQuery_ClientOnSeveralHostsGetsTheAnswerWithoutAReceipt(t *testing.T) {
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now().UTC().Truncate(time.Second)
	for id, uris := range map[string][]string{"cl_two": {"https://a.example/cb", "https://b.example/cb"}, "cl_one": {"https://a.example/cb"}} {
		if err := st.CreateClient(t.Context(), oauth.Client{ID: id, Name: id, RedirectURIs: uris, Scopes: []string{"openid"}}); err != nil {
			t.Fatal(err)
		}
	}
	clock := oauth.ClockFunc(func() time.Time { return now })
	m, err := grantmgmt.New(grantmgmt.Deps{Tokens: &oauth.Service{Grants: st, Replay: st, Clock: clock}, Receipts: receipts(t, st, clock)})
	if err != nil {
		t.Fatal(err)
	}
	scopes := oauth.Scopes{oauth.ScopeOpenID, oauth.ScopeGrantQuery}
	for client, want := range map[string]bool{"cl_two": false, "cl_one": true} {
		g, access := issued(t, st, client, "uid-alice", scopes, now)
		got, err := m.Query(t.Context(), grantmgmt.Request{Method: http.MethodGet, GrantID: g.ID, Token: access})
		if err != nil {
			t.Fatalf("%s: query: %v", client, err)
		}
		if (got.ConsentReceipt != "") != want {
			t.Errorf("%s: consent receipt %q, want one: %v", client, got.ConsentReceipt, want)
		}
	}
}
