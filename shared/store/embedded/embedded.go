// Package embedded is the store of the local server and of authctl: every part of oauth.Store in
// one bbolt file (go.etcd.io/bbolt) in the data directory, so the service runs locally with no
// AWS at all.
//
// Layout. One bucket per item type, keyed as DynamoDB keys them (a code's or token's hash, a
// grant's id, a client's id, a user's uid), each value the item's JSON. A code carries its
// "used" flag and a grant its "revoked" flag and live token hashes beside the item's own
// fields. The usernames bucket maps a username to its uid. The meta bucket records the layout,
// so that a file of another layout is refused rather than misread.
//
// Transactions. A read is a View; a write is a function that reads what it checks and writes in
// the same bbolt write transaction, so a check and its write can never be separated by another
// writer (bbolt runs one write transaction at a time). Concurrent writes share a transaction
// and its commit (group commit, commit.go), each one's refusal rolling back only its own
// writes; a write returns only once its transaction is written and fsynced, unless
// Options.NoSync. The update functions
// (UpdateClient, UpdateUser, UpdateKeys) call their fn between two transactions, as the
// oauth.Store contract asks, and write only if the item is unchanged (compare-and-swap).
//
// Expiry. Reads filter expired items (an item is gone at its ExpiresAt, as with DynamoDB's
// TTL); GarbageCollect deletes them, in small batches, and the local server calls it every
// 30 seconds. Compact gives the space they took back to the file system.
//
// Integrity. Open refuses a data file that bbolt's own checks find damaged (see integrity.go);
// bbolt's file lock admits one process at a time (ErrLocked after a second).
package embedded

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"go.etcd.io/bbolt"

	"github.com/acmebank/authserver/shared/oauth"
)

// TombstoneTTL is how long a RevokeGrant of a grant not yet written blocks its issuance (and
// the least a revoked grant is kept): longer than any code exchange can be in flight.
const TombstoneTTL = 24 * time.Hour

// FileName is the data file's name in the data directory.
const FileName = "auth.db"

// ErrLocked is the error of Open when another process has the data file open.
var ErrLocked = errors.New("embedded store: the data file is in use by another process")

// lockTimeout is how long Open waits for another process to release the data file.
const lockTimeout = time.Second

// Options tune the embedded store.
type Options struct {
	// NoSync skips the fsync of each commit: much cheaper writes, but a crash of the machine can
	// lose the last commits. For benchmarks and throwaway development data only.
	NoSync bool
	// MaxSize caps the data file in bytes (0: no cap). A write that would need a larger file
	// fails, as on a full disk, with a transient error and writes nothing; the store goes on
	// serving, and writes succeed again once space is found (bbolt reuses the pages deleted
	// items free).
	MaxSize int
	// MaxPendingBytes caps the bytes the pending authorization requests take (0: no cap): a
	// new one beyond it is refused with oauth.ErrCapacity (temporarily_unavailable, 503) until
	// requests are answered or expire. Nobody authenticates before a pending request is
	// stored, so this bounds what a flood from many addresses can make the file keep.
	MaxPendingBytes int64
}

// Store is the embedded implementation of oauth.Store over one bbolt file.
type Store struct {
	db *bbolt.DB
	// maxPending is Options.MaxPendingBytes.
	maxPending int64
	// commitFault, when a test sets it (export_test.go), fails every commit after its
	// transaction has run, as a disk that refuses writes would: the way to drive the service
	// through store faults deterministically. Nil in production.
	commitFault atomic.Pointer[error]
	// rehearse, when a test sets it (export_test.go), runs every write once and rolls it back
	// before running it for real, as a neighbour's refusal in a batch would. False in production.
	rehearse atomic.Bool
	// writers counts the writes in flight: one alone commits at once (commit.go).
	writers atomic.Int32
}

var _ oauth.Store = (*Store)(nil)

