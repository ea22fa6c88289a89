package oauth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// The keys of the DPoP server nonces (RFC 9449 8). A nonce is an HMAC under a random 32-byte
// key that every instance of a deployment (and, in multi-region, both regions) reads from the
// store: the keys are kept only wrapped (in AWS, encrypted by KMS under the stack's wrapping key
// with an encryption context of their own, shared/keys/datakey), never in an environment
// variable. The rotation adds a key on its schedule and keeps the older ones for nonces in
// flight; a nonce names the key that made it, so an instance meeting a newer key reloads.

// NonceKeyLen is the length of a nonce key: 32 random bytes, the HMAC-SHA-256 block's worth.
const NonceKeyLen = 32

const (
	// NonceKeyLife is how long a nonce key is the current one before the rotation adds the
	// next.
	NonceKeyLife = 24 * time.Hour
	// NonceKeyOverlap is how long a key is kept after its successor was made: longer than an
	// instance issues with it after the rotation (NonceKeyRefresh) plus a nonce's longest life
	// (two nonce periods), so no nonce in flight dies with its key.
	NonceKeyOverlap = time.Hour
	// NonceKeyRefresh is how often an instance reads the keys again, so a rotation takes
	// effect without a restart.
	NonceKeyRefresh = 5 * time.Minute
	// NonceKeyMissInterval bounds the reloads a nonce of an unknown, newer key causes: one
	// per interval per instance, however many such nonces arrive.
	NonceKeyMissInterval = time.Minute
	// nonceKeyLoadTimeout bounds a reload made on the request path.
	nonceKeyLoadTimeout = 5 * time.Second
)

// ErrNoNonceKey is a store without a nonce key: the rotation has not made one yet.
var ErrNoNonceKey = errors.New("no DPoP nonce key in the store: run the key rotation")

// NonceKey is one key of the DPoP server nonces as the store keeps it: wrapped only.
type NonceKey struct {
	// ID numbers the keys in the order they were made (1, 2, …); a nonce carries it.
	ID int64 `json:"id" dynamodbav:"id"`
	// Wrapped is the key as its NonceKeyWrapper returned it (a KMS ciphertext in AWS).
	Wrapped   []byte    `json:"wrapped" dynamodbav:"wrapped"`
	CreatedAt time.Time `json:"created_at" dynamodbav:"created_at"`
}

// NonceKeySet is every nonce key kept, with the version its compare-and-swap checks.
type NonceKeySet struct {
	Keys    []NonceKey `json:"keys" dynamodbav:"keys"`
	Version int64      `json:"version" dynamodbav:"version"`
}

