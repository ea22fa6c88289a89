// Package bolt is the embedded store: every part of oauth.Store in one bbolt file under the
// data directory, so the service runs locally with no AWS at all.
//
// Layout. One bucket per item type, values JSON-encoded behind a 9-byte header: the item's
// expiry (8 bytes, big-endian Unix nanoseconds, 0 for items that never expire) and a flag byte
// (a code's "used", a refresh token's "spent", a grant's "revoked"), so that reads can drop
// expired items and spends and revocations can flip a flag without decoding and re-encoding
// the JSON. A grant's live token hashes are kept apart from the grant (grant_tokens), so that
// a refresh rewrites only the list. Unique usernames live in an index bucket (username → uid),
// the grants of a user or a client in two more (length-prefixed owner + grant id → nothing),
// and an expiry index (expiry + bucket id + key → nothing) lets GarbageCollect find expired
// items without scanning every bucket. The meta bucket records the layout version, so that a
// file of another layout is refused rather than misread.
//
// Concurrency. Reads are read-only View transactions, which never wait for writers. Writes on
// the request paths go through a group commit (see write): writes that arrive while a commit
// is in flight share the next transaction and its fsync, and a lone write pays no wait. Work
// that can be done outside the one writer is: values are encoded, and items to be spent or
// updated are read and decoded, before the write is queued; the write then only checks that
// the item is unchanged. Update functions (UpdateClient, UpdateUser, UpdateKeys) run outside
// any transaction, as compare-and-swap. GarbageCollect uses transactions of its own.
package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.etcd.io/bbolt"

	"github.com/acmebank/authserver/shared/oauth"
)

// TombstoneTTL is how long a RevokeGrant of a grant not yet written blocks its issuance (and
// the least a revoked grant is kept): longer than any code exchange can be in flight.
const TombstoneTTL = 24 * time.Hour

// Store is the embedded implementation of oauth.Store over one bbolt file.
type Store struct {
	db *bbolt.DB

	// The group commit of the request-path writes (see write): calls queue here, and one
	// writer goroutine commits everything queued in one transaction.
	mu     sync.Mutex
	queue  []call
	closed bool
	kick   chan struct{}
	done   chan struct{}
}

// call is one queued write: its function and where its result goes.
type call struct {
	fn     func(*bbolt.Tx) error
	result chan error
}

// errClosed is the error of a write after Close.
var errClosed = errors.New("bolt: store is closed")

var _ oauth.Store = (*Store)(nil)

// Bucket names. Each expiring bucket has a one-byte id used in the expiry index.
var (
	bCodes        = []byte("codes")
	bTokens       = []byte("tokens")
	bGrants       = []byte("grants")
	bGrantsByUser = []byte("grants_by_uid")
	bGrantsByCli  = []byte("grants_by_client")
	bGrantTokens  = []byte("grant_tokens")
	bClients      = []byte("clients")
	bUsers        = []byte("users")
	bUsernames    = []byte("usernames")
	bRequests     = []byte("auth_requests")
	bSessions     = []byte("sessions")
	bFailures     = []byte("failures")
	bKeys         = []byte("keys")
	bExpiry       = []byte("expiry")
	bMeta         = []byte("meta")

	allBuckets = [][]byte{bCodes, bTokens, bGrants, bGrantsByUser, bGrantsByCli, bGrantTokens, bClients, bUsers,
		bUsernames, bRequests, bSessions, bFailures, bKeys, bExpiry, bMeta}

	keyLayout = []byte("layout")

	// expiring maps the expiry index's bucket ids to buckets.
	expiring = map[byte][]byte{idCodes: bCodes, idTokens: bTokens, idGrants: bGrants,
		idRequests: bRequests, idSessions: bSessions, idFailures: bFailures}

	keySet = []byte("set")
)

// Bucket ids in the expiry index.
const (
	idCodes byte = iota + 1
	idTokens
	idGrants
	idRequests
	idSessions
	idFailures
)

// Flags in the header's flag byte.
const (
	flagUsed    byte = 1 << iota // a consumed code, a spent refresh token
	flagRevoked                  // a revoked grant, or a tombstone
)

const headerLen = 9

// layout is the version of the file layout this package reads and writes.
const layout = "1"

