package bolt

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"go.etcd.io/bbolt"
)

// The group commit must give each write its own outcome: a failing or panicking function fails
// alone, and the writes it shared a transaction with are committed without it.
func TestWrite_FailingFunctionFailsAloneInItsBatch(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "store.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	errBad := errors.New("bad write")
	const n = 40
	errs := make([]error, n)
	// Hold the writer in a commit so that the racers below queue up and share one batch.
	release := make(chan struct{})
	held := make(chan struct{})
	go s.write(t.Context(), func(tx *bbolt.Tx) error {
		select {
		case <-held:
		default:
			close(held)
		}
		<-release
		return nil
	})
	<-held
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = s.write(t.Context(), func(tx *bbolt.Tx) error {
				switch i {
				case 7:
					return errBad
				case 23:
					panic("boom")
				}
				return tx.Bucket(bSessions).Put(fmt.Appendf(nil, "k%02d", i), []byte("v"))
			})
		})
	}
	for {
		s.mu.Lock()
		queued := len(s.queue)
		s.mu.Unlock()
		if queued == n {
			break
		}
		runtime.Gosched()
	}
	close(release)
	wg.Wait()

	for i, err := range errs {
		switch i {
		case 7:
			if !errors.Is(err, errBad) {
				t.Errorf("failing write got %v, want its own error", err)
			}
		case 23:
			if err == nil {
				t.Errorf("panicking write got no error")
			}
		default:
			if err != nil {
				t.Errorf("write %d got %v, want nil", i, err)
			}
		}
	}
	err = s.db.View(func(tx *bbolt.Tx) error {
		for i := range n {
			got := tx.Bucket(bSessions).Get(fmt.Appendf(nil, "k%02d", i))
			if want := i != 7 && i != 23; (got != nil) != want {
				t.Errorf("key %d stored = %v, want %v", i, got != nil, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestOpen_RefusesAnotherLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	err = s.db.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bMeta).Put(keyLayout, []byte("0")) })
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(path); err == nil {
		s.Close()
		t.Fatalf("Open of a file with another layout succeeded")
	}
}
