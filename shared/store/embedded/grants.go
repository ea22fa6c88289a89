package embedded

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// frames recycles the buffers in which operations build their frame bodies before they take
// the lock (the log copies a body into its own buffer).
var frames = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

func getFrame() *[]byte  { return frames.Get().(*[]byte) }
func putFrame(b *[]byte) { *b = (*b)[:0]; frames.Put(b) }

// CreateCode stores a new authorization code (oauth.GrantStore).
func (s *Store) CreateCode(ctx context.Context, c oauth.Code) error {
	if err := requireExpiry("code", c.ExpiresAt); err != nil {
		return err
	}
	fb := getFrame()
	defer putFrame(fb)
	*fb = appendBinary(*fb, kindCode, c.Hash, func(b []byte) []byte { return appendCode(b, &c) })
	c = cloneCode(c)
	return s.change(ctx, func() ([]byte, error) {
		s.setCode(&c, false)
		return *fb, nil
	})
}

// ConsumeCode marks the code used and returns it, in one step under the lock
// (oauth.GrantStore). A code that is unknown, expired, another client's or already used
// costs no write.
func (s *Store) ConsumeCode(ctx context.Context, hash, clientID string, now time.Time) (oauth.Code, error) {
	var small [128]byte
	var c oauth.Code
	found := false
	err := s.change(ctx, func() ([]byte, error) {
		it, ok := s.codes[hash]
		if !ok || !live(it.code.ExpiresAt, now) || it.code.Grant.ClientID != clientID {
			return nil, oauth.ErrNotFound
		}
		c, found = it.code, true
		if it.used {
			return nil, oauth.ErrUsed
		}
		s.useCode(hash)
		return appendEntry(small[:0], kindCode, opUse, hash, nil), nil
	})
	if !found {
		return oauth.Code{}, err
	}
	return cloneCode(c), err
}

// IssueTokens writes the grant and both tokens in one frame (oauth.GrantStore). The values
// are encoded before the lock is taken; under it, only the grant's state is checked.
func (s *Store) IssueTokens(ctx context.Context, in oauth.Issue, now time.Time) error {
	if err := requireExpiry("access token", in.Access.ExpiresAt); err != nil {
		return err
	}
	if err := requireExpiry("refresh token", in.Refresh.ExpiresAt); err != nil {
		return err
	}
	if err := requireExpiry("grant", in.Grant.ExpiresAt); err != nil {
		return err
	}
	access, refresh := cloneToken(in.Access), cloneToken(in.Refresh)
	access.Spent, refresh.Spent = false, false
	hashes := slices.Clone(in.Tokens)
	fb := getFrame()
	defer putFrame(fb)
	body := appendBinary(*fb, kindToken, access.Hash, func(b []byte) []byte { return appendToken(b, &access) })
	body = appendBinary(body, kindToken, refresh.Hash, func(b []byte) []byte { return appendToken(b, &refresh) })
	var grant *grantItem
	if in.FromCode {
		grant = &grantItem{grant: cloneGrant(in.Grant), tokens: hashes}
		body = appendBinary(body, kindGrant, in.Grant.ID, func(b []byte) []byte {
			return appendGrantRecord(b, &grant.grant, false, hashes)
		})
	} else {
		for _, h := range in.Retire {
			body = appendEntry(body, kindToken, opDelete, h, nil)
		}
		var list [256]byte
		body = appendEntry(body, kindGrant, opTokens, in.Grant.ID, appendHashes(list[:0], hashes))
	}
	*fb = body

	return s.change(ctx, func() ([]byte, error) {
		g, exists := s.grants[in.Grant.ID]
		switch {
		case in.FromCode && exists && g.revoked:
			return nil, oauth.ErrRevoked
		case in.FromCode && exists:
			return nil, oauth.ErrAlreadyExists
		case !in.FromCode && (!exists || g.revoked || !live(g.grant.ExpiresAt, now)):
			return nil, oauth.ErrRevoked
		}
		// The tokens go in first, as in the frame, so that a replay and this call agree.
		s.setToken(&access)
		s.setToken(&refresh)
		if in.FromCode {
			s.setGrant(grant)
		} else {
			for _, h := range in.Retire {
				delete(s.tokens, h)
			}
			s.setGrantTokens(in.Grant.ID, hashes)
		}
		return body, nil
	})
}

