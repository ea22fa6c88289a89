package dynamo_test

import (
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// now is the tests' clock: whole seconds, so the TTL a test expects is exact.
func now() time.Time { return time.Now().UTC().Truncate(time.Second) }

func testGrant(at time.Time) oauth.Grant {
	return oauth.Grant{
		ID:        oauth.NewID(oauth.PrefixGrant),
		ClientID:  oauth.NewID(oauth.PrefixClientID),
		UID:       oauth.NewID("u_"),
		Scopes:    oauth.Scopes{oauth.ScopeOpenID, oauth.ScopeEmail},
		AuthTime:  at,
		Claims:    oauth.Claims{Email: "ada@example.com", EmailVerified: true},
		CreatedAt: at,
		ExpiresAt: at.Add(30 * 24 * time.Hour),
	}
}

func testCode(g oauth.Grant, at time.Time) oauth.Code {
	return oauth.Code{
		Hash:        oauth.HashToken(oauth.NewSecret(oauth.PrefixCode)),
		Grant:       g,
		RedirectURI: "https://client.example.com/cb",
		ExpiresAt:   at.Add(5*time.Minute + 250*time.Millisecond),
	}
}

func testToken(kind string, g oauth.Grant, at time.Time) oauth.Token {
	ttl, prefix := time.Hour, oauth.PrefixAccess
	if kind == oauth.KindRefresh {
		ttl, prefix = 24*time.Hour, oauth.PrefixRefresh
	}
	return oauth.Token{
		Hash:      oauth.HashToken(oauth.NewSecret(prefix)),
		Kind:      kind,
		Scopes:    g.Scopes,
		IssuedAt:  at,
		ExpiresAt: at.Add(ttl),
		Grant:     g,
	}
}

// firstIssue is the issuance of a code exchange for g.
func firstIssue(g oauth.Grant, at time.Time) oauth.Issue {
	a, r := testToken(oauth.KindAccess, g, at), testToken(oauth.KindRefresh, g, at)
	r.Live = []string{a.Hash}
	return oauth.Issue{Grant: g, Access: a, Refresh: r, FromCode: true, Tokens: []string{a.Hash, r.Hash}}
}

// nextIssue is the refresh that follows prev, as the domain builds it: it spends prev's refresh
// token, two live access tokens at most, spent refresh tokens kept in the grant's list.
func nextIssue(prev oauth.Issue, at time.Time) oauth.Issue {
	g := prev.Grant
	a, r := testToken(oauth.KindAccess, g, at), testToken(oauth.KindRefresh, g, at)
	r.Live = []string{prev.Access.Hash, a.Hash}
	var retire, tokens []string
	if len(prev.Refresh.Live) == 2 {
		retire = prev.Refresh.Live[:1]
	}
	for _, h := range prev.Tokens {
		if len(retire) == 0 || h != retire[0] {
			tokens = append(tokens, h)
		}
	}
	return oauth.Issue{Grant: g, Access: a, Refresh: r, Retire: retire, Tokens: append(tokens, a.Hash, r.Hash), Spent: prev.Refresh.Hash}
}
