package embedded

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"runtime/debug"
	"strings"

	"go.etcd.io/bbolt"
	bberrors "go.etcd.io/bbolt/errors"
)

// The data file is checked whole when it is opened, so that the server refuses to start on a
// truncated or structurally damaged file rather than serve part of its data (a spent refresh
// token spendable again, a revoked grant live again). What bbolt can see is checked, in order:
//
//  0. The file is not empty: bbolt would take an empty file for a new one and start afresh.
//  1. bbolt.Open: both meta pages are read; Open fails when neither is valid.
//  2. Both meta pages valid (magic, version, checksum). bbolt itself falls back silently to the
//     other meta page, which is the previous commit: a flipped bit in the newest meta page
//     would take the store back one write. The check is ours because bbolt exposes none.
//  3. The file is at least as long as the pages the newest meta page says it has: a truncated
//     file, which bbolt would otherwise map and fault on.
//  4. Every bucket and every key walked through bbolt's cursors, and tx.Check(): page types,
//     tree shape, key order, every page either reachable once or free.
//
// Values are not checked: bbolt keeps no checksum of them (docs/storage.md says so).
//
// bbolt reads the file through a memory map and trusts its page headers: some damage makes it
// panic or read outside the mapped file instead of returning an error. The checks run in this
// goroutine with debug.SetPanicOnFault, so such a fault is a panic, and a panic is recovered
// into the damaged-file error. (tx.Check walks in a goroutine of its own, where a fault would
// stop the process: the cursor walk of step 4 goes first, here, and reads every page it will.) After a panic inside bbolt.Open, bbolt has no chance
// to release the file (its lock and map): the caller is about to stop on the error anyway.

// metaSize is the part of a bbolt meta page that its checksum covers, then the checksum: magic,
// version, page size, flags (4 bytes each), root bucket (16), freelist, high-water mark and
// transaction id (8 each), checksum (8). A meta page starts after the 16-byte page header.
const (
	pageHeaderSize = 16
	metaSumOffset  = 56
	metaSize       = metaSumOffset + 8
	metaMagic      = 0xED0CDAED
	metaVersion    = 2
)

// openChecked opens the bbolt file at path and checks it whole (see above). The errors:
// ErrLocked when another process holds it, a damaged-file error naming it and saying what to
// do, or the file system's error.
func openChecked(path string) (db *bbolt.DB, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			if db != nil {
				db.Close()
			}
			db, err = nil, damaged(path, fmt.Errorf("bbolt stopped reading it: %v", p))
		}
	}()
	if st, err := os.Stat(path); err == nil && st.Size() == 0 {
		// bbolt would take an empty file for a new one. Open writes a new file's first pages
		// and syncs them before it returns, so an empty file is one cut to nothing (or, for an
		// instant, a file another process is creating: the one false alarm).
		return nil, damaged(path, errors.New("the file is empty"))
	}
	db, err = bbolt.Open(path, 0o600, &bbolt.Options{Timeout: lockTimeout})
	var pathErr *fs.PathError
	switch {
	case errors.Is(err, bberrors.ErrTimeout):
		return nil, fmt.Errorf("%w: %s (stop the server first)", ErrLocked, path)
	case errors.As(err, &pathErr):
		return nil, fmt.Errorf("embedded store: open %s: %w", path, err)
	case err != nil:
		return nil, damaged(path, err)
	}
	if err := check(db); err != nil {
		db.Close()
		return nil, damaged(path, err)
	}
	return db, nil
}

// damaged is the error of a data file that fails its checks.
func damaged(path string, cause error) error {
	return fmt.Errorf("embedded store: %s is damaged (%w): the server will not start on part of its data; restore the file from a backup, or move it away to start with an empty store", path, cause)
}

// check runs steps 2 to 4 on an open file.
func check(db *bbolt.DB) error {
	if err := checkMetaPages(db.Path(), db.Info().PageSize); err != nil {
		return err
	}
	return db.View(func(tx *bbolt.Tx) error {
		st, err := os.Stat(db.Path())
		if err != nil {
			return err
		}
		if st.Size() < tx.Size() {
			return fmt.Errorf("truncated: %d bytes, its meta page says %d", st.Size(), tx.Size())
		}
		if err := walk(tx.Cursor()); err != nil {
			return err
		}
		var found []string
		for err := range tx.Check() {
			if len(found) < 3 { // the first few say enough; the rest are drained
				found = append(found, err.Error())
			}
		}
		if len(found) > 0 {
			return errors.New(strings.Join(found, "; "))
		}
		return nil
	})
}

// walk visits every key of every bucket under c, so that a broken page shows here, in this
// goroutine, where a fault is a recoverable panic (see above).
func walk(c *bbolt.Cursor) error {
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v != nil {
			continue
		}
		if b := c.Bucket().Bucket(k); b != nil {
			if err := walk(b.Cursor()); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkMetaPages checks both meta pages' magic, version and checksum, as bbolt's own
// validation does (FNV-64a of the fields before the checksum, in the machine's byte order),
// reading each meta record past its page header. It reads through a handle of its own: bbolt
// exposes neither its map nor its meta pages, and its lock (flock, or on Windows a byte-range
// lock placed beyond the end of the file) leaves the file readable.
func checkMetaPages(path string, pageSize int) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for i := range 2 {
		m := make([]byte, metaSize)
		if _, err := f.ReadAt(m, int64(i*pageSize+pageHeaderSize)); err != nil {
			return fmt.Errorf("meta page %d: %w", i, err)
		}
		h := fnv.New64a()
		h.Write(m[:metaSumOffset])
		switch {
		case binary.NativeEndian.Uint32(m[0:4]) != metaMagic:
			return fmt.Errorf("meta page %d: not a bbolt meta page", i)
		case binary.NativeEndian.Uint32(m[4:8]) != metaVersion:
			return fmt.Errorf("meta page %d: version %d", i, binary.NativeEndian.Uint32(m[4:8]))
		case binary.NativeEndian.Uint64(m[metaSumOffset:]) != h.Sum64():
			return fmt.Errorf("meta page %d: checksum mismatch", i)
		}
	}
	return nil
}
