package embedded_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
	"github.com/acmebank/authserver/shared/store/storetest"
)

// openTemp opens a store in a fresh temporary directory, closed when the test ends.
func openTemp(tb testing.TB, opts embedded.Options) (*embedded.Store, string) {
	tb.Helper()
	dir := tb.TempDir()
	s, err := embedded.OpenWith(dir, opts)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s, dir
}

// The local server collects expired items through this method, found by a type assertion
// (cmd/authserver): a change of its signature must not silently stop the collection.
var _ interface {
	GarbageCollect(time.Time) (int, error)
} = (*embedded.Store)(nil)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) oauth.Store { s, _ := openTemp(t, embedded.Options{}); return s })
}

// TestConformance_EveryWriteRunTwice runs the suite with every write's fn run once more on the
// same data, rolled back, before it runs for real, as a neighbour's refusal in a shared commit
// makes it run: a fn that kept anything from its first run (a decoded item, a flag) would answer
// differently the second time.
func TestConformance_EveryWriteRunTwice(t *testing.T) {
	storetest.Run(t, func(t *testing.T) oauth.Store {
		s, _ := openTemp(t, embedded.Options{NoSync: true})
		s.RunWritesTwice()
		return s
	})
}

// TestUpdate_RacingWritesShareCommits: 50 writes at once, with fsync, take far fewer than 50
// commits (group commit), and every one of them is stored.
func TestUpdate_RacingWritesShareCommits(t *testing.T) {
	s, _ := openTemp(t, embedded.Options{})
	now := time.Now()
	before, err := s.Commits()
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 50)
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range keys {
		keys[i] = oauth.NewID("dpop:")
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			errs[i] = s.UseOnce(t.Context(), keys[i], now.Add(time.Minute), now)
		}()
	}
	close(gate)
	wg.Wait()
	after, err := s.Commits()
	if err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("UseOnce %d: %v", i, err)
		}
		if err := s.UseOnce(t.Context(), keys[i], now.Add(time.Minute), now); !errors.Is(err, oauth.ErrUsed) {
			t.Errorf("UseOnce %d again: %v, want ErrUsed (stored)", i, err)
		}
	}
	if n := after - before; n > len(keys)/2 {
		t.Errorf("%d racing writes took %d commits, want at most %d", len(keys), n, len(keys)/2)
	} else {
		t.Logf("%d racing writes took %d commits", len(keys), n)
	}
}

// TestUpdate_ACommitThatFailsFailsEveryWriteOfItsGroup: 50 racing writes while commits fail
// (a full disk) are each answered ErrTransient and none is stored, whichever group each was in;
// once commits succeed again, the same writes are stored.
func TestUpdate_ACommitThatFailsFailsEveryWriteOfItsGroup(t *testing.T) {
	s, _ := openTemp(t, embedded.Options{})
	now := time.Now()
	keys := make([]string, 50)
	for i := range keys {
		keys[i] = oauth.NewID("dpop:")
	}
	race := func() []error {
		errs := make([]error, len(keys))
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := range keys {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				errs[i] = s.UseOnce(t.Context(), keys[i], now.Add(time.Minute), now)
			}()
		}
		close(gate)
		wg.Wait()
		return errs
	}
	s.FailCommits(syscall.EIO)
	for i, err := range race() {
		if !errors.Is(err, oauth.ErrTransient) {
			t.Errorf("UseOnce %d while commits fail: %v, want ErrTransient", i, err)
		}
	}
	s.FailCommits(nil)
	for i, err := range race() {
		if err != nil {
			t.Errorf("UseOnce %d once commits succeed: %v, want nil (nothing was stored before)", i, err)
		}
	}
}

func client(id string) oauth.Client {
	return oauth.Client{ID: id, Name: "App " + id, RedirectURIs: []string{"https://app.example/cb"}, Scopes: []string{"openid"}}
}

// reopen closes s and opens the store of dir again.
func reopen(t *testing.T, s *embedded.Store, dir string) *embedded.Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s2, err := embedded.Open(dir)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	t.Cleanup(func() { s2.Close() })
	return s2
}