// SpendRefreshToken marks a refresh token spent and returns it, in one step under the lock
// (oauth.GrantStore).
func (s *Store) SpendRefreshToken(ctx context.Context, hash, clientID string, now time.Time) (oauth.Token, error) {
	var small [128]byte
	var t oauth.Token
	found := false
	err := s.change(ctx, func() ([]byte, error) {
		p, ok := s.tokens[hash]
		if !ok || !live(p.ExpiresAt, now) || p.Kind != oauth.KindRefresh || p.Grant.ClientID != clientID {
			return nil, oauth.ErrNotFound
		}
		t, found = *p, true
		if t.Spent {
			return nil, oauth.ErrUsed
		}
		s.useToken(hash)
		t.Spent = true
		return appendEntry(small[:0], kindToken, opUse, hash, nil), nil
	})
	if !found {
		return oauth.Token{}, err
	}
	return cloneToken(t), err
}

// GetToken returns a live access or refresh token (oauth.GrantStore).
func (s *Store) GetToken(ctx context.Context, hash string, now time.Time) (oauth.Token, error) {
	p, err := lookup(ctx, s, s.tokens, hash)
	if err != nil {
		return oauth.Token{}, err
	}
	if !live(p.ExpiresAt, now) {
		return oauth.Token{}, oauth.ErrNotFound
	}
	return cloneToken(*p), nil
}

// RevokeToken deletes one token; unknown tokens are not an error.
func (s *Store) RevokeToken(ctx context.Context, hash string) error {
	return s.deleteItem(ctx, kindToken, hash)
}

// RevokeGrant marks the grant revoked and deletes every token it lists, in one step; an
// unknown grant gets a tombstone for TombstoneTTL (oauth.GrantStore). A revoked grant is kept
// at least as long as a tombstone, so that it blocks a late first issuance just the same.
func (s *Store) RevokeGrant(ctx context.Context, grantID string, now time.Time) error {
	keep := now.Add(TombstoneTTL)
	var small [128]byte
	return s.change(ctx, func() ([]byte, error) {
		g, exists := s.grants[grantID]
		switch {
		case !exists:
			tomb := oauth.Grant{ID: grantID, ExpiresAt: keep}
			s.setGrant(&grantItem{grant: tomb, revoked: true})
			return appendBinary(small[:0], kindGrant, grantID, func(b []byte) []byte { return appendGrantRecord(b, &tomb, true, nil) }), nil
		case g.revoked && len(g.tokens) == 0:
			return nil, nil
		}
		var end [8]byte
		binary.LittleEndian.PutUint64(end[:], uint64(keep.UnixNano()))
		s.revokeGrant(grantID, time.Unix(0, keep.UnixNano()))
		return appendEntry(small[:0], kindGrant, opRevoke, grantID, end[:]), nil
	})
}

// GetGrant returns a grant record, revoked ones and tombstones too (oauth.GrantStore).
func (s *Store) GetGrant(ctx context.Context, id string, now time.Time) (oauth.GrantRecord, error) {
	g, err := lookup(ctx, s, s.grants, id)
	if err != nil {
		return oauth.GrantRecord{}, err
	}
	if !live(g.grant.ExpiresAt, now) {
		return oauth.GrantRecord{}, oauth.ErrNotFound
	}
	return oauth.GrantRecord{Grant: cloneGrant(g.grant), Revoked: g.revoked, Tokens: slices.Clone(g.tokens)}, nil
}

// ListGrants lists the live grants of a user or a client, ordered by id. It scans every grant:
// it serves operators, not requests.
func (s *Store) ListGrants(ctx context.Context, f oauth.GrantFilter, now time.Time) ([]oauth.GrantRecord, error) {
	if f.UID == "" && f.ClientID == "" {
		return nil, fmt.Errorf("embedded store: list grants: the filter names neither a user nor a client")
	}
	var out []oauth.GrantRecord
	err := s.view(ctx, func() error {
		for _, g := range s.grants {
			if g.revoked || !live(g.grant.ExpiresAt, now) {
				continue
			}
			if (f.UID != "" && g.grant.UID != f.UID) || (f.UID == "" && g.grant.ClientID != f.ClientID) {
				continue
			}
			out = append(out, oauth.GrantRecord{Grant: cloneGrant(g.grant), Tokens: slices.Clone(g.tokens)})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b oauth.GrantRecord) int { return strings.Compare(a.Grant.ID, b.Grant.ID) })
	return out, nil
}
