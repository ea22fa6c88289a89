package dynamo_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/acmebank/authserver/shared/oauth"
)

// TestItems_LayoutAndTTLAreAsDocumented writes one item of every kind through the store and
// reads it back raw, proving the keys, the TTL attribute (epoch seconds, rounded up, on every
// expiring item and on no other) and the listing-index keys that docs/storage.md describes.
func TestItems_LayoutAndTTLAreAsDocumented(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	at := now()
	g := testGrant(at)
	c := testCode(g, at)
	mustNil(t, f.store.CreateCode(ctx, c))
	in := firstIssue(g, at)
	mustNil(t, f.store.IssueTokens(ctx, in, at))
	tombstone := oauth.NewID(oauth.PrefixGrant)
	mustNil(t, f.store.RevokeGrant(ctx, tombstone, at))
	req := oauth.AuthRequest{ID: oauth.NewID(oauth.PrefixRequest), ClientID: g.ClientID, CreatedAt: at, ExpiresAt: at.Add(10 * time.Minute)}
	mustNil(t, f.store.PutAuthRequest(ctx, req))
	sess := oauth.Session{Hash: oauth.HashToken(oauth.NewSecret(oauth.PrefixSession)), UID: g.UID, AuthTime: at, ExpiresAt: at.Add(8 * time.Hour)}
	mustNil(t, f.store.PutSession(ctx, sess))
	_, err := f.store.CountFailure(ctx, "login:ada", 15*time.Minute, at)
	mustNil(t, err)
	client := oauth.Client{ID: g.ClientID, Name: "Client", CreatedAt: at}
	mustNil(t, f.store.CreateClient(ctx, client))
	user := oauth.User{UID: g.UID, Username: "ada", CreatedAt: at}
	mustNil(t, f.store.CreateUser(ctx, user))
	mustNil(t, f.store.UpdateKeys(ctx, func(s oauth.KeySet) (oauth.KeySet, error) { return s, nil }))

	tests := []struct {
		name, pk, sk string
		ttl          time.Time // zero: the item must have no TTL
		extra        map[string]string
	}{
		{"Code", "CODE#" + c.Hash, "CODE", c.ExpiresAt.Truncate(time.Second).Add(time.Second), nil},
		{"AccessToken", "TOKEN#" + in.Access.Hash, "TOKEN", in.Access.ExpiresAt, map[string]string{"kind": oauth.KindAccess}},
		{"RefreshToken", "TOKEN#" + in.Refresh.Hash, "TOKEN", in.Refresh.ExpiresAt, map[string]string{"kind": oauth.KindRefresh}},
		{"Grant", "GRANT#" + g.ID, "GRANT", g.ExpiresAt, map[string]string{"gsi1pk": "USER#" + g.UID, "gsi2pk": "CLIENT#" + g.ClientID}},
		{"Tombstone", "GRANT#" + tombstone, "GRANT", at.Add(24 * time.Hour), nil},
		{"AuthRequest", "AUTHREQ#" + req.ID, "AUTHREQ", req.ExpiresAt, nil},
		{"Session", "SESSION#" + sess.Hash, "SESSION", sess.ExpiresAt, nil},
		{"FailureCounter", "FAIL#login:ada", "FAIL", at.Add(15 * time.Minute), nil},
		{"Client", "CLIENT#" + client.ID, "CLIENT", time.Time{}, nil}, // gsi1pk: TestListings_…
		{"User", "USER#" + user.UID, "USER", time.Time{}, nil},
		{"Username", "USERNAME#ada", "USERNAME", time.Time{}, map[string]string{"uid": user.UID}},
		{"KeyRegistry", "KEYS#registry", "KEYS", time.Time{}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			item := rawItem(t, f, tc.pk, tc.sk)
			if item == nil {
				t.Fatalf("no item at pk=%s sk=%s", tc.pk, tc.sk)
			}
			ttl, hasTTL := item["ttl"].(*types.AttributeValueMemberN)
			switch {
			case tc.ttl.IsZero() && hasTTL:
				t.Errorf("ttl = %s on an item that must not expire", ttl.Value)
			case !tc.ttl.IsZero() && !hasTTL:
				t.Errorf("no numeric ttl attribute, want %d", tc.ttl.Unix())
			case !tc.ttl.IsZero() && ttl.Value != strconv.FormatInt(tc.ttl.Unix(), 10):
				t.Errorf("ttl = %s, want %d (%s)", ttl.Value, tc.ttl.Unix(), tc.ttl)
			}
			if typ, _ := item["type"].(*types.AttributeValueMemberS); typ == nil || typ.Value != tc.sk {
				t.Errorf("type = %v, want %s", item["type"], tc.sk)
			}
			for attr, want := range tc.extra {
				if got, _ := item[attr].(*types.AttributeValueMemberS); got == nil || got.Value != want {
					t.Errorf("%s = %v, want %q", attr, item[attr], want)
				}
			}
		})
	}
}