func TestOpen_SecondOpenOfOneDirectoryIsErrLocked(t *testing.T) {
	_, dir := openTemp(t, embedded.Options{})
	start := time.Now()
	s2, err := embedded.Open(dir)
	if !errors.Is(err, embedded.ErrLocked) {
		if s2 != nil {
			s2.Close()
		}
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), "stop the server") {
		t.Errorf("ErrLocked message %q does not say to stop the server", err)
	}
	if waited := time.Since(start); waited > 30*time.Second {
		t.Errorf("second Open waited %v for the lock: it must give up after a short timeout", waited)
	}
}

func TestOpen_AfterCloseTheFileIsFreeAgain(t *testing.T) {
	s, dir := openTemp(t, embedded.Options{})
	if err := s.CreateClient(t.Context(), client("c1")); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s, dir)
	if _, err := s.GetClient(t.Context(), "c1"); err != nil {
		t.Fatalf("client after reopen: %v", err)
	}
}

func TestOpen_FileIsReadableByItsOwnerOnly(t *testing.T) {
	s, dir := openTemp(t, embedded.Options{})
	if err := s.CreateClient(t.Context(), client("c1")); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, embedded.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("data file mode %v, want 0600", st.Mode().Perm())
	}
}

func TestClose_LaterCallsFail(t *testing.T) {
	s, _ := openTemp(t, embedded.Options{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateClient(t.Context(), client("c1")); err == nil {
		t.Error("a write after Close succeeded")
	}
	if _, err := s.GetClient(t.Context(), "c1"); err == nil || errors.Is(err, oauth.ErrNotFound) {
		t.Errorf("a read after Close: %v, want the closed store's error", err)
	}
}

// Every expiring kind of item is collected once expired, and only then; what never expires
// (clients) stays.
func TestGarbageCollect_DeletesExpiredItemsOnly(t *testing.T) {
	s, dir := openTemp(t, embedded.Options{NoSync: true})
	ctx := t.Context()
	now := time.Now().Truncate(time.Second)
	g := oauth.Grant{ID: "g1", ClientID: "c1", UID: "u1", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	code := oauth.Code{Hash: "code", Grant: g, ExpiresAt: now.Add(time.Minute)}
	access := oauth.Token{Hash: "at", Kind: oauth.KindAccess, Grant: g, ExpiresAt: now.Add(time.Minute)}
	refresh := oauth.Token{Hash: "rt", Kind: oauth.KindRefresh, Grant: g, ExpiresAt: now.Add(time.Hour)}
	for _, err := range []error{
		s.CreateClient(ctx, client("c1")),
		s.CreateCode(ctx, code),
		s.IssueTokens(ctx, oauth.Issue{Grant: g, Access: access, Refresh: refresh, FromCode: true, Tokens: []string{"at", "rt"}}, now),
		s.PutAuthRequest(ctx, oauth.AuthRequest{ID: "r1", ExpiresAt: now.Add(time.Minute)}),
		s.PutSession(ctx, oauth.Session{Hash: "old", UID: "u1", ExpiresAt: now.Add(time.Minute)}),
		s.PutSession(ctx, oauth.Session{Hash: "new", UID: "u1", ExpiresAt: now.Add(2 * time.Hour)}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CountFailure(ctx, "login:ada", time.Minute, now); err != nil {
		t.Fatal(err)
	}

	// At the minute: code, access token, request, old session, failure counter.
	if n, err := s.GarbageCollect(now.Add(time.Minute)); err != nil || n != 5 {
		t.Fatalf("GarbageCollect at the minute = %d, %v; want 5 deleted", n, err)
	}
	// Collection is durable: the reopened store has the same items.
	s = reopen(t, s, dir)
	if _, err := s.GetToken(ctx, "rt", now); err != nil {
		t.Errorf("the live refresh token: %v", err)
	}
	if _, err := s.GetGrant(ctx, "g1", now); err != nil {
		t.Errorf("the live grant: %v", err)
	}
	if _, err := s.GetSession(ctx, "new", now); err != nil {
		t.Errorf("the live session: %v", err)
	}
	// Read at the old now, the collected items are gone, not merely filtered.
	if _, err := s.GetToken(ctx, "at", now); !errors.Is(err, oauth.ErrNotFound) {
		t.Errorf("the collected access token: %v, want ErrNotFound", err)
	}
	if _, err := s.GetSession(ctx, "old", now); !errors.Is(err, oauth.ErrNotFound) {
		t.Errorf("the collected session: %v, want ErrNotFound", err)
	}
	if n, err := s.Failures(ctx, "login:ada", now); err != nil || n != 0 {
		t.Errorf("the collected failure counter = %d, %v; want 0", n, err)
	}

	// After the hour: refresh token, grant. After two: the new session. The client stays.
	if n, err := s.GarbageCollect(now.Add(3 * time.Hour)); err != nil || n != 3 {
		t.Fatalf("GarbageCollect after three hours = %d, %v; want 3 deleted", n, err)
	}
	if n, err := s.GarbageCollect(now.Add(3 * time.Hour)); err != nil || n != 0 {
		t.Errorf("second GarbageCollect = %d, %v; want 0", n, err)
	}
	if _, err := s.GetClient(ctx, "c1"); err != nil {
		t.Errorf("the client after GarbageCollect: %v", err)
	}
}

// A revoked grant is kept as long as its tombstone end, so that it still blocks a late first
// issuance after a collection before that end.
// TestGarbageCollect_ACommitThatFailsDeletesNothing: the sweep writes through the store's one
// write path (group commit), so a commit that fails fails the sweep as a transient error and
// deletes nothing, and the next sweep deletes once the disk has room.
func TestGarbageCollect_ACommitThatFailsDeletesNothing(t *testing.T) {
	s, _ := openTemp(t, embedded.Options{NoSync: true})
	now := time.Now()
	if err := s.PutExpired(10, now); err != nil {
		t.Fatal(err)
	}
	s.FailCommits(syscall.ENOSPC)
	if n, err := s.GarbageCollect(now); !errors.Is(err, oauth.ErrTransient) || n != 0 {
		t.Fatalf("GarbageCollect while commits fail = %d, %v; want 0, ErrTransient", n, err)
	}
	s.FailCommits(nil)
	if n, err := s.GarbageCollect(now); err != nil || n != 10 {
		t.Fatalf("GarbageCollect afterwards = %d, %v; want 10 deleted", n, err)
	}
}

func TestGarbageCollect_KeepsTombstonesForTombstoneTTL(t *testing.T) {
	s, _ := openTemp(t, embedded.Options{NoSync: true})
	ctx := t.Context()
	now := time.Now().Truncate(time.Second)
	if err := s.RevokeGrant(ctx, "g1", now); err != nil {
		t.Fatal(err)
	}
	if n, err := s.GarbageCollect(now.Add(embedded.TombstoneTTL - time.Second)); err != nil || n != 0 {
		t.Fatalf("GarbageCollect before the tombstone's end = %d, %v; want 0", n, err)
	}
	g := oauth.Grant{ID: "g1", ClientID: "c1", UID: "u1", ExpiresAt: now.Add(30 * 24 * time.Hour)}
	in := oauth.Issue{Grant: g, FromCode: true,
		Access:  oauth.Token{Hash: "at", Kind: oauth.KindAccess, Grant: g, ExpiresAt: now.Add(time.Hour)},
		Refresh: oauth.Token{Hash: "rt", Kind: oauth.KindRefresh, Grant: g, ExpiresAt: now.Add(time.Hour)}}
	if err := s.IssueTokens(ctx, in, now); !errors.Is(err, oauth.ErrRevoked) {
		t.Errorf("IssueTokens after the collection: %v, want ErrRevoked", err)
	}
	if n, err := s.GarbageCollect(now.Add(embedded.TombstoneTTL)); err != nil || n != 1 {
		t.Errorf("GarbageCollect at the tombstone's end = %d, %v; want 1", n, err)
	}
}

func TestWrites_WithoutExpiryAreRefused(t *testing.T) {
	s, _ := openTemp(t, embedded.Options{NoSync: true})
	ctx := t.Context()
	if err := s.CreateCode(ctx, oauth.Code{Hash: "c"}); err == nil {
		t.Error("CreateCode of a code without expiry succeeded")
	}
	if err := s.PutSession(ctx, oauth.Session{Hash: "x"}); err == nil {
		t.Error("PutSession of a session without expiry succeeded")
	}
	if err := s.PutAuthRequest(ctx, oauth.AuthRequest{ID: "r"}); err == nil {
		t.Error("PutAuthRequest of a request without expiry succeeded")
	}
	if n, err := s.GarbageCollect(time.Now()); err != nil || n != 0 {
		t.Errorf("GarbageCollect = %d, %v: something was stored", n, err)
	}
}