// Newest returns the key made last, if there is one.
func (s NonceKeySet) Newest() (NonceKey, bool) {
	if len(s.Keys) == 0 {
		return NonceKey{}, false
	}
	return slices.MaxFunc(s.Keys, func(a, b NonceKey) int { return cmpInt64(a.ID, b.ID) }), true
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// NonceKeyStore keeps the DPoP nonce keys as one versioned set, like the signing-key registry
// (KeyStore): reading them is one read, a rotation one compare-and-swap.
type NonceKeyStore interface {
	// NonceKeys returns the set (empty, Version 0, when none was ever written).
	NonceKeys(ctx context.Context) (NonceKeySet, error)
	// UpdateNonceKeys applies fn to the set and writes it if its version is unchanged;
	// otherwise it returns ErrConflict and writes nothing. An error from fn writes nothing.
	UpdateNonceKeys(ctx context.Context, fn func(NonceKeySet) (NonceKeySet, error)) error
}

// NonceKeyWrapper makes nonce keys and unwraps them: in AWS a KMS symmetric key under the
// nonce keys' own encryption context (datakey.NonceKeys), locally the local server's own
// (localkey.NonceKeys).
type NonceKeyWrapper interface {
	// NewNonceKey makes a random NonceKeyLen-byte key and returns it wrapped only.
	NewNonceKey(ctx context.Context) ([]byte, error)
	// UnwrapNonceKey returns the key wrapped is.
	UnwrapNonceKey(ctx context.Context, wrapped []byte) ([]byte, error)
}

// NonceKeyReport says what a rotation of the nonce keys did: ids only, never key material.
type NonceKeyReport struct {
	Current int64   `json:"current"`
	Kept    []int64 `json:"kept"`
	Made    bool    `json:"made"`
	Dropped []int64 `json:"dropped,omitempty"`
}

// RotateNonceKeys makes a nonce key when there is none or the newest is NonceKeyLife old, and
// drops the keys whose successor is more than NonceKeyOverlap old. A run with nothing due
// writes nothing; a lost race is ErrConflict and writes nothing (the run is idempotent: run it
// again).
func RotateNonceKeys(ctx context.Context, store NonceKeyStore, w NonceKeyWrapper, now time.Time) (NonceKeyReport, error) {
	var rep NonceKeyReport
	errUnchanged := errors.New("unchanged")
	err := store.UpdateNonceKeys(ctx, func(set NonceKeySet) (NonceKeySet, error) {
		rep = NonceKeyReport{}
		next := NonceKeySet{Version: set.Version}
		newest, ok := set.Newest()
		if !ok || !now.Before(newest.CreatedAt.Add(NonceKeyLife)) {
			wrapped, err := w.NewNonceKey(ctx)
			if err != nil {
				return set, fmt.Errorf("make a DPoP nonce key: %w", err)
			}
			newest = NonceKey{ID: newest.ID + 1, Wrapped: wrapped, CreatedAt: now}
			set.Keys = append(slices.Clone(set.Keys), newest)
			rep.Made = true
		}
		rep.Current = newest.ID
		for _, k := range set.Keys {
			if succ, ok := successor(set.Keys, k.ID); ok && now.Sub(succ.CreatedAt) > NonceKeyOverlap {
				rep.Dropped = append(rep.Dropped, k.ID)
				continue
			}
			next.Keys = append(next.Keys, k)
			rep.Kept = append(rep.Kept, k.ID)
		}
		if !rep.Made && len(rep.Dropped) == 0 {
			return set, errUnchanged
		}
		return next, nil
	})
	if errors.Is(err, errUnchanged) {
		return rep, nil
	}
	if err != nil {
		return NonceKeyReport{}, fmt.Errorf("rotate DPoP nonce keys: %w", err)
	}
	return rep, nil
}

// successor is the key made right after id.
func successor(keys []NonceKey, id int64) (NonceKey, bool) {
	var best NonceKey
	for _, k := range keys {
		if k.ID > id && (best.ID == 0 || k.ID < best.ID) {
			best = k
		}
	}
	return best, best.ID != 0
}

// NonceKeyring is the DPoPNonces of a deployment whose nonce keys live in the store: it reads
// them at start (NewNonceKeyring fails without one, so no instance runs with the nonce check
// skipped), issues nonces with the newest, accepts those of every key kept, reads the keys again
// every NonceKeyRefresh, and at once (at most every NonceKeyMissInterval, concurrent misses
// sharing one read) when a nonce names a key newer than any it knows.
type NonceKeyring struct {
	store NonceKeyStore
	wrap  NonceKeyWrapper
	log   *slog.Logger
	// Period is how long one nonce is issued for (DefaultNoncePeriod when zero); a nonce is
	// accepted in its period and the next.
	Period time.Duration

	loads singleflight.Group
	mu    sync.RWMutex
	keys  map[int64][]byte // id → plaintext key, the keys the store keeps
	cur   int64
	// loadedAt is when the keys were last read; missAt when a miss last caused a read.
	loadedAt, missAt time.Time
}

var _ DPoPNonces = (*NonceKeyring)(nil)

// NewNonceKeyring reads the nonce keys from store and unwraps them; a store without a key, or a
// key that does not unwrap, is an error (the function fails at start: closed).
func NewNonceKeyring(ctx context.Context, store NonceKeyStore, w NonceKeyWrapper, log *slog.Logger, now time.Time) (*NonceKeyring, error) {
	r := &NonceKeyring{store: store, wrap: w, log: log, keys: map[int64][]byte{}}
	if err := r.load(ctx, now); err != nil {
		return nil, err
	}
	return r, nil
}

// load reads and unwraps the keys; a key already unwrapped is not unwrapped again.
func (r *NonceKeyring) load(ctx context.Context, now time.Time) error {
	set, err := r.store.NonceKeys(ctx)
	if err != nil {
		return fmt.Errorf("read the DPoP nonce keys: %w", err)
	}
	newest, ok := set.Newest()
	if !ok {
		return ErrNoNonceKey
	}
	r.mu.RLock()
	known := r.keys
	r.mu.RUnlock()
	keys := make(map[int64][]byte, len(set.Keys))
	for _, k := range set.Keys {
		if plain, ok := known[k.ID]; ok {
			keys[k.ID] = plain
			continue
		}
		plain, err := r.wrap.UnwrapNonceKey(ctx, k.Wrapped)
		if err != nil {
			return fmt.Errorf("unwrap DPoP nonce key %d: %w", k.ID, err)
		}
		if len(plain) != NonceKeyLen {
			return fmt.Errorf("DPoP nonce key %d is %d bytes, want %d", k.ID, len(plain), NonceKeyLen)
		}
		keys[k.ID] = plain
	}
	r.mu.Lock()
	r.keys, r.cur, r.loadedAt = keys, newest.ID, now
	r.mu.Unlock()
	return nil
}

// reload reads the keys again, one read however many callers ask at once; a failure keeps the
// keys known (they are still valid) and is logged.
func (r *NonceKeyring) reload(reason string, now time.Time) {
	_, _, _ = r.loads.Do("load", func() (any, error) {
		ctx, cancel := context.WithTimeout(context.Background(), nonceKeyLoadTimeout)
		defer cancel()
		err := r.load(ctx, now)
		if err != nil && r.log != nil {
			r.log.Error("DPoP nonce keys: reload failed, keeping the keys known", slog.String("reason", reason), slog.Any("err", err))
		}
		return nil, err
	})
}

func (r *NonceKeyring) period() time.Duration {
	if r.Period <= 0 {
		return DefaultNoncePeriod
	}
	return r.Period
}

// Current is the nonce of the period now is in, under the newest key.
func (r *NonceKeyring) Current(now time.Time) string {
	r.mu.RLock()
	due := now.Sub(r.loadedAt) >= NonceKeyRefresh
	r.mu.RUnlock()
	if due {
		r.reload("refresh", now)
	}
	r.mu.RLock()
	id, key := r.cur, r.keys[r.cur]
	r.mu.RUnlock()
	return nonceOf(key, id, now.UnixNano()/int64(r.period()))
}

// Valid accepts a nonce of the current period or the one before, under any key kept.
func (r *NonceKeyring) Valid(nonce string, now time.Time) bool {
	raw, err := base64.RawURLEncoding.DecodeString(nonce)
	if err != nil || len(raw) != nonceLen {
		return false
	}
	counter := int64(binary.BigEndian.Uint64(raw[0:8]))
	id := int64(binary.BigEndian.Uint64(raw[8:16]))
	c := now.UnixNano() / int64(r.period())
	if counter != c && counter != c-1 {
		return false
	}
	key, ok := r.key(id, now)
	return ok && hmac.Equal([]byte(nonce), []byte(nonceOf(key, id, counter)))
}

// key returns the key id, reading the keys again if id is newer than every key known and no
// miss caused a read in the last NonceKeyMissInterval.
func (r *NonceKeyring) key(id int64, now time.Time) ([]byte, bool) {
	r.mu.RLock()
	key, ok := r.keys[id]
	newer := id > r.cur
	r.mu.RUnlock()
	if ok || !newer {
		return key, ok
	}
	_, _, _ = r.loads.Do("miss", func() (any, error) {
		r.mu.Lock()
		if _, ok := r.keys[id]; ok || now.Sub(r.missAt) < NonceKeyMissInterval {
			r.mu.Unlock()
			return nil, nil
		}
		r.missAt = now
		r.mu.Unlock()
		r.reload("a nonce of a newer key", now)
		return nil, nil
	})
	r.mu.RLock()
	key, ok = r.keys[id]
	r.mu.RUnlock()
	return key, ok
}

// nonceLen is a nonce's length before base64url: the period's number, the key's id and 16
// bytes of HMAC-SHA-256.
const nonceLen = 8 + 8 + 16

// nonceOf is the nonce of period counter under key id: base64url(counter ‖ id ‖ HMAC).
func nonceOf(key []byte, id, counter int64) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[0:8], uint64(counter))
	binary.BigEndian.PutUint64(b[8:16], uint64(id))
	m := hmac.New(sha256.New, key)
	m.Write([]byte("authserver dpop nonce\x00"))
	m.Write(b[:])
	return base64.RawURLEncoding.EncodeToString(append(b[:], m.Sum(nil)[:16]...))
}
