package bolt_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/bolt"
)

// The tests below prove what only the embedded store has: garbage collection and the file.
// A read with a `now` from before an item's expiry sees the item as long as it is stored, so
// ErrNotFound from such a read proves the item was physically deleted.

func gcFixture(now time.Time) (oauth.Code, oauth.Issue, oauth.AuthRequest, oauth.Session) {
	g := benchGrant(now)
	g.ExpiresAt = now.Add(48 * time.Hour)
	return benchCode(now), benchIssue(g, now),
		oauth.AuthRequest{ID: oauth.NewID(oauth.PrefixRequest), ClientID: "cl_bench", CSRFHash: "x",
			CreatedAt: now, ExpiresAt: now.Add(10 * time.Minute)},
		oauth.Session{Hash: oauth.HashToken(oauth.NewSecret(oauth.PrefixSession)), UID: "u_bench",
			AuthTime: now, ExpiresAt: now.Add(8 * time.Hour)}
}

func TestGarbageCollect_DeletesOnlyExpiredItems(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	now := time.Now().Truncate(time.Second)
	code, in, req, sess := gcFixture(now)
	mustDo(t, s.CreateCode(ctx, code), s.IssueTokens(ctx, in, now), s.PutAuthRequest(ctx, req), s.PutSession(ctx, sess))
	_, err := s.CountFailure(ctx, "login:ada", time.Minute, now)
	mustDo(t, err)

	n, err := s.GarbageCollect(now)
	mustDo(t, err)
	if n != 0 {
		t.Errorf("GarbageCollect before any expiry deleted %d items, want 0", n)
	}
	// Past the code, the request, the failure window and the access token: four items.
	n, err = s.GarbageCollect(now.Add(time.Hour))
	mustDo(t, err)
	if n != 4 {
		t.Errorf("GarbageCollect after an hour deleted %d items, want 4 (code, request, failure counter, access token)", n)
	}
	if _, err := s.ConsumeCode(ctx, code.Hash, code.Grant.ClientID, now); !errors.Is(err, oauth.ErrNotFound) {
		t.Errorf("code after GarbageCollect: %v, want it deleted", err)
	}
	if _, err := s.GetAuthRequest(ctx, req.ID, now); !errors.Is(err, oauth.ErrNotFound) {
		t.Errorf("auth request after GarbageCollect: %v, want it deleted", err)
	}
	if _, err := s.GetToken(ctx, in.Access.Hash, now); !errors.Is(err, oauth.ErrNotFound) {
		t.Errorf("access token after GarbageCollect: %v, want it deleted", err)
	}
	if _, err := s.GetToken(ctx, in.Refresh.Hash, now); err != nil {
		t.Errorf("refresh token after GarbageCollect: %v, want it kept (it expires in a day)", err)
	}
	if _, err := s.GetSession(ctx, sess.Hash, now); err != nil {
		t.Errorf("session after GarbageCollect: %v, want it kept", err)
	}

	// Past everything: session, refresh token, and the grant with its index entries.
	n, err = s.GarbageCollect(now.Add(72 * time.Hour))
	mustDo(t, err)
	if n != 3 {
		t.Errorf("GarbageCollect after three days deleted %d items, want 3 (session, refresh token, grant)", n)
	}
	if _, err := s.GetGrant(ctx, in.Grant.ID, now); !errors.Is(err, oauth.ErrNotFound) {
		t.Errorf("grant after GarbageCollect: %v, want it deleted", err)
	}
	for _, f := range []oauth.GrantFilter{{UID: in.Grant.UID}, {ClientID: in.Grant.ClientID}} {
		if list, err := s.ListGrants(ctx, f, now); err != nil || len(list) != 0 {
			t.Errorf("ListGrants(%+v) after GarbageCollect = %d grants, %v; want none", f, len(list), err)
		}
	}
	if n, err := s.GarbageCollect(now.Add(72 * time.Hour)); err != nil || n != 0 {
		t.Errorf("second GarbageCollect = %d, %v; want 0, nil", n, err)
	}
}

