package embedded

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// The mutators below are the only code that changes the maps. The operations call them with
// the values they have checked, and a replay calls them with the values it decodes from the
// log, so that a store rebuilt from its log is the store that wrote it. Every caller holds
// s.mu for writing. A stored item is never changed: a change stores a changed copy in its
// place. So a pointer taken under the lock stays a consistent item after the lock is released,
// which is what lets a snapshot be written without holding the lock.

func (s *Store) setCode(c *oauth.Code, used bool) { s.codes[c.Hash] = &codeItem{code: *c, used: used} }

func (s *Store) useCode(hash string) {
	if it, ok := s.codes[hash]; ok {
		next := *it
		next.used = true
		s.codes[hash] = &next
	}
}

func (s *Store) setToken(t *oauth.Token) { s.tokens[t.Hash] = t }

func (s *Store) useToken(hash string) {
	if t, ok := s.tokens[hash]; ok {
		next := *t
		next.Spent = true
		s.tokens[hash] = &next
	}
}

func (s *Store) setGrant(g *grantItem) { s.grants[g.grant.ID] = g }

func (s *Store) setGrantTokens(id string, hashes []string) {
	if g, ok := s.grants[id]; ok {
		next := *g
		next.tokens = hashes
		s.grants[id] = &next
	}
}

// revokeGrant marks a grant revoked, to be kept until end at least, and deletes its tokens.
func (s *Store) revokeGrant(id string, end time.Time) {
	g, ok := s.grants[id]
	if !ok {
		return
	}
	for _, h := range g.tokens {
		delete(s.tokens, h)
	}
	next := *g
	next.revoked, next.tokens = true, nil
	if end.After(next.grant.ExpiresAt) {
		next.grant.ExpiresAt = end
	}
	s.grants[id] = &next
}

func (s *Store) setUser(u *oauth.User) {
	s.users[u.UID] = u
	s.names[u.Username] = u.UID
}

func (s *Store) deleteUser(uid string) {
	u, ok := s.users[uid]
	if !ok {
		return
	}
	if s.names[u.Username] == uid {
		delete(s.names, u.Username)
	}
	delete(s.users, uid)
}

// remove deletes the item of kind under key and reports whether there was one.
func (s *Store) remove(kind byte, key string) (found bool, err error) {
	switch kind {
	case kindCode:
		_, found = s.codes[key]
		delete(s.codes, key)
	case kindToken:
		_, found = s.tokens[key]
		delete(s.tokens, key)
	case kindGrant:
		_, found = s.grants[key]
		delete(s.grants, key)
	case kindClient:
		_, found = s.clients[key]
		delete(s.clients, key)
	case kindUser:
		_, found = s.users[key]
		s.deleteUser(key)
	case kindRequest:
		_, found = s.requests[key]
		delete(s.requests, key)
	case kindSession:
		_, found = s.sessions[key]
		delete(s.sessions, key)
	case kindFailure:
		_, found = s.failures[key]
		delete(s.failures, key)
	default:
		return false, errBadEntry
	}
	return found, nil
}

// apply replays one frame body.
func (s *Store) apply(body []byte) error {
	for len(body) > 0 {
		e, rest, err := nextEntry(body)
		if err != nil {
			return err
		}
		if err := s.applyEntry(e); err != nil {
			return fmt.Errorf("kind %d op %d: %w", e.kind, e.op, err)
		}
		body = rest
	}
	return nil
}

var errBadEntry = errors.New("unknown entry")

func (s *Store) applyEntry(e entry) error {
	switch {
	case e.op == opPut:
		return s.applyPut(e)
	case e.op == opDelete:
		_, err := s.remove(e.kind, e.key)
		return err
	case e.op == opUse && e.kind == kindCode:
		s.useCode(e.key)
	case e.op == opUse && e.kind == kindToken:
		s.useToken(e.key)
	case e.op == opTokens && e.kind == kindGrant:
		hashes, err := decodeHashes(e.val)
		if err != nil {
			return err
		}
		s.setGrantTokens(e.key, hashes)
	case e.op == opRevoke && e.kind == kindGrant:
		if len(e.val) != 8 {
			return errors.New("bad revocation")
		}
		s.revokeGrant(e.key, time.Unix(0, int64(binary.LittleEndian.Uint64(e.val))))
	default:
		return errBadEntry
	}
	return nil
}

func (s *Store) applyPut(e entry) error {
	switch e.kind {
	case kindCode:
		c, err := decodeCode(e.val)
		if err != nil {
			return err
		}
		s.setCode(&c, false)
	case kindToken:
		t, err := decodeToken(e.val)
		if err != nil {
			return err
		}
		s.setToken(&t)
	case kindGrant:
		g, err := decodeGrantRecord(e.val)
		if err != nil {
			return err
		}
		s.setGrant(&g)
	case kindClient:
		c := new(oauth.Client)
		if err := json.Unmarshal(e.val, c); err != nil {
			return err
		}
		s.clients[c.ID] = c
	case kindUser:
		u := new(oauth.User)
		if err := json.Unmarshal(e.val, u); err != nil {
			return err
		}
		s.deleteUser(u.UID)
		s.setUser(u)
	case kindRequest:
		r, err := decodeRequest(e.val)
		if err != nil {
			return err
		}
		s.requests[r.ID] = &r
	case kindSession:
		x, err := decodeSession(e.val)
		if err != nil {
			return err
		}
		s.sessions[x.Hash] = &x
	case kindFailure:
		c := new(failureCounter)
		if err := json.Unmarshal(e.val, c); err != nil {
			return err
		}
		s.failures[e.key] = c
	case kindKeys:
		var k oauth.KeySet
		if err := json.Unmarshal(e.val, &k); err != nil {
			return err
		}
		s.keys = k
	default:
		return errBadEntry
	}
	return nil
}