// Options tune the embedded store.
type Options struct {
	// NoSync skips the fsync of each commit: much cheaper writes, but a crash of the machine can
	// lose the last commits. For benchmarks and throwaway development data only.
	NoSync bool
}

// Open opens (or creates) the store file at path, creating its directory if needed. The file
// is readable by its owner only, since it holds password and secret hashes. A second process
// opening the same file gets an error after a second instead of waiting forever.
func Open(path string) (*Store, error) { return OpenWith(path, Options{}) }

// OpenWith is Open with options.
func OpenWith(path string, opts Options) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("bolt: create data directory: %w", err)
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{
		Timeout: time.Second,
		// The freelist is rebuilt on open instead of written on every commit: cheaper writes
		// on the request paths, at the cost of a scan when the file is opened.
		NoFreelistSync: true,
		FreelistType:   bbolt.FreelistMapType,
	})
	if err == nil {
		db.NoSync = opts.NoSync
	}
	if err != nil {
		return nil, fmt.Errorf("bolt: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
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
			return fmt.Errorf("the file has layout %q, this build reads layout %q", v, layout)
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("bolt: init %s: %w", path, err)
	}
	s := &Store{db: db, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go s.writer()
	return s, nil
}

// Close finishes the queued writes and closes the file; the store is unusable afterwards.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errClosed
	}
	s.closed = true
	close(s.kick)
	s.mu.Unlock()
	<-s.done
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("bolt: close: %w", err)
	}
	return nil
}

// write runs fn in a write transaction shared with the other writes queued meanwhile: a group
// commit, so that concurrent requests share one fsync. Unlike db.Batch it never waits for
// company: a lone write is committed at once, and the writes that arrive while a commit is in
// flight go together in the next one. fn may run more than once (when another function of its
// transaction fails, the others are run again without it), so it must reset whatever it
// reports on entry, and it returns an error only when its transaction must fail; domain
// outcomes (ErrUsed, ErrRevoked…) travel in its own variables.
func (s *Store) write(ctx context.Context, fn func(tx *bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c := call{fn: fn, result: make(chan error, 1)}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errClosed
	}
	s.queue = append(s.queue, c)
	select {
	case s.kick <- struct{}{}:
	default: // the writer is already due to look at the queue
	}
	s.mu.Unlock()
	return <-c.result
}

// writer commits the queued writes until the store is closed.
func (s *Store) writer() {
	defer close(s.done)
	for range s.kick {
		for {
			s.mu.Lock()
			batch := s.queue
			s.queue = nil
			s.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			s.commit(batch)
		}
	}
}