func TestGarbageCollect_KeepsItemsRewrittenWithALaterExpiry(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	now := time.Now().Truncate(time.Second)
	_, err := s.CountFailure(ctx, "login:ada", time.Minute, now)
	mustDo(t, err)
	// A new window starts after the first: the counter is rewritten with a later expiry.
	_, err = s.CountFailure(ctx, "login:ada", time.Minute, now.Add(time.Minute))
	mustDo(t, err)
	n, err := s.GarbageCollect(now.Add(time.Minute + time.Second))
	mustDo(t, err)
	if n != 0 {
		t.Errorf("GarbageCollect deleted %d items, want 0: the counter was rewritten", n)
	}
	if c, err := s.Failures(ctx, "login:ada", now.Add(time.Minute+time.Second)); err != nil || c != 1 {
		t.Errorf("Failures after GarbageCollect = %d, %v; want 1", c, err)
	}
}

func TestGarbageCollect_KeepsTombstonesForTombstoneTTL(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	now := time.Now().Truncate(time.Second)
	_, in, _, _ := gcFixture(now)
	mustDo(t, s.RevokeGrant(ctx, in.Grant.ID, now))
	_, err := s.GarbageCollect(now.Add(bolt.TombstoneTTL - time.Second))
	mustDo(t, err)
	if err := s.IssueTokens(ctx, in, now); !errors.Is(err, oauth.ErrRevoked) {
		t.Errorf("IssueTokens after collecting before the tombstone's end: %v, want ErrRevoked", err)
	}
	n, err := s.GarbageCollect(now.Add(bolt.TombstoneTTL))
	mustDo(t, err)
	if n != 1 {
		t.Errorf("GarbageCollect at the tombstone's end deleted %d items, want 1", n)
	}
}

func TestGarbageCollect_WorksInChunks(t *testing.T) {
	s := openTemp(t)
	now := time.Now().Truncate(time.Second)
	const n = 2500 // more than two chunks
	createCodes(t, s, n, now)
	got, err := s.GarbageCollect(now.Add(time.Hour))
	mustDo(t, err)
	if got != n {
		t.Errorf("GarbageCollect deleted %d codes, want %d", got, n)
	}
}

func TestOpen_KeepsDataAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := bolt.Open(path)
	mustDo(t, err)
	now := time.Now()
	u := oauth.User{UID: "u_1", Username: "ada", PasswordHash: "h", CreatedAt: now}
	mustDo(t, s.CreateUser(t.Context(), u))
	_, in, _, _ := gcFixture(now)
	mustDo(t, s.IssueTokens(t.Context(), in, now), s.Close())

	s, err = bolt.Open(path)
	mustDo(t, err)
	defer s.Close()
	if got, err := s.GetUserByUsername(t.Context(), "ada"); err != nil || got.UID != "u_1" {
		t.Errorf("user after reopen = %+v, %v", got, err)
	}
	if _, err := s.GetToken(t.Context(), in.Access.Hash, now); err != nil {
		t.Errorf("token after reopen: %v", err)
	}
}

func TestOpen_SecondOpenOfOneFileFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := bolt.Open(path)
	mustDo(t, err)
	defer s.Close()
	if s2, err := bolt.Open(path); err == nil {
		s2.Close()
		t.Fatalf("a second Open of a file in use succeeded")
	}
}

func TestClose_LaterWritesFail(t *testing.T) {
	s, err := bolt.Open(filepath.Join(t.TempDir(), "store.db"))
	mustDo(t, err)
	mustDo(t, s.Close())
	if err := s.CreateCode(t.Context(), benchCode(time.Now())); err == nil {
		t.Errorf("CreateCode after Close succeeded")
	}
	if err := s.Close(); err == nil {
		t.Errorf("second Close succeeded")
	}
}

func TestWrites_WithoutExpiryAreRefused(t *testing.T) {
	s := openTemp(t)
	now := time.Now()
	c := benchCode(now)
	c.ExpiresAt = time.Time{}
	if err := s.CreateCode(t.Context(), c); err == nil {
		t.Errorf("CreateCode of a code without expiry succeeded")
	}
	in := benchIssue(benchGrant(now), now)
	in.Access.ExpiresAt = time.Time{}
	if err := s.IssueTokens(t.Context(), in, now); err == nil {
		t.Errorf("IssueTokens of an access token without expiry succeeded")
	}
}

func mustDo(t testing.TB, errs ...error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
