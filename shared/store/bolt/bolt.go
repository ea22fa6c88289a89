// Package bolt is the embedded store: every part of oauth.Store in one bbolt file under the
// data directory, so the service runs locally with no AWS at all.
//
// Layout. One bucket per item type, values JSON-encoded behind a 9-byte header: the item's
// expiry (8 bytes, big-endian Unix nanoseconds, 0 for items that never expire) and a flag byte
// (a code's "used", a refresh token's "spent"), so that reads can drop expired items and
// single-use spends can flip a flag without decoding and re-encoding the JSON. Unique usernames
// live in an index bucket (username → uid), the grants of a user or a client in two more
// (length-prefixed owner + grant id → nothing), and an expiry index (expiry + bucket + key →
// nothing) lets GarbageCollect find expired items without scanning every bucket.
//
// Concurrency. Reads are read-only View transactions, which never wait for writers. Writes on
// the request paths go through db.Batch, which coalesces concurrent writers into one
// transaction and one fsync; their functions only ever report a domain outcome (ErrUsed,
// ErrRevoked…) through variables they reset on entry, and return an error only when the
// transaction itself must fail, because Batch re-runs functions when any of them fails.
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
}

var _ oauth.Store = (*Store)(nil)

// Bucket names. Each expiring bucket has a one-byte id used in the expiry index.
var (
	bCodes        = []byte("codes")
	bTokens       = []byte("tokens")
	bGrants       = []byte("grants")
	bGrantsByUser = []byte("grants_by_uid")
	bGrantsByCli  = []byte("grants_by_client")
	bClients      = []byte("clients")
	bUsers        = []byte("users")
	bUsernames    = []byte("usernames")
	bRequests     = []byte("auth_requests")
	bSessions     = []byte("sessions")
	bFailures     = []byte("failures")
	bKeys         = []byte("keys")
	bExpiry       = []byte("expiry")

	allBuckets = [][]byte{bCodes, bTokens, bGrants, bGrantsByUser, bGrantsByCli, bClients, bUsers,
		bUsernames, bRequests, bSessions, bFailures, bKeys, bExpiry}

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
	flagUsed byte = 1 << iota // a consumed code, a spent refresh token
)

const headerLen = 9

// Open opens (or creates) the store file at path, creating its directory if needed. The file
// is readable by its owner only, since it holds password and secret hashes. A second process
// opening the same file gets an error after a second instead of waiting forever.
func Open(path string) (*Store, error) {
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
	if err != nil {
		return nil, fmt.Errorf("bolt: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return fmt.Errorf("create bucket %s: %w", b, err)
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("bolt: init %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// Close closes the file; the store is unusable afterwards.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("bolt: close: %w", err)
	}
	return nil
}

// write runs fn in a batched write transaction (see the package comment for what fn may do).
func (s *Store) write(ctx context.Context, fn func(tx *bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Batch(fn)
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

// encode is the stored form of v: header then JSON.
func encode(v any, exp time.Time, flags byte) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(512)
	var h [headerLen]byte
	binary.BigEndian.PutUint64(h[:8], expiryOf(exp))
	h[8] = flags
	buf.Write(h[:])
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return buf.Bytes(), nil
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

// live reports whether the record has not expired at now.
func (r record) live(now time.Time) bool {
	return r.exp == 0 || (!now.IsZero() && uint64(max(now.UnixNano(), 0)) < r.exp)
}

// getRaw returns the record under key whether or not it has expired.
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

// put stores v under key with its expiry and, for expiring buckets, indexes the expiry.
func put(tx *bbolt.Tx, bucket []byte, id byte, key []byte, v any, exp time.Time, flags byte) error {
	val, err := encode(v, exp, flags)
	if err != nil {
		return err
	}
	if err := tx.Bucket(bucket).Put(key, val); err != nil {
		return fmt.Errorf("put %s: %w", bucket, err)
	}
	if id != 0 && !exp.IsZero() {
		if err := tx.Bucket(bExpiry).Put(expiryKey(expiryOf(exp), id, key), nil); err != nil {
			return fmt.Errorf("put expiry index: %w", err)
		}
	}
	return nil
}

// setFlags rewrites a stored value with other flags; the JSON is left as it is.
func setFlags(b *bbolt.Bucket, key []byte, r record, flags byte) error {
	val := make([]byte, headerLen+len(r.body))
	binary.BigEndian.PutUint64(val[:8], r.exp)
	val[8] = flags
	copy(val[headerLen:], r.body)
	return b.Put(key, val)
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

func decode(r record, v any) error {
	if err := json.Unmarshal(r.body, v); err != nil {
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
