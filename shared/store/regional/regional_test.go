package regional_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
	"github.com/acmebank/authserver/shared/store/regional"
)

func open(t *testing.T) *embedded.Store {
	t.Helper()
	s, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func code(now time.Time) oauth.Code {
	return oauth.Code{Hash: oauth.HashToken(oauth.NewSecret(oauth.PrefixCode)), RedirectURI: "https://c.example/cb",
		Grant:     oauth.Grant{ID: oauth.NewID(oauth.PrefixGrant), ClientID: "cl_1", UID: "u1", CreatedAt: now, ExpiresAt: now.Add(time.Hour)},
		ExpiresAt: now.Add(time.Minute)}
}

// TestStore_SingleUseWritesGoToTheHomeNamedInTheContext: a code of home b, consumed through
// region a's store, is consumed in b's replica (a's has never seen it); with no home named it
// is a's own; a home that is not one of the deployment's is an unknown code.
func TestStore_SingleUseWritesGoToTheHomeNamedInTheContext(t *testing.T) {
	a, b := open(t), open(t)
	st, err := regional.New("eu-west-1", a, map[string]oauth.Store{"eu-central-1": b})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	ctx := context.Background()
	atB := code(now)
	if err := b.CreateCode(ctx, atB); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ConsumeCode(ctx, atB.Hash, "cl_1", now); !errors.Is(err, oauth.ErrNotFound) {
		t.Fatalf("consumed with no home named: %v, want not found (it is in b's replica only)", err)
	}
	if _, err := st.ConsumeCode(oauth.WithHome(ctx, "eu-central-1"), atB.Hash, "cl_1", now); err != nil {
		t.Fatalf("consumed at its home: %v", err)
	}
	if _, err := b.ConsumeCode(ctx, atB.Hash, "cl_1", now); !errors.Is(err, oauth.ErrUsed) {
		t.Fatalf("b's replica after the routed consume: %v, want used", err)
	}
	atA := code(now)
	if err := a.CreateCode(ctx, atA); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ConsumeCode(oauth.WithHome(ctx, "eu-west-1"), atA.Hash, "cl_1", now); err != nil {
		t.Fatalf("a code of this region's home: %v", err)
	}
	other := code(now)
	if err := a.CreateCode(ctx, other); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ConsumeCode(oauth.WithHome(ctx, "us-east-1"), other.Hash, "cl_1", now); !errors.Is(err, oauth.ErrNotFound) {
		t.Fatalf("a code of an unknown home: %v, want not found", err)
	}
	if _, err := a.ConsumeCode(ctx, other.Hash, "cl_1", now); err != nil {
		t.Fatalf("the unknown-home attempt changed the local replica: %v", err)
	}
}

func TestNew_RefusesBadHomeLabels(t *testing.T) {
	a := open(t)
	for _, tc := range []struct {
		home  string
		peers map[string]oauth.Store
	}{
		{"", nil}, {"EU-West-1", nil}, {"eu.west", nil}, {"eu-west-1", map[string]oauth.Store{"eu-west-1": a}},
	} {
		if _, err := regional.New(tc.home, a, tc.peers); err == nil {
			t.Errorf("New(%q, peers %v) accepted", tc.home, tc.peers)
		}
	}
}

// TestStore_RevocationIsWrittenAtTheTokensHome: revoking a token through a region that has not
// received it yet deletes it at its home, so replication cannot bring it back.
func TestStore_RevocationIsWrittenAtTheTokensHome(t *testing.T) {
	a, b := open(t), open(t)
	st, err := regional.New("eu-west-1", a, map[string]oauth.Store{"eu-central-1": b})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	ctx := oauth.WithHome(context.Background(), "eu-central-1")
	g := oauth.Grant{ID: oauth.NewID(oauth.PrefixGrant), ClientID: "cl_1", UID: "u1", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	access := oauth.Token{Hash: oauth.HashToken(oauth.NewSecret(oauth.PrefixAccess)), Kind: oauth.KindAccess, Grant: g, IssuedAt: now, ExpiresAt: now.Add(time.Hour)}
	refresh := oauth.Token{Hash: oauth.HashToken(oauth.NewSecret(oauth.PrefixRefresh)), Kind: oauth.KindRefresh, Grant: g, IssuedAt: now, ExpiresAt: now.Add(time.Hour), Live: []string{access.Hash}}
	if err := b.IssueTokens(context.Background(), oauth.Issue{Grant: g, Access: access, Refresh: refresh, FromCode: true, Tokens: []string{access.Hash, refresh.Hash}}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetToken(ctx, access.Hash, now); err != nil {
		t.Fatalf("the token, read through region a at its home: %v", err)
	}
	if err := st.RevokeToken(ctx, access.Hash); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetToken(context.Background(), access.Hash, now); !errors.Is(err, oauth.ErrNotFound) {
		t.Fatalf("the token at its home after revocation through region a: %v, want gone", err)
	}
}

// TestStore_APushedRequestIsTakenAtItsHome: a pushed authorization request (PAR) kept in region
// b is taken through region a's store when the context names b, once.
func TestStore_APushedRequestIsTakenAtItsHome(t *testing.T) {
	a, b := open(t), open(t)
	st, err := regional.New("eu-west-1", a, map[string]oauth.Store{"eu-central-1": b})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	req := oauth.AuthRequest{ID: "pr_x", ClientID: "cl_1", RedirectURI: "https://c.example/cb", CreatedAt: now, ExpiresAt: now.Add(time.Minute)}
	if err := b.PutAuthRequest(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if _, err := st.TakeAuthRequest(context.Background(), req.ID, now); !errors.Is(err, oauth.ErrNotFound) {
		t.Fatalf("taken locally: %v, want not found (it is in b)", err)
	}
	ctx := oauth.WithHome(context.Background(), "eu-central-1")
	if got, err := st.TakeAuthRequest(ctx, req.ID, now); err != nil || got.ClientID != "cl_1" {
		t.Fatalf("taken at its home: %+v %v", got, err)
	}
	if _, err := st.TakeAuthRequest(ctx, req.ID, now); !errors.Is(err, oauth.ErrNotFound) {
		t.Fatalf("taken twice: %v", err)
	}
}
