package storetest

import (
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// clientOnlyGrant is a client_credentials grant of a random client (oauth.Grant.ClientOnly):
// no user, one access token and no refresh token, as flow_client_credentials.go issues it.
func clientOnlyGrant(now time.Time) (oauth.Grant, oauth.Issue) {
	g := oauth.Grant{ID: id(oauth.PrefixGrant), ClientID: id(oauth.PrefixClientID), ClientOnly: true,
		Scopes: oauth.Scopes{oauth.ScopeTransfersWrite}, CreatedAt: now.Add(millis), ExpiresAt: now.Add(accessTTL)}
	a := newToken(oauth.KindAccess, g, now)
	return g, oauth.Issue{Grant: g, Access: a, FromCode: true, Tokens: []string{a.Hash}}
}

// clientOnlyTests prove that a grant without a user (client_credentials) is stored, read,
// listed and revoked like any other: listed for its client only (never in a user's list), its
// one-time values recorded in its issuance's write.
var clientOnlyTests = []test{
	{"ListedForItsClientOnlyAndRevocable", func(t *testing.T, s oauth.Store) {
		now := start()
		g, in := clientOnlyGrant(now)
		mustNil(t, s.IssueTokens(t.Context(), in, now), "IssueTokens of a client-only grant")
		wantLiveTokens(t, s, now, in.Access)
		user := newGrant(id("u_"), g.ClientID, now)
		mustNil(t, s.IssueTokens(t.Context(), firstIssue(user, now), now), "IssueTokens of the client's user grant")
		wantGrantIDs(t, s, oauth.GrantFilter{ClientID: g.ClientID}, now, g.ID, user.ID)
		wantGrantIDs(t, s, oauth.GrantFilter{UID: user.UID}, now, user.ID)
		mustNil(t, s.RevokeGrant(t.Context(), g.ID, now), "RevokeGrant")
		wantNoTokens(t, s, now, in.Access.Hash)
		wantGrantIDs(t, s, oauth.GrantFilter{ClientID: g.ClientID}, now, user.ID)
	}},
	{"IssuanceRecordsItsOnceValuesOrWritesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		v := once("assertion:", now)
		_, first := clientOnlyGrant(now)
		first.Once = []oauth.Once{v}
		mustNil(t, s.IssueTokens(t.Context(), first, now), "IssueTokens with a new value")
		g, again := clientOnlyGrant(now)
		again.Once = []oauth.Once{v}
		wantReplayed(t, s.IssueTokens(t.Context(), again, now), v.Key, "IssueTokens with the value again")
		wantNoTokens(t, s, now, again.Access.Hash)
		wantGrantIDs(t, s, oauth.GrantFilter{ClientID: g.ClientID}, now)
	}},
}
