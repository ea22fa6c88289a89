package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/sync/singleflight"
)

// errUnreadableClientKeys is answered when a client's registered keys cannot be read.
var errUnreadableClientKeys = errors.New("the client's registered keys are unreadable")

// ErrClientKeysUnavailable is answered (as the description of an invalid_client) when the keys
// of a client registered with a jwks_uri could not be fetched or were refused; the cause goes
// to the log only, so a request does not learn what the server's network said.
var ErrClientKeysUnavailable = errors.New("the client's keys could not be fetched from its jwks_uri")

// clientKeys is the one lookup of the public keys a client signs with: its client assertions
// (private_key_jwt) and anything else it signs are verified with what this returns. kid, when
// not empty, narrows the set to the keys of that id. A client registered with a jwks_uri gets
// the keys published there, through s.ClientJWKS (its cache and refetch rules); one that
// cannot be fetched is ErrClientKeysUnavailable.
func (s *Service) clientKeys(ctx context.Context, c *Client, kid string) ([]jose.JSONWebKey, error) {
	if c.JWKSURI != "" {
		keys, err := s.ClientJWKS.keys(ctx, c, kid, s.now())
		if err != nil {
			if s.Log != nil {
				s.Log.WarnContext(ctx, "client keys", slog.String("client_id", c.ID), slog.String("jwks_uri", c.JWKSURI), slog.Any("err", err))
			}
			return nil, ErrClientKeysUnavailable
		}
		return keys, nil
	}
	set, err := registeredKeySets.parsed(c)
	if err != nil {
		return nil, errUnreadableClientKeys
	}
	if kid != "" {
		return set.byKid[kid], nil
	}
	return set.keys, nil
}

// registeredKeySets are the parsed keys of the clients registered with inline jwks, for every
// Service of the process: what a registration's keys parse to depends on their bytes alone.
var registeredKeySets = newKeySetCache(keySetCacheEntries, keySetCacheBytes)

const (
	// keySetCacheEntries bounds the parsed key sets kept: one per client, the least recently
	// used going first.
	keySetCacheEntries = 1000
	// keySetCacheBytes bounds what they hold (keySet.size): at most 10 keys a client
	// (ValidClientJWKS), a few KiB each.
	keySetCacheBytes = 8 << 20
)

// keySetCache keeps the parse of each client's registered jwks (jose.JSONWebKey values, their
// big integers decoded and EC points checked), one entry per client id, so a private_key_jwt
// client's requests do not parse its keys again. An entry answers only a client whose jwks
// are byte for byte the ones it was parsed from: the registration's version, as far as its
// keys go, is the keys themselves, so a changed registration (a key added, removed or
// replaced) is a miss at once, whatever its updated_at says, and replaces the entry. Only
// registered clients reach it (clientKeys runs once the client is read from the store), so
// requests naming clients that do not exist add nothing.
type keySetCache struct {
	maxBytes int

	mu      sync.Mutex
	entries *simplelru.LRU[string, *keySet] // by client id
	bytes   int                             // the sum of the entries' sizes
	parses  atomic.Int64                    // key sets parsed, for the tests
}

// keySet is one client's registered keys, parsed.
type keySet struct {
	raw   string // the jwks they were parsed from
	keys  []jose.JSONWebKey
	byKid map[string][]jose.JSONWebKey
}

// size is what an entry holds, roughly: the registered bytes, kept to compare, and their parse,
// about as large again.
func (k *keySet) size(id string) int { return len(id) + 2*len(k.raw) }

func newKeySetCache(entries, maxBytes int) *keySetCache {
	c := &keySetCache{maxBytes: maxBytes}
	// The callback runs under c.mu, from Remove, RemoveOldest and Add's own eviction.
	c.entries, _ = simplelru.NewLRU(entries, func(id string, k *keySet) { c.bytes -= k.size(id) }) // fails only for entries <= 0
	return c
}