// Bucket names.
var (
	bCodes     = []byte("codes")
	bTokens    = []byte("tokens")
	bGrants    = []byte("grants")
	bClients   = []byte("clients")
	bUsers     = []byte("users")
	bUsernames = []byte("usernames")
	bRequests  = []byte("auth_requests")
	bSessions  = []byte("sessions")
	bFailures  = []byte("failures")
	bKeys      = []byte("keys")
	bMeta      = []byte("meta")
	bReplay    = []byte("replay")
	bFactors   = []byte("factors")
	bIATs      = []byte("initial_access_tokens")
	// bBackchannel holds CIBA requests (backchannel.go), forgotten at their KeepUntil.
	bBackchannel = []byte("backchannel_requests")

	allBuckets = [][]byte{bCodes, bTokens, bGrants, bClients, bUsers, bUsernames, bRequests, bSessions, bFailures, bKeys, bMeta, bReplay, bFactors, bIATs, bBackchannel}

	// expiring are the buckets whose items carry an expires_at, which GarbageCollect reads.
	expiring = [][]byte{bCodes, bTokens, bGrants, bRequests, bSessions, bFailures, bReplay, bIATs, bBackchannel}

	keyLayout = []byte("layout")
	keySet    = []byte("set")
)

// layout is the version of the file layout this package reads and writes. Layout 1 was an
// earlier bbolt adapter whose values had a binary header before the JSON.
const layout = "2"

// Open opens (or creates) the store whose file is FileName under dir, creating dir if needed.
// The file is readable by its owner only, since it holds password and secret hashes.
func Open(dir string) (*Store, error) { return OpenWith(dir, Options{}) }

// OpenWith is Open with options. A damaged file is refused with an error that names it and
// says what to do (see openChecked); a file held by another process is ErrLocked.
func OpenWith(dir string, opts Options) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded store: create data directory: %w", err)
	}
	path := filepath.Join(dir, FileName)
	db, err := openChecked(path)
	if err != nil {
		return nil, err
	}
	db.NoSync = opts.NoSync
	db.MaxSize = opts.MaxSize
	db.MaxBatchDelay, db.MaxBatchSize = batchDelay, batchSize
	if err := db.Update(initBuckets); err != nil {
		db.Close()
		return nil, fmt.Errorf("embedded store: %s: %w", path, err)
	}
	if err := db.Update(countPendingBytes); err != nil {
		db.Close()
		return nil, fmt.Errorf("embedded store: %s: count pending requests: %w", path, err)
	}
	return &Store{db: db, maxPending: opts.MaxPendingBytes}, nil
}

// initBuckets creates the buckets of a new file and checks the layout of an existing one.
func initBuckets(tx *bbolt.Tx) error {
	for _, b := range allBuckets {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return fmt.Errorf("create bucket %s: %w", b, err)
		}
	}
	meta := tx.Bucket(bMeta)
	switch v := meta.Get(keyLayout); {
	case v == nil:
		return meta.Put(keyLayout, []byte(layout))
	case string(v) != layout:
		return fmt.Errorf("the file has layout %q, this build reads layout %q: move it away to start empty", v, layout)
	}
	return nil
}

// Close closes the file; the store is unusable afterwards.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("embedded store: close: %w", err)
	}
	return nil
}

// view runs fn in a read-only transaction.
func (s *Store) view(ctx context.Context, fn func(tx *bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.View(fn)
}

// get decodes the value under key into v; ok is false when there is none.
func get(tx *bbolt.Tx, bucket []byte, key string, v any) (ok bool, err error) {
	raw := tx.Bucket(bucket).Get([]byte(key))
	if raw == nil {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		// A value that does not decode is damage the file's structure checks cannot see (see
		// docs/storage.md): the call fails, it is never taken as "not found".
		return false, fmt.Errorf("embedded store: decode a value of %s: %w", bucket, err)
	}
	return true, nil
}

// forEach decodes every value of bucket, in key order, and passes it to fn.
func forEach[T any](tx *bbolt.Tx, bucket []byte, fn func(*T)) error {
	return tx.Bucket(bucket).ForEach(func(_, raw []byte) error {
		v := new(T)
		if err := json.Unmarshal(raw, v); err != nil {
			return fmt.Errorf("embedded store: decode a value of %s: %w", bucket, err)
		}
		fn(v)
		return nil
	})
}

// put stores v's JSON under key.
func put(tx *bbolt.Tx, bucket []byte, key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("embedded store: encode a value of %s: %w", bucket, err)
	}
	return tx.Bucket(bucket).Put([]byte(key), raw)
}