// commit runs a batch in one transaction. A function that fails is taken out and run alone,
// so its error is its own, and the rest are committed without it.
func (s *Store) commit(batch []call) {
	for len(batch) > 0 {
		failed := -1
		err := s.db.Update(func(tx *bbolt.Tx) error {
			for i, c := range batch {
				if err := safeCall(c.fn, tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed < 0 {
			for _, c := range batch {
				c.result <- err
			}
			return
		}
		c := batch[failed]
		batch = append(batch[:failed:failed], batch[failed+1:]...)
		c.result <- s.db.Update(func(tx *bbolt.Tx) error { return safeCall(c.fn, tx) })
	}
}

// safeCall turns a panic of fn into an error, so that one bad write cannot stop the writer.
func safeCall(fn func(*bbolt.Tx) error, tx *bbolt.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("bolt: write panicked: %v", p)
		}
	}()
	return fn(tx)
}

// read runs fn in a read-only transaction.
func (s *Store) read(ctx context.Context, fn func(tx *bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.View(fn)
}

// --- record encoding ---

// expiryOf is a time as the header and the expiry index store it: Unix nanoseconds, never 0
// or negative for a real time (0 means "never expires").
func expiryOf(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	n := t.UnixNano()
	if n < 1 {
		n = 1
	}
	return uint64(n)
}

// encode is the stored form of v: header then JSON. Callers encode before they queue a write,
// so that the JSON work runs in their own goroutines rather than in the one writer.
func encode(v any, exp time.Time, flags byte) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	val := make([]byte, headerLen+len(body))
	binary.BigEndian.PutUint64(val[:8], expiryOf(exp))
	val[8] = flags
	copy(val[headerLen:], body)
	return val, nil
}

// record is a stored value split into its header and JSON.
type record struct {
	exp   uint64
	flags byte
	body  []byte
}

func split(v []byte) (record, error) {
	if len(v) < headerLen {
		return record{}, errors.New("corrupt record: short header")
	}
	return record{exp: binary.BigEndian.Uint64(v[:8]), flags: v[8], body: v[headerLen:]}, nil
}

// live reports whether the record has not expired at now. A zero now fails closed.
func (r record) live(now time.Time) bool {
	return r.exp == 0 || (!now.IsZero() && uint64(max(now.UnixNano(), 0)) < r.exp)
}

// getRaw returns the record under key whether or not it has expired. Its body is only valid
// inside the transaction.
func getRaw(b *bbolt.Bucket, key []byte) (record, bool, error) {
	v := b.Get(key)
	if v == nil {
		return record{}, false, nil
	}
	r, err := split(v)
	if err != nil {
		return record{}, false, err
	}
	return r, true, nil
}

// get returns the live record under key, or ok=false when there is none or it has expired at
// now. A zero now fails closed: every expiring item counts as expired.
func get(b *bbolt.Bucket, key []byte, now time.Time) (record, bool, error) {
	r, ok, err := getRaw(b, key)
	if err != nil || !ok {
		return record{}, false, err
	}
	if !r.live(now) {
		return record{}, false, nil
	}
	return r, true, nil
}

// put stores an encoded value under key and, for expiring buckets (id != 0), indexes its
// expiry for GarbageCollect.
func put(tx *bbolt.Tx, bucket []byte, id byte, key, val []byte) error {
	if err := tx.Bucket(bucket).Put(key, val); err != nil {
		return fmt.Errorf("put %s: %w", bucket, err)
	}
	if exp := binary.BigEndian.Uint64(val[:8]); id != 0 && exp != 0 {
		if err := tx.Bucket(bExpiry).Put(expiryKey(exp, id, key), nil); err != nil {
			return fmt.Errorf("put expiry index: %w", err)
		}
	}
	return nil
}

// setHeader rewrites a stored value with another expiry and flags, the JSON left as it is.
// A later expiry is indexed too.
func setHeader(tx *bbolt.Tx, bucket []byte, id byte, key []byte, r record, exp uint64, flags byte) error {
	val := make([]byte, headerLen+len(r.body))
	binary.BigEndian.PutUint64(val[:8], exp)
	val[8] = flags
	copy(val[headerLen:], r.body)
	if exp == r.exp {
		id = 0 // already indexed
	}
	return put(tx, bucket, id, key, val)
}

func expiryKey(exp uint64, id byte, key []byte) []byte {
	k := make([]byte, 9+len(key))
	binary.BigEndian.PutUint64(k[:8], exp)
	k[8] = id
	copy(k[9:], key)
	return k
}

// ownerKey is an index key of the grants of a user or a client: the owner length-prefixed,
// so that no owner's prefix is another's.
func ownerKey(owner, grantID string) []byte {
	k := make([]byte, 0, 2+len(owner)+len(grantID))
	k = binary.BigEndian.AppendUint16(k, uint16(len(owner)))
	k = append(k, owner...)
	return append(k, grantID...)
}

func decode(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decode %T: %w", v, err)
	}
	return nil
}

// requireExpiry refuses to store an item that should expire but carries no expiry, which would
// otherwise live forever.
func requireExpiry(what string, t time.Time) error {
	if t.IsZero() {
		return fmt.Errorf("bolt: %s has no expiry", what)
	}
	return nil
}

// preRead is a copy of a stored value read outside the writer, so that the writer only has to
// check that it is unchanged instead of decoding it again.
type preRead struct {
	val []byte // nil when there was none
}

// readCopy reads a copy of the value under key in a read-only transaction.
func (s *Store) readCopy(ctx context.Context, bucket, key []byte) (preRead, error) {
	var p preRead
	err := s.read(ctx, func(tx *bbolt.Tx) error {
		if v := tx.Bucket(bucket).Get(key); v != nil {
			p.val = bytes.Clone(v)
		}
		return nil
	})
	return p, err
}

// sameBody reports whether the value in the transaction still has the pre-read JSON (its
// header may have changed).
func (p preRead) sameBody(r record) bool {
	return len(p.val) >= headerLen && bytes.Equal(p.val[headerLen:], r.body)
}
