package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/bbolt"
)

// compactTxMaxSize is how many bytes bbolt.Compact copies per transaction of the new file.
const compactTxMaxSize = 64 << 20

// Compaction. A bbolt file never shrinks: deleting items (an answered request, an expired one
// removed by GarbageCollect) frees pages that later writes reuse, but the file keeps the size
// of its largest moment, after a flood of requests, say. Compact rewrites the live items into
// a new file with bbolt's own Compact and puts it in the old one's place.

// CompactResult is the size of the data file before and after Compact, in bytes.
type CompactResult struct {
	Before, After int64
}

// Compact rewrites the data file under dir to hold only its live pages, deleting the items that
// have expired first, and returns the file's sizes. It needs the file for itself: while a server
// (or anything else) holds it, it fails with ErrLocked and changes nothing. The new file is
// written and synced beside the old one, checked as Open checks a file, then renamed over it,
// so a crash midway leaves the old file whole (and at worst a stray temporary file).
func Compact(dir string, now time.Time) (CompactResult, error) {
	path := filepath.Join(dir, FileName)
	st, err := os.Stat(path)
	if err != nil {
		return CompactResult{}, fmt.Errorf("embedded store: compact: %w", err)
	}
	src, err := OpenWith(dir, Options{})
	if err != nil {
		return CompactResult{}, err
	}
	defer src.Close() // after the rename: no other process can open the file meanwhile
	for {
		n, err := src.GarbageCollect(now)
		if err != nil {
			return CompactResult{}, err
		}
		if n < gcMaxPerCall {
			break
		}
	}
	tmp := path + ".compact"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return CompactResult{}, fmt.Errorf("embedded store: compact: %w", err)
	}
	dst, err := bbolt.Open(tmp, 0o600, &bbolt.Options{Timeout: lockTimeout})
	if err != nil {
		return CompactResult{}, fmt.Errorf("embedded store: compact: create %s: %w", tmp, err)
	}
	if err := bbolt.Compact(dst, src.db, compactTxMaxSize); err != nil {
		dst.Close()
		os.Remove(tmp)
		return CompactResult{}, fmt.Errorf("embedded store: compact: %w", err)
	}
	if err := dst.Close(); err != nil { // every commit was synced; Close releases the file
		os.Remove(tmp)
		return CompactResult{}, fmt.Errorf("embedded store: compact: %w", err)
	}
	checked, err := openChecked(tmp)
	if err != nil {
		os.Remove(tmp)
		return CompactResult{}, fmt.Errorf("embedded store: compact: the new file fails its checks, the old one is kept: %w", err)
	}
	checked.Close()
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return CompactResult{}, fmt.Errorf("embedded store: compact: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return CompactResult{}, err
	}
	after, err := os.Stat(path)
	if err != nil {
		return CompactResult{}, fmt.Errorf("embedded store: compact: %w", err)
	}
	return CompactResult{Before: st.Size(), After: after.Size()}, nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("embedded store: compact: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("embedded store: compact: sync %s: %w", dir, err)
	}
	return nil
}
