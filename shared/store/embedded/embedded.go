// Package embedded is the store of the local server and of authctl: every part of oauth.Store
// held in memory as typed Go values, made durable by an append-only log in the data directory,
// so the service runs locally with no AWS at all and a request pays no encoding, decoding or
// B+tree work for its reads.
//
// Memory. One map per item type (codes, tokens, grants, clients, users with a username index,
// pending authorization requests, sessions, failure counters) and the key registry, behind one
// RWMutex. Reads take the read lock, copy the item out (slices cloned, so a caller can never
// change what is stored) and drop it if it has expired. Expired items are deleted by
// GarbageCollect; until then every read filters them, as the DynamoDB store does with TTL.
//
// Durability. Every change is one frame appended to the log (log.go): the entries of one
// operation (an issuance is the grant and its two tokens) go in one checksummed frame, so a
// replay applies an operation whole or not at all. A writer checks and changes the memory and
// appends its frame under the write lock, so the log's order is the order in which changes
// were made; it then commits without the lock: the first writer to reach the file writes and
// fsyncs every frame queued so far, so that writes arriving together share one fsync, and a
// lone write pays no hand-off. A write returns only once it is durable. Until then its change is
// already visible to other requests, which can only be seen by someone holding the secret of
// a token or code that has not been handed out yet, or as an ErrUsed that a later frame (the
// replayed revocation) depends on; either way the log keeps the order. If writing the log ever
// fails, the store refuses every later call: memory would otherwise run ahead of the disk.
//
// Opening replays the log (dropping a torn last frame that a crash can leave), then rewrites
// it as a snapshot of the live items; a running store compacts the same way in a goroutine of
// its own when the log has grown to several times its last snapshot, holding the lock only to
// copy pointers (items are never changed in place, see state.go) and writing the snapshot while
// requests go on (see compactLive). The file admits one process at a time (an exclusive
// flock): a second Open fails with ErrLocked after a second.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// TombstoneTTL is how long a RevokeGrant of a grant not yet written blocks its issuance (and
// the least a revoked grant is kept): longer than any code exchange can be in flight.
const TombstoneTTL = 24 * time.Hour

// FileName is the log's name in the data directory, and LockName the file whose flock says
// that a process has the store open.
const (
	FileName = "auth.log"
	LockName = "auth.lock"
)

// ErrLocked is the error of Open when another process has the log open.
var ErrLocked = errors.New("embedded store: the log is in use by another process")

// errClosed is the error of a call after Close.
var errClosed = errors.New("embedded store: closed")

// Options tune the embedded store.
type Options struct {
	// NoSync skips the fsync of each commit: much cheaper writes, but a crash of the machine can
	// lose the last commits. For benchmarks and throwaway development data only.
	NoSync bool
}

// Store is the embedded implementation of oauth.Store.
type Store struct {
	// mu guards the items, the pending log data and the state flags below.
	mu       sync.RWMutex
	codes    map[string]*codeItem
	tokens   map[string]*oauth.Token
	grants   map[string]*grantItem
	clients  map[string]*oauth.Client
	users    map[string]*oauth.User
	names    map[string]string // username → uid
	requests map[string]*oauth.AuthRequest
	sessions map[string]*oauth.Session
	failures map[string]*failureCounter
	keys     oauth.KeySet

	log *wal
}

// codeItem is a stored code and whether it was consumed.
type codeItem struct {
	code oauth.Code
	used bool
}

// grantItem is a stored grant: the grant, whether it is revoked (a tombstone is a revoked
// grant of which only the id and the end are known), and the hashes of its live tokens.
type grantItem struct {
	grant   oauth.Grant
	revoked bool
	tokens  []string
}

// failureCounter is a login-failure counter of InteractionStore.
type failureCounter struct {
	Count     int       `json:"count"`
	ExpiresAt time.Time `json:"expires_at"`
}

var _ oauth.Store = (*Store)(nil)

// Open opens (or creates) the store whose log is FileName under dir, creating dir if needed.
// The log is readable by its owner only, since it holds password and secret hashes.
func Open(dir string) (*Store, error) { return OpenWith(dir, Options{}) }

// OpenWith is Open with options.
func OpenWith(dir string, opts Options) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded store: create data directory: %w", err)
	}
	s := newStore()
	w, err := openWAL(filepath.Join(dir, FileName), opts.NoSync, s)
	if err != nil {
		return nil, err
	}
	s.log = w
	return s, nil
}

func newStore() *Store {
	return &Store{
		codes:    make(map[string]*codeItem),
		tokens:   make(map[string]*oauth.Token),
		grants:   make(map[string]*grantItem),
		clients:  make(map[string]*oauth.Client),
		users:    make(map[string]*oauth.User),
		names:    make(map[string]string),
		requests: make(map[string]*oauth.AuthRequest),
		sessions: make(map[string]*oauth.Session),
		failures: make(map[string]*failureCounter),
	}
}

// Close writes what is pending and closes the log; the store is unusable afterwards.
func (s *Store) Close() error { return s.log.close() }

// change runs fn with the write lock held, once the log is known to take writes. fn checks the
// items and changes them (through the mutators of state.go), and returns the frame body that
// records the change, or nil when it changed nothing, or an error (a domain outcome such as
// ErrUsed) when it changed nothing either. change returns fn's error, or, once the frame is
// appended and the lock released, the outcome of committing it.
func (s *Store) change(ctx context.Context, fn func() ([]byte, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if err := s.log.usable(); err != nil {
		s.mu.Unlock()
		return err
	}
	body, err := fn()
	if err != nil || body == nil {
		s.mu.Unlock()
		return err
	}
	b := s.log.append(body)
	s.mu.Unlock()
	return s.log.commit(b)
}

// view runs fn with the read lock held, once the store is known to be usable.
func (s *Store) view(ctx context.Context, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.log.usable(); err != nil {
		return err
	}
	return fn()
}

// lookup returns the stored item under key (ErrNotFound when there is none). Items are never
// changed once stored, so the caller may read it after the lock is released.
func lookup[T any](ctx context.Context, s *Store, items map[string]*T, key string) (*T, error) {
	var p *T
	err := s.view(ctx, func() error {
		var ok bool
		if p, ok = items[key]; !ok {
			return oauth.ErrNotFound
		}
		return nil
	})
	return p, err
}

// errStale is a compare-and-swap's finding that the item changed since it was read.
var errStale = errors.New("embedded store: changed since read")

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

// The clone functions copy a stored value out (or in) with its slices, so that a caller never
// shares memory with the store.

func cloneGrant(g oauth.Grant) oauth.Grant {
	g.Scopes = slices.Clone(g.Scopes)
	return g
}

func cloneToken(t oauth.Token) oauth.Token {
	t.Scopes = slices.Clone(t.Scopes)
	t.Grant = cloneGrant(t.Grant)
	t.Live = slices.Clone(t.Live)
	return t
}

func cloneCode(c oauth.Code) oauth.Code {
	c.Grant = cloneGrant(c.Grant)
	return c
}

func cloneClient(c oauth.Client) oauth.Client {
	c.SecretHashes = slices.Clone(c.SecretHashes)
	c.RedirectURIs = slices.Clone(c.RedirectURIs)
	c.Scopes = slices.Clone(c.Scopes)
	return c
}

func cloneRequest(r oauth.AuthRequest) oauth.AuthRequest {
	r.Scopes = slices.Clone(r.Scopes)
	return r
}

func cloneKeys(k oauth.KeySet) oauth.KeySet {
	k.Keys = slices.Clone(k.Keys)
	return k
}
