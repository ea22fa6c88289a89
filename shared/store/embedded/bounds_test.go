package embedded_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// pending is a pending request of about size bytes, expiring at exp.
func pending(id string, size int, exp time.Time) oauth.AuthRequest {
	return oauth.AuthRequest{ID: id, ClientID: "app", Scopes: oauth.Scopes{"openid"}, State: strings.Repeat("s", size),
		CSRFHash: "h", CreatedAt: exp.Add(-time.Minute), ExpiresAt: exp}
}

// TestPutAuthRequest_NewRequestsRefusedBeyondTheCapNothingEvicted: with MaxPendingBytes set, a
// new pending request that would take the requests past the cap is oauth.ErrCapacity
// (temporarily_unavailable, 503) and stores nothing; the requests already kept stay, may be
// rewritten (a sign-in in progress goes on), and a taken or collected request makes room. The
// count is exact after a reopen.
func TestPutAuthRequest_NewRequestsRefusedBeyondTheCapNothingEvicted(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	s, dir := openTemp(t, embedded.Options{MaxPendingBytes: 64 << 10})
	var kept []string
	var err error
	for i := 0; i < 100; i++ {
		id := fmt.Sprintf("ar_%03d", i)
		if err = s.PutAuthRequest(ctx, pending(id, 4000, now.Add(time.Minute))); err != nil {
			break
		}
		kept = append(kept, id)
	}
	if !errors.Is(err, oauth.ErrCapacity) || len(kept) == 0 || len(kept) > 16 {
		t.Fatalf("after %d requests of 4 KB under a 64 KiB cap: %v, want ErrCapacity", len(kept), err)
	}
	if e := oauth.AsError(err); e.Code != oauth.ErrCodeTemporarilyUnavailable || e.Status != 503 {
		t.Fatalf("ErrCapacity answers %s %d, want temporarily_unavailable 503", e.Code, e.Status)
	}
	full, _ := s.PendingBytes()
	if full > 64<<10 {
		t.Fatalf("pending requests take %d bytes, over the cap", full)
	}
	if _, err := s.GetAuthRequest(ctx, fmt.Sprintf("ar_%03d", len(kept)), now); !errors.Is(err, oauth.ErrNotFound) {
		t.Fatalf("the refused request was stored: %v", err)
	}
	for _, id := range kept {
		if _, err := s.GetAuthRequest(ctx, id, now); err != nil {
			t.Fatalf("request %s evicted: %v", id, err)
		}
	}
	// A kept request is rewritten (a ceremony added) even at the cap.
	r := pending(kept[0], 4000, now.Add(time.Minute))
	r.Ceremony = []byte(strings.Repeat("c", 300))
	if err := s.PutAuthRequest(ctx, r); err != nil {
		t.Fatalf("rewriting a kept request at the cap: %v", err)
	}
	// A new request bound to a signed-in user (the sign-in replacing its login page's request)
	// is stored at the cap: a sign-in in progress is never cut short.
	bound := pending("ar_bound", 4000, now.Add(time.Minute))
	bound.UID = "u_1"
	if err := s.PutAuthRequest(ctx, bound); err != nil {
		t.Fatalf("a request bound to a signed-in user at the cap: %v", err)
	}
	if _, err := s.TakeAuthRequest(ctx, bound.ID, now); err != nil {
		t.Fatal(err)
	}
	// Taking one makes room for one.
	if _, err := s.TakeAuthRequest(ctx, kept[1], now); err != nil {
		t.Fatal(err)
	}
	if err := s.PutAuthRequest(ctx, pending("ar_new", 4000, now.Add(time.Second))); err != nil {
		t.Fatalf("after a take: %v", err)
	}
	// Expired and collected, they make room too; the count matches the file after a reopen.
	if n, err := s.GarbageCollect(now.Add(time.Hour)); err != nil || n != len(kept) {
		t.Fatalf("GarbageCollect: %d, %v; want %d", n, err, len(kept))
	}
	if n, _ := s.PendingBytes(); n != 0 {
		t.Fatalf("after collecting every request %d bytes are counted", n)
	}
	if err := s.PutAuthRequest(ctx, pending("ar_later", 4000, now.Add(2*time.Hour))); err != nil {
		t.Fatal(err)
	}
	counted, _ := s.PendingBytes()
	s2 := reopen(t, s, dir)
	if n, _ := s2.PendingBytes(); n != counted || n == 0 {
		t.Fatalf("after a reopen %d bytes are counted, before %d", n, counted)
	}
}

// TestPutAuthRequest_RacingRequestsNeverPassTheCap: 50 new requests at once against a cap
// that holds 10 of them: exactly 10 are kept, the others refused with ErrCapacity.
func TestPutAuthRequest_RacingRequestsNeverPassTheCap(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	one := pending("ar_00", 1000, now.Add(time.Minute))
	s, _ := openTemp(t, embedded.Options{MaxPendingBytes: 10*int64(len(mustJSON(t, one))+len(one.ID)) + 500, NoSync: true})
	var wg sync.WaitGroup
	errs := make([]error, 50)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.PutAuthRequest(ctx, pending(fmt.Sprintf("ar_%02d", i), 1000, now.Add(time.Minute)))
		}()
	}
	wg.Wait()
	ok, full := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, oauth.ErrCapacity):
			full++
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	if ok != 10 || full != 40 {
		t.Fatalf("%d kept, %d refused; want 10 and 40", ok, full)
	}
}

