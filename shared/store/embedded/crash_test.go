package embedded_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// crashChildDir names the data directory of the writing process TestCrash_… starts and kills.
const crashChildDir = "EMBEDDED_CRASH_CHILD_DIR"

// crashExpiry is the end of every one-time value the killed process writes: far enough ahead.
var crashExpiry = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

// TestCrash_KilledWhileWritingLosesNothingAcknowledged starts a process that writes from 16
// goroutines at once (group commits, fsync on) and prints each write once the store has
// answered it, kills it with SIGKILL in the middle, and opens the file: every answered write is
// there. (A kill keeps what the kernel holds, so this proves that a write is answered only after
// its group's commit; the fsyncs are bbolt's.)
func TestCrash_KilledWhileWritingLosesNothingAcknowledged(t *testing.T) {
	if dir := os.Getenv(crashChildDir); dir != "" {
		writeUntilKilled(dir)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrash_KilledWhileWritingLosesNothingAcknowledged$")
	cmd.Env = append(os.Environ(), crashChildDir+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acked []string
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if key, ok := strings.CutPrefix(lines.Text(), "acked "); ok {
			acked = append(acked, key)
			if len(acked) == 300 {
				break
			}
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if len(acked) < 300 {
		t.Fatalf("the writing process answered %d writes before it ended, want 300", len(acked))
	}
	s, err := embedded.Open(dir)
	if err != nil {
		t.Fatalf("Open after the kill: %v", err)
	}
	defer s.Close()
	now := crashExpiry.Add(-time.Hour)
	for _, key := range acked {
		if err := s.UseOnce(t.Context(), key, crashExpiry, now); !errors.Is(err, oauth.ErrUsed) {
			t.Errorf("an answered write of %s: UseOnce after the kill = %v, want ErrUsed (stored)", key, err)
		}
	}
}

// writeUntilKilled is the killed process: 16 writers, each printing "acked <key>" once its
// write is answered, until the process is killed.
func writeUntilKilled(dir string) {
	s, err := embedded.Open(dir)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	now := crashExpiry.Add(-time.Hour)
	for g := range 16 {
		go func() {
			for i := 0; ; i++ {
				key := fmt.Sprintf("dpop:crash:%d:%d", g, i)
				if err := s.UseOnce(context.Background(), key, crashExpiry, now); err != nil {
					continue
				}
				mu.Lock()
				fmt.Printf("acked %s\n", key)
				mu.Unlock()
			}
		}()
	}
	select {}
}