// del deletes the value under key, if any.
func del(tx *bbolt.Tx, bucket []byte, key string) error {
	return tx.Bucket(bucket).Delete([]byte(key))
}

// live reports whether an item expiring at exp is still there at now: strictly before its
// end. A zero now fails closed.
func live(exp, now time.Time) bool { return !now.IsZero() && now.Before(exp) }

// requireExpiry refuses to store an item that should expire but carries no expiry, which would
// otherwise live forever.
func requireExpiry(what string, t time.Time) error {
	if t.IsZero() {
		return fmt.Errorf("embedded store: %s has no expiry", what)
	}
	return nil
}

// Garbage collection works in batches, so the server's writes wait for one batch, never for a
// whole sweep: a transaction reads at most gcScan items and deletes at most gcBatch, and a call
// deletes at most gcMaxPerCall (the rest go at the next call). A batch of 100 holds the writers'
// lock about a millisecond without fsync, as long as the commit of a group of 8 FAPI
// exchanges; one of 1,000 held it about ten (BenchmarkSweepBatch, docs/benchmarks.md).
// They are variables only so that the tests can make them small (export_test.go).
var (
	gcScan       = 500
	gcBatch      = 100
	gcMaxPerCall = 100_000
)

// GarbageCollect deletes the items that have expired at now, at most gcMaxPerCall of them, and
// returns how many it deleted. Reads filter expired items anyway; this reclaims their pages for
// new items (the file itself never shrinks: see Compact).
func (s *Store) GarbageCollect(now time.Time) (int, error) {
	n := 0
	for _, bucket := range expiring {
		var from []byte
		for n < gcMaxPerCall {
			deleted, next, err := s.collectBatch(bucket, from, now, min(gcBatch, gcMaxPerCall-n))
			n += deleted
			if err != nil {
				return n, fmt.Errorf("embedded store: garbage collect: %w", err)
			}
			if next == nil {
				break
			}
			from = next
		}
	}
	return n, nil
}

// collectBatch deletes up to limit expired items of bucket, reading from the key from (the
// first key when nil) at most gcScan items, in one transaction. next is the key to go on from,
// nil when the bucket's end was reached.
func (s *Store) collectBatch(bucket, from []byte, now time.Time, limit int) (deleted int, next []byte, err error) {
	// Through update, like every other write: a sweep's transaction queues with the writers'
	// and shares their commit, instead of taking bbolt's lock again and again ahead of them.
	err = s.update(context.Background(), func(tx *bbolt.Tx) error {
		deleted, next = 0, nil // fn may run again (see update): nothing from a run before
		b := tx.Bucket(bucket)
		c := b.Cursor()
		k, v := c.First()
		if from != nil {
			k, v = c.Seek(from)
		}
		var expired [][]byte
		var freed int64
		for scanned := 0; k != nil; k, v = c.Next() {
			if scanned == gcScan || len(expired) == limit {
				next = append([]byte(nil), k...)
				break
			}
			scanned++
			var item struct {
				ExpiresAt time.Time `json:"expires_at"`
			}
			if err := json.Unmarshal(v, &item); err != nil {
				return fmt.Errorf("decode a value of %s: %w", bucket, err)
			}
			if !live(item.ExpiresAt, now) {
				expired = append(expired, k) // valid until the transaction ends
				freed += int64(len(k) + len(v))
			}
		}
		// Deleted after the walk: bbolt's cursors do not promise to visit every key when the
		// bucket changes under them.
		for _, k := range expired {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		deleted = len(expired)
		if bytes.Equal(bucket, bRequests) && deleted > 0 {
			return setPendingBytes(tx, pendingBytes(tx)-freed)
		}
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	return deleted, next, nil
}

var _ oauth.WriteChecker = (*Store)(nil)

// keyReady is the meta item the readiness probe rewrites.
var keyReady = []byte("ready")

// CheckWrite rewrites one meta item in a committed (fsynced) transaction: a full disk, a file
// that may not grow or an I/O error fails it as the service's own writes would fail.
func (s *Store) CheckWrite(ctx context.Context, now time.Time) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bMeta).Put(keyReady, []byte(now.UTC().Format(time.RFC3339Nano)))
	})
}