// TestGarbageCollect_RemovesEveryExpiredItemInBatches: expired items beyond one batch (and
// beyond one transaction's scan) all go in one call, live ones stay, and the pending-request
// count follows.
func TestGarbageCollect_RemovesEveryExpiredItemInBatches(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	s, _ := openTemp(t, embedded.Options{NoSync: true})
	const expired, alive = 12000, 300
	for i := range expired + alive {
		exp := now.Add(time.Second)
		if i%((expired+alive)/alive) == 0 {
			exp = now.Add(time.Hour)
		}
		if err := s.PutAuthRequest(ctx, pending(fmt.Sprintf("ar_%05d", i), 10, exp)); err != nil {
			t.Fatal(err)
		}
	}
	var live int
	for i := range expired + alive {
		if i%((expired+alive)/alive) == 0 {
			live++
		}
	}
	n, err := s.GarbageCollect(now.Add(time.Minute))
	if err != nil || n != expired+alive-live {
		t.Fatalf("GarbageCollect: %d, %v; want %d", n, err, expired+alive-live)
	}
	if n, err := s.GarbageCollect(now.Add(time.Minute)); err != nil || n != 0 {
		t.Fatalf("a second collection: %d, %v; want 0", n, err)
	}
	for i := range expired + alive {
		_, err := s.GetAuthRequest(ctx, fmt.Sprintf("ar_%05d", i), now)
		if wantLive := i%((expired+alive)/alive) == 0; wantLive != (err == nil) {
			t.Fatalf("request %d: %v (live %v)", i, err, wantLive)
		}
	}
	if b, _ := s.PendingBytes(); b == 0 || b > int64(live)*400 {
		t.Fatalf("%d bytes counted for %d live requests", b, live)
	}
}

// TestGarbageCollect_BoundedWorkPerCall: one call deletes at most its limit of expired items
// (here 2,500, in batches of 100 reading at most 300 items each), and the next calls take the
// rest, until none is left.
func TestGarbageCollect_BoundedWorkPerCall(t *testing.T) {
	defer embedded.SetGCLimits(300, 100, 2500)()
	ctx := context.Background()
	now := time.Now()
	s, _ := openTemp(t, embedded.Options{NoSync: true})
	for i := range 6000 {
		if err := s.PutAuthRequest(ctx, pending(fmt.Sprintf("ar_%05d", i), 10, now.Add(time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	var got []int
	for range 5 {
		n, err := s.GarbageCollect(now.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, n)
	}
	if fmt.Sprint(got) != "[2500 2500 1000 0 0]" {
		t.Fatalf("deleted per call %v, want [2500 2500 1000 0 0]", got)
	}
	if n, _ := s.PendingBytes(); n != 0 {
		t.Fatalf("%d bytes counted after every request was collected", n)
	}
}

// TestCompact_ShrinksTheFileAndKeepsLiveItems: after a flood of pending requests has expired,
// Compact gives the file's space back (to under a tenth), drops the expired requests and keeps
// everything live; while the store is open elsewhere it is ErrLocked and changes nothing.
func TestCompact_ShrinksTheFileAndKeepsLiveItems(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	dir := t.TempDir()
	s, err := embedded.OpenWith(dir, embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateClient(ctx, client("app")); err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		if err := s.PutAuthRequest(ctx, pending(fmt.Sprintf("ar_%05d", i), 8000, now.Add(time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutAuthRequest(ctx, pending("ar_live", 100, now.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, embedded.FileName)
	locked, _ := os.Stat(path)
	if _, err := embedded.Compact(dir, now.Add(time.Minute)); !errors.Is(err, embedded.ErrLocked) {
		t.Fatalf("Compact of an open store: %v, want ErrLocked", err)
	}
	if st, _ := os.Stat(path); st.Size() != locked.Size() || !st.ModTime().Equal(locked.ModTime()) {
		t.Fatal("a refused Compact changed the file")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := embedded.Compact(dir, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if res.Before != locked.Size() || res.After != st.Size() || res.After*10 > res.Before {
		t.Fatalf("Compact: %+v (file %d bytes), want under a tenth of %d", res, st.Size(), locked.Size())
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("compacted file mode %v, want 0600", st.Mode().Perm())
	}
	s2, err := embedded.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := s2.GetClient(ctx, "app"); err != nil {
		t.Fatalf("client lost: %v", err)
	}
	if _, err := s2.GetAuthRequest(ctx, "ar_live", now); err != nil {
		t.Fatalf("live request lost: %v", err)
	}
	if _, err := s2.GetAuthRequest(ctx, "ar_00001", now); !errors.Is(err, oauth.ErrNotFound) {
		t.Fatalf("expired request kept: %v", err)
	}
	if n, _ := s2.PendingBytes(); n == 0 || n > 1000 {
		t.Fatalf("%d pending bytes counted after compaction, want the live request's", n)
	}
}

// mustJSON is v's JSON, as the store keeps it.
func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
