package embedded_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

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

func mustClient(t *testing.T, s *embedded.Store, id string) {
	t.Helper()
	if _, err := s.GetClient(t.Context(), id); err != nil {
		t.Fatalf("GetClient(%s): %v", id, err)
	}
}

func TestOpen_SecondOpenOfOneDirectoryIsErrLocked(t *testing.T) {
	_, dir := openTemp(t, embedded.Options{})
	s2, err := embedded.Open(dir)
	if !errors.Is(err, embedded.ErrLocked) {
		if s2 != nil {
			s2.Close()
		}
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
}

func TestOpen_LogIsReadableByItsOwnerOnly(t *testing.T) {
	s, dir := openTemp(t, embedded.Options{})
	if err := s.CreateClient(t.Context(), client("c1")); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, embedded.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("log mode %v, want 0600", st.Mode().Perm())
	}
}

// frame builds a log frame around body, as the store writes it.
func frame(body []byte) []byte {
	out := binary.LittleEndian.AppendUint32(nil, uint32(len(body)))
	out = binary.LittleEndian.AppendUint32(out, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
	return append(out, body...)
}

// A crash can leave the last frame cut short, with a bad checksum, or followed by zeros where
// the file grew: the store opens with everything before it, and works on.
func TestReplay_TornLastFrameIsDropped(t *testing.T) {
	good := frame([]byte("\x06\x01\x02c9\x02{}"))
	tails := map[string][]byte{
		"half a frame header":   {0x20, 0x00},
		"a frame cut short":     good[:len(good)-3],
		"a bad checksum at EOF": append(append([]byte{}, good[:4]...), append([]byte{1, 2, 3, 4}, good[8:]...)...),
		"zeros":                 make([]byte, 4096),
	}
	for name, tail := range tails {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := embedded.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"c1", "c2"} {
				if err := s.CreateClient(t.Context(), client(id)); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			appendFile(t, filepath.Join(dir, embedded.FileName), tail)
			s, err = embedded.Open(dir)
			if err != nil {
				t.Fatalf("Open after a torn tail: %v", err)
			}
			t.Cleanup(func() { s.Close() })
			mustClient(t, s, "c1")
			mustClient(t, s, "c2")
			if _, err := s.GetClient(t.Context(), "c9"); !errors.Is(err, oauth.ErrNotFound) {
				t.Fatalf("the torn frame's client: %v, want ErrNotFound", err)
			}
			if err := s.CreateClient(t.Context(), client("c3")); err != nil {
				t.Fatal(err)
			}
			s = reopen(t, s, dir)
			mustClient(t, s, "c3")
		})
	}
}

func appendFile(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// A damaged frame with good frames after it is not a crash: the store refuses to open rather
// than silently lose what follows.
func TestReplay_CorruptFrameBeforeTheEndRefusesToOpen(t *testing.T) {
	dir := t.TempDir()
	s, err := embedded.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"c1", "c2", "c3"} {
		if err := s.CreateClient(t.Context(), client(id)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	path := filepath.Join(dir, embedded.FileName)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The second frame is the first client (the first is the header): change one byte of its body.
	first := 8 + int(binary.LittleEndian.Uint32(data))
	data[first+8+5] ^= 0xff
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := embedded.Open(dir); err == nil {
		s.Close()
		t.Fatal("Open of a log with a corrupt frame in the middle succeeded")
	}
	// And it left the file alone, for whoever repairs it.
	after, _ := os.ReadFile(path)
	if string(after) != string(data) {
		t.Fatal("a refused Open changed the log")
	}
}

func TestOpen_RefusesAFileThatIsNotThisLayout(t *testing.T) {
	for name, content := range map[string][]byte{
		"another layout": frame([]byte("\x01\x01\x06layout\x0fembedded-log/99")),
		"not a log":      []byte("SQLite format 3\x00 and more bytes than a frame header"),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, embedded.FileName), content, 0o600); err != nil {
				t.Fatal(err)
			}
			if s, err := embedded.Open(dir); err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
		})
	}
}