// snapshot is the store's items at one instant: pointers to items, which are never changed
// once stored, so it can be written out after the lock is released.
type snapshot struct {
	codes    []*codeItem
	tokens   []*oauth.Token
	grants   []*grantItem
	clients  []*oauth.Client
	users    []*oauth.User
	requests []*oauth.AuthRequest
	sessions []*oauth.Session
	failures map[string]*failureCounter
	keys     oauth.KeySet
}

// capture takes a snapshot; the caller holds s.mu. It copies pointers only.
func (s *Store) capture() *snapshot {
	return &snapshot{
		codes: slices.Collect(maps.Values(s.codes)), tokens: slices.Collect(maps.Values(s.tokens)),
		grants: slices.Collect(maps.Values(s.grants)), clients: slices.Collect(maps.Values(s.clients)),
		users: slices.Collect(maps.Values(s.users)), requests: slices.Collect(maps.Values(s.requests)),
		sessions: slices.Collect(maps.Values(s.sessions)), failures: maps.Clone(s.failures), keys: s.keys,
	}
}

// write emits the header and then one frame per item, in the form a replay applies.
func (snap *snapshot) write(emit func(body []byte) error) error {
	if err := emit(headerBody()); err != nil {
		return err
	}
	var body []byte
	bin := func(kind byte, key string, value func([]byte) []byte) error {
		body = appendBinary(body[:0], kind, key, value)
		return emit(body)
	}
	put := func(kind byte, key string, v any) error {
		var err error
		if body, err = appendJSON(body[:0], kind, key, v); err != nil {
			return err
		}
		return emit(body)
	}
	for _, it := range snap.codes {
		if err := bin(kindCode, it.code.Hash, func(b []byte) []byte { return appendCode(b, &it.code) }); err != nil {
			return err
		}
		if it.used {
			if err := emit(appendEntry(body[:0], kindCode, opUse, it.code.Hash, nil)); err != nil {
				return err
			}
		}
	}
	for _, t := range snap.tokens {
		if err := bin(kindToken, t.Hash, func(b []byte) []byte { return appendToken(b, t) }); err != nil {
			return err
		}
	}
	for _, g := range snap.grants {
		if err := bin(kindGrant, g.grant.ID, func(b []byte) []byte {
			return appendGrantRecord(b, &g.grant, g.revoked, g.tokens)
		}); err != nil {
			return err
		}
	}
	for _, c := range snap.clients {
		if err := put(kindClient, c.ID, c); err != nil {
			return err
		}
	}
	for _, u := range snap.users {
		if err := put(kindUser, u.UID, u); err != nil {
			return err
		}
	}
	for _, r := range snap.requests {
		if err := bin(kindRequest, r.ID, func(b []byte) []byte { return appendRequest(b, r) }); err != nil {
			return err
		}
	}
	for _, x := range snap.sessions {
		if err := bin(kindSession, x.Hash, func(b []byte) []byte { return appendSession(b, x) }); err != nil {
			return err
		}
	}
	for k, c := range snap.failures {
		if err := put(kindFailure, k, c); err != nil {
			return err
		}
	}
	if snap.keys.Version != 0 || len(snap.keys.Keys) > 0 {
		if err := put(kindKeys, "set", &snap.keys); err != nil {
			return err
		}
	}
	return nil
}

// GarbageCollect deletes every item that has expired at now and returns how many it deleted.
// Reads filter expired items anyway; this bounds the memory. Nothing is logged: the items'
// ends are in the log, and a replay drops what has expired by then.
func (s *Store) GarbageCollect(now time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.log.usable(); err != nil {
		return 0, err
	}
	return s.gc(now), nil
}

// gc deletes the expired items; the caller holds s.mu (or is Open).
func (s *Store) gc(now time.Time) int {
	n := 0
	for h, it := range s.codes {
		if !live(it.code.ExpiresAt, now) {
			delete(s.codes, h)
			n++
		}
	}
	for h, t := range s.tokens {
		if !live(t.ExpiresAt, now) {
			delete(s.tokens, h)
			n++
		}
	}
	for id, g := range s.grants {
		if !live(g.grant.ExpiresAt, now) {
			delete(s.grants, id)
			n++
		}
	}
	for id, r := range s.requests {
		if !live(r.ExpiresAt, now) {
			delete(s.requests, id)
			n++
		}
	}
	for h, x := range s.sessions {
		if !live(x.ExpiresAt, now) {
			delete(s.sessions, h)
			n++
		}
	}
	for k, c := range s.failures {
		if !live(c.ExpiresAt, now) {
			delete(s.failures, k)
			n++
		}
	}
	return n
}