// TestReads_IgnoreExpiredItemsDynamoDBHasNotDeletedYet proves that the store, not DynamoDB's
// TTL (which deletes up to days late), decides expiry: the expired items are still in the
// table, yet every read answers as if they were gone.
func TestReads_IgnoreExpiredItemsDynamoDBHasNotDeletedYet(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	at := now()
	in := firstIssue(testGrant(at), at)
	mustNil(t, f.store.IssueTokens(ctx, in, at))
	later := in.Refresh.ExpiresAt

	if _, err := f.store.GetToken(ctx, in.Refresh.Hash, later); !isNotFound(err) {
		t.Errorf("GetToken of an expired token: %v, want ErrNotFound", err)
	}
	if err := f.store.IssueTokens(ctx, nextIssue(in, later), later); !errors.Is(err, oauth.ErrConflict) {
		t.Errorf("a refresh spending an expired token: %v, want ErrConflict", err)
	}
	if rawItem(t, f, "TOKEN#"+in.Refresh.Hash, "TOKEN") == nil {
		t.Fatal("the expired item is gone from the table; the test proves nothing")
	}
	got, err := f.store.GetToken(ctx, in.Refresh.Hash, at)
	mustNil(t, err)
	if got.Spent {
		t.Error("a spend refused for expiry marked the token spent")
	}
}

func rawItem(t *testing.T, f *fixture, pk, sk string) map[string]types.AttributeValue {
	t.Helper()
	out, err := f.client.GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName:      aws.String(f.table),
		Key:            map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk}},
		ConsistentRead: aws.Bool(true),
	})
	mustNil(t, err)
	if len(out.Item) == 0 {
		return nil
	}
	return out.Item
}

// TestItems_AuthorizationDetailsAreABinaryMemberOfTheGrant: a grant's RFC 9396 details are the
// member authorization_details (B, the JSON as written) of the grant item's grant map and of
// the grant copy on its token items, as docs/storage.md says; a grant without them has none.
func TestItems_AuthorizationDetailsAreABinaryMemberOfTheGrant(t *testing.T) {
	f := newFixture(t)
	at := now()
	details := `[{"type":"account_information","permissions":["balances"]}]`
	g := testGrant(at)
	g.AuthorizationDetails = []byte(details)
	in := firstIssue(g, at)
	mustNil(t, f.store.IssueTokens(t.Context(), in, at))
	plain := firstIssue(testGrant(at), at)
	mustNil(t, f.store.IssueTokens(t.Context(), plain, at))
	for _, c := range []struct{ pk, sk, want string }{
		{"GRANT#" + g.ID, "GRANT", details}, {"TOKEN#" + in.Access.Hash, "TOKEN", details},
		{"GRANT#" + plain.Grant.ID, "GRANT", ""}, {"TOKEN#" + plain.Access.Hash, "TOKEN", ""},
	} {
		m, _ := rawItem(t, f, c.pk, c.sk)["grant"].(*types.AttributeValueMemberM)
		if m == nil {
			t.Fatalf("%s: no grant map", c.pk)
		}
		b, isB := m.Value["authorization_details"].(*types.AttributeValueMemberB)
		switch {
		case c.want == "" && m.Value["authorization_details"] != nil:
			t.Errorf("%s: authorization_details %v on a grant without details", c.pk, m.Value["authorization_details"])
		case c.want != "" && (!isB || string(b.Value) != c.want):
			t.Errorf("%s: authorization_details %#v, want B %s", c.pk, m.Value["authorization_details"], c.want)
		}
	}
}

// TestItems_ClientOnlyGrantHasNoUserIndexEntry: a grant without a user (client_credentials)
// is in the client index only: no gsi1 key, so such grants never share one "USER#" partition
// and no user's listing can return them.
func TestItems_ClientOnlyGrantHasNoUserIndexEntry(t *testing.T) {
	f := newFixture(t)
	at := now()
	g := oauth.Grant{ID: oauth.NewID(oauth.PrefixGrant), ClientID: "cl_machine", ClientOnly: true,
		Scopes: oauth.Scopes{oauth.ScopeTransfersWrite}, CreatedAt: at, ExpiresAt: at.Add(time.Hour)}
	a := oauth.Token{Hash: oauth.HashToken(oauth.NewSecret(oauth.PrefixAccess)), Kind: oauth.KindAccess, Scopes: g.Scopes,
		IssuedAt: at, ExpiresAt: g.ExpiresAt, Grant: g}
	mustNil(t, f.store.IssueTokens(t.Context(), oauth.Issue{Grant: g, Access: a, FromCode: true, Tokens: []string{a.Hash}}, at))
	item := rawItem(t, f, "GRANT#"+g.ID, "GRANT")
	if item == nil {
		t.Fatal("no grant item")
	}
	if _, ok := item["gsi1pk"]; ok {
		t.Errorf("gsi1pk = %v on a grant without a user", item["gsi1pk"])
	}
	if got, _ := item["gsi2pk"].(*types.AttributeValueMemberS); got == nil || got.Value != "CLIENT#"+g.ClientID {
		t.Errorf("gsi2pk = %v, want CLIENT#%s", item["gsi2pk"], g.ClientID)
	}
}