// The running store compacts its log while writers keep writing: every write that returned is
// in the compacted log, and the log stays bounded.
func TestCompaction_WhileWritingKeepsEveryWrite(t *testing.T) {
	defer embedded.SetCompactMin(16 << 10)()
	s, dir := openTemp(t, embedded.Options{NoSync: true})
	const writers, each = 8, 200
	now := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				x := oauth.Session{Hash: fmt.Sprintf("s-%d-%d", w, i), UID: "u1", AuthTime: now, ExpiresAt: now.Add(time.Hour)}
				if err := s.PutSession(t.Context(), x); err != nil {
					errs <- err
					return
				}
				// Rewrite the same item too, so that the log holds garbage to compact away.
				if err := s.PutSession(t.Context(), x); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	embedded.WaitCompaction(s)
	if n := embedded.Compactions(s); n < 2 {
		t.Fatalf("%d snapshots written, want compactions while running (more than the one at Open)", n)
	}
	s = reopen(t, s, dir)
	for w := range writers {
		for i := range each {
			if _, err := s.GetSession(t.Context(), fmt.Sprintf("s-%d-%d", w, i), now); err != nil {
				t.Fatalf("session %d-%d after compactions and a reopen: %v", w, i, err)
			}
		}
	}
}

// When the log cannot be written, the store stops: the failed write reports it, and every later
// call fails rather than serve a memory that has run ahead of the disk.
func TestLogFailure_FailsEveryLaterCall(t *testing.T) {
	s, _ := openTemp(t, embedded.Options{})
	if err := s.CreateClient(t.Context(), client("c1")); err != nil {
		t.Fatal(err)
	}
	embedded.BreakLog(s)
	if err := s.CreateClient(t.Context(), client("c2")); err == nil {
		t.Fatal("a write to a broken log succeeded")
	}
	if _, err := s.GetClient(t.Context(), "c1"); err == nil || errors.Is(err, oauth.ErrNotFound) {
		t.Fatalf("read after a log failure: %v, want the log's error", err)
	}
	if err := s.DeleteClient(t.Context(), "c1"); err == nil {
		t.Fatal("a write after a log failure succeeded")
	}
}

func TestGarbageCollect_DeletesExpiredItemsOnly(t *testing.T) {
	s, dir := openTemp(t, embedded.Options{NoSync: true})
	now := time.Now()
	put := func(hash string, end time.Time) {
		if err := s.PutSession(t.Context(), oauth.Session{Hash: hash, UID: "u", AuthTime: now, ExpiresAt: end}); err != nil {
			t.Fatal(err)
		}
	}
	put("old", now.Add(time.Minute))
	put("new", now.Add(time.Hour))
	n, err := s.GarbageCollect(now.Add(2 * time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("GarbageCollect = %d, %v; want 1 deleted", n, err)
	}
	if _, err := s.GetSession(t.Context(), "new", now); err != nil {
		t.Fatalf("the live session: %v", err)
	}
	if _, err := s.GetSession(t.Context(), "old", now); !errors.Is(err, oauth.ErrNotFound) {
		t.Fatalf("the collected session: %v, want ErrNotFound", err)
	}
	// Collection is not logged: a replay drops whatever has expired by then. Here the old
	// session (collected at a "now" in the future) is still live at the real time of the
	// reopen, so it is back until it is collected again.
	s = reopen(t, s, dir)
	if n, _ := s.GarbageCollect(now.Add(2 * time.Minute)); n != 1 {
		t.Fatalf("after reopen, GarbageCollect = %d, want the old session collected again", n)
	}
}

// A live compaction writes its snapshot without holding the store: reads and writes go on
// meanwhile, and the writes made while it runs are in the compacted log, after the snapshot.
func TestCompaction_ReadsAndWritesGoOnWhileTheSnapshotIsWritten(t *testing.T) {
	defer embedded.SetCompactMin(8 << 10)()
	paused, release := make(chan struct{}, 1), make(chan struct{})
	defer embedded.PauseCompactions(paused, release)()
	s, dir := openTemp(t, embedded.Options{NoSync: true})
	now := time.Now()
	put := func(hash string) {
		t.Helper()
		if err := s.PutSession(t.Context(), oauth.Session{Hash: hash, UID: "u1", AuthTime: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	// Grow the log until a compaction starts, and hold it between its snapshot and the write.
	for i := 0; ; i++ {
		put(fmt.Sprintf("before-%d", i))
		select {
		case <-paused:
		default:
			continue
		}
		break
	}
	done := make(chan error, 1)
	go func() {
		// While the compaction is held: a write (which needs the file) and a read.
		err := s.PutSession(t.Context(), oauth.Session{Hash: "during", UID: "u1", AuthTime: now, ExpiresAt: now.Add(time.Hour)})
		if err == nil {
			_, err = s.GetSession(t.Context(), "before-0", now)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("a write and a read waited for the compaction's snapshot to be written")
	}
	close(release)
	embedded.WaitCompaction(s)
	s = reopen(t, s, dir)
	for _, h := range []string{"before-0", "during"} {
		if _, err := s.GetSession(t.Context(), h, now); err != nil {
			t.Fatalf("session %s after the compaction and a reopen: %v", h, err)
		}
	}
}