// parsed returns the parse of c's registered jwks, from the cache when c's jwks are the bytes
// it was parsed from. The keys returned are shared: callers only read them.
func (kc *keySetCache) parsed(c *Client) (*keySet, error) {
	kc.mu.Lock()
	k, ok := kc.entries.Get(c.ID)
	kc.mu.Unlock()
	if ok && k.raw == string(c.JWKS) {
		return k, nil
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(c.JWKS, &set); err != nil {
		return nil, err
	}
	kc.parses.Add(1)
	k = &keySet{raw: string(c.JWKS), keys: set.Keys, byKid: make(map[string][]jose.JSONWebKey, len(set.Keys))}
	for _, key := range set.Keys {
		k.byKid[key.KeyID] = append(k.byKid[key.KeyID], key)
	}
	kc.put(c.ID, k)
	return k, nil
}

// put keeps k as id's entry, replacing the one it had, and evicts the least recently used
// entries beyond the bounds; an entry larger than the whole byte bound is not kept.
func (kc *keySetCache) put(id string, k *keySet) {
	size := k.size(id)
	if size > kc.maxBytes {
		return
	}
	kc.mu.Lock()
	defer kc.mu.Unlock()
	kc.entries.Remove(id) // Add would replace it without the callback: count its bytes out first
	kc.entries.Add(id, k)
	kc.bytes += size
	for kc.bytes > kc.maxBytes {
		kc.entries.RemoveOldest()
	}
}

// errNotSignedByClient is answered when no key of the client verifies what it signed.
var errNotSignedByClient = errors.New("not signed by a key the client registered")

// verifyClientJWS returns the payload of jws, a compact JWS the client c signed (a client
// assertion, a request object), verified with the keys clientKeys gives for its kid: the one
// place that decides whether a client signed something. The error is what the caller answers
// the client (errUnreadableClientKeys, ErrClientKeysUnavailable, errNotSignedByClient).
func (s *Service) verifyClientJWS(ctx context.Context, c *Client, jws *jose.JSONWebSignature) ([]byte, error) {
	candidates, err := s.clientKeys(ctx, c, jws.Signatures[0].Protected.KeyID)
	if err != nil {
		return nil, err
	}
	for _, k := range candidates {
		if p, err := jws.Verify(k.Key); err == nil {
			return p, nil
		}
	}
	return nil, errNotSignedByClient
}

// JWKSFetcher fetches the JWK Set a client publishes at its jwks_uri (RFC 7591 2). The adapter
// (shared/jwksuri) holds the network rules: https only, no private or loopback address, a short
// timeout, no redirects, a bounded body. What it returns is checked here (ValidClientJWKS) like
// keys registered inline.
type JWKSFetcher interface {
	FetchJWKS(ctx context.Context, uri string) (json.RawMessage, error)
}

const (
	// JWKSMaxAge is how long a fetched key set is used before it is fetched again.
	JWKSMaxAge = 5 * time.Minute
	// JWKSRefetchInterval is the least time between two fetches of one client's jwks_uri: a
	// kid missing from the cached set (the client rotated its key, OpenID Connect Core 10.1.1)
	// is looked for again at most this often, and a failed fetch is not retried sooner, so no
	// stream of requests makes the server hammer a client's host.
	JWKSRefetchInterval = time.Minute
	// JWKSCacheEntries is the default bound of the cache: beyond it the least recently used
	// client's set goes.
	JWKSCacheEntries = 1000
)

// JWKSCache keeps the key sets of clients registered with a jwks_uri, one entry per client
// and URI, in a bounded LRU. Concurrent misses for one client share one fetch (singleflight).
// A nil *JWKSCache fetches nothing: such clients are refused.
type JWKSCache struct {
	fetcher JWKSFetcher
	entries *lru.Cache[string, *jwksEntry]
	flight  singleflight.Group
}

// jwksEntry is what is known of one client's jwks_uri; never changed once in the cache.
type jwksEntry struct {
	keys    []jose.JSONWebKey
	fetched time.Time // of keys; zero when no fetch has succeeded
	tried   time.Time // the last fetch, successful or not
	err     error     // of the last fetch, if it failed
}

// NewJWKSCache returns a cache that fetches with f and keeps the sets of at most size clients
// (JWKSCacheEntries when size <= 0).
func NewJWKSCache(f JWKSFetcher, size int) *JWKSCache {
	if size <= 0 {
		size = JWKSCacheEntries
	}
	entries, _ := lru.New[string, *jwksEntry](size) // fails only for a size <= 0
	return &JWKSCache{fetcher: f, entries: entries}
}

// keys returns c's keys of id kid ("" all) at now, fetching the set when none is cached, when
// the cached one is older than JWKSMaxAge, or when it lacks kid; each at most once per
// JWKSRefetchInterval.
func (j *JWKSCache) keys(ctx context.Context, c *Client, kid string, now time.Time) ([]jose.JSONWebKey, error) {
	if j == nil || j.fetcher == nil {
		return nil, errors.New("this deployment fetches no jwks_uri")
	}
	id := c.ID + " " + c.JWKSURI
	e, _ := j.entries.Get(id)
	if e.wantsFetch(kid, now) {
		v, err, _ := j.flight.Do(id, func() (any, error) {
			// A fetch that finished between the lookup above and now counts: look again.
			if e, _ := j.entries.Get(id); !e.wantsFetch(kid, now) {
				return e, nil
			}
			// The fetch is shared: one caller's cancellation must not fail the others. The
			// fetcher bounds it with its own timeout.
			e := j.fetch(context.WithoutCancel(ctx), c.JWKSURI, e, now)
			j.entries.Add(id, e)
			return e, nil
		})
		if err != nil {
			return nil, err
		}
		e = v.(*jwksEntry)
	}
	return e.answer(kid, now)
}

// KeysAt returns the keys of id kid ("" all) of the key set published at uri, cached under
// owner as a client's are (the same bounds, refetch interval and checks of ValidClientJWKS):
// dynamic registration reads a trusted directory's keys with it (owner "directory:<issuer>").
func (j *JWKSCache) KeysAt(ctx context.Context, owner, uri, kid string, now time.Time) ([]jose.JSONWebKey, error) {
	return j.keys(ctx, &Client{ID: owner, JWKSURI: uri}, kid, now)
}

// wantsFetch reports whether e (nil: nothing cached) calls for a fetch at now for kid.
func (e *jwksEntry) wantsFetch(kid string, now time.Time) bool {
	switch {
	case e == nil:
		return true
	case now.Before(e.tried.Add(JWKSRefetchInterval)):
		return false
	case !e.fresh(now):
		return true
	}
	return kid != "" && !e.has(kid)
}

func (e *jwksEntry) fresh(now time.Time) bool {
	return !e.fetched.IsZero() && now.Before(e.fetched.Add(JWKSMaxAge))
}

func (e *jwksEntry) has(kid string) bool {
	return slices.ContainsFunc(e.keys, func(k jose.JSONWebKey) bool { return k.KeyID == kid })
}

// answer is what e gives a request for kid: the fresh set's keys of that id (none when it has
// not got it), or the last fetch's failure.
func (e *jwksEntry) answer(kid string, now time.Time) ([]jose.JSONWebKey, error) {
	if e.fresh(now) && (kid == "" || e.has(kid) || e.err == nil) {
		if kid == "" {
			return e.keys, nil
		}
		return slices.DeleteFunc(slices.Clone(e.keys), func(k jose.JSONWebKey) bool { return k.KeyID != kid }), nil
	}
	if e.err != nil {
		return nil, e.err
	}
	return nil, errors.New("the cached key set has expired")
}

// fetch fetches and checks the set at uri; a failure keeps the previous entry's keys (still
// used for the kids they hold while fresh) and records the failure.
func (j *JWKSCache) fetch(ctx context.Context, uri string, prev *jwksEntry, now time.Time) *jwksEntry {
	keys, err := FetchClientJWKS(ctx, j.fetcher, uri)
	if err != nil {
		e := &jwksEntry{tried: now, err: err}
		if prev != nil {
			e.keys, e.fetched = prev.keys, prev.fetched
		}
		return e
	}
	return &jwksEntry{keys: keys, fetched: now, tried: now}
}

// FetchClientJWKS fetches the key set at a client's jwks_uri with f and checks it with the
// rules of keys registered inline (ValidClientJWKS: public keys only, at most 10, RSA 2048+ or
// EC P-256, each with its own kid). Registration calls it once, so a jwks_uri that cannot be
// fetched or holds private keys is refused there (OpenID Connect Registration 2: the set must
// hold no private key).
func FetchClientJWKS(ctx context.Context, f JWKSFetcher, uri string) ([]jose.JSONWebKey, error) {
	if f == nil {
		return nil, errors.New("this deployment fetches no jwks_uri")
	}
	raw, err := f.FetchJWKS(ctx, uri)
	if err != nil {
		return nil, fmt.Errorf("fetch the jwks_uri: %w", err)
	}
	if err := ValidClientJWKS(raw); err != nil {
		return nil, fmt.Errorf("the key set at the jwks_uri is refused: %w", err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(raw, &set); err != nil { // checked by ValidClientJWKS
		return nil, fmt.Errorf("the key set at the jwks_uri is refused: %w", err)
	}
	return set.Keys, nil
}

// maxJWKSURI bounds a registered jwks_uri.
const maxJWKSURI = 2048

// ValidJWKSURI checks a client's jwks_uri at registration: an absolute https URL with a host,
// no user information and no fragment (RFC 7591 2: the keys are fetched from it, so it must be
// https). Where it resolves to is checked when it is fetched (shared/jwksuri).
func ValidJWKSURI(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || len(raw) > maxJWKSURI || u.Scheme != "https" || u.Host == "" || u.Hostname() == "" || u.User != nil || u.Fragment != "" || u.Opaque != "" {
		return fmt.Errorf("jwks_uri %q must be an absolute https URL (no user information, no fragment, at most %d characters)", raw, maxJWKSURI)
	}
	return nil
}
