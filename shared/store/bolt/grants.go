package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/acmebank/authserver/shared/oauth"
)

// A grant is stored as its oauth.Grant (header: the grant's end, and flagRevoked once revoked
// or for a tombstone) plus, in bGrantTokens, the JSON list of its live token hashes. Keeping the
// two apart lets a refresh and a revocation update the grant without decoding it.

// CreateCode stores a new authorization code.
func (s *Store) CreateCode(ctx context.Context, c oauth.Code) error {
	if err := requireExpiry("code", c.ExpiresAt); err != nil {
		return err
	}
	val, err := encode(c, c.ExpiresAt, 0)
	if err != nil {
		return fmt.Errorf("bolt: create code: %w", err)
	}
	err = s.write(ctx, func(tx *bbolt.Tx) error {
		return put(tx, bCodes, idCodes, []byte(c.Hash), val)
	})
	if err != nil {
		return fmt.Errorf("bolt: create code: %w", err)
	}
	return nil
}

// ConsumeCode marks the code used and returns it (oauth.GrantStore). The code is read and
// checked outside the writer; the write only confirms that it is still there, unchanged and
// unused, and sets its used flag. A code that is unknown, expired, another client's or already
// used costs no write at all.
func (s *Store) ConsumeCode(ctx context.Context, hash, clientID string, now time.Time) (oauth.Code, error) {
	key := []byte(hash)
	pre, err := s.readCopy(ctx, bCodes, key)
	if err != nil {
		return oauth.Code{}, fmt.Errorf("bolt: consume code: %w", err)
	}
	r, ok, err := pre.live(now)
	if err != nil || !ok {
		return oauth.Code{}, notFoundOr("consume code", err)
	}
	var c oauth.Code
	if err := decode(r.body, &c); err != nil {
		return oauth.Code{}, fmt.Errorf("bolt: consume code: %w", err)
	}
	if c.Grant.ClientID != clientID {
		return oauth.Code{}, oauth.ErrNotFound
	}
	if r.flags&flagUsed != 0 {
		return c, oauth.ErrUsed
	}
	result, err := s.spend(ctx, bCodes, idCodes, key, pre, now)
	if err != nil {
		return oauth.Code{}, fmt.Errorf("bolt: consume code: %w", err)
	}
	if errors.Is(result, oauth.ErrNotFound) {
		return oauth.Code{}, result
	}
	return c, result
}

// spend sets the used flag of a pre-read code or refresh token in one write: ErrNotFound if it
// has gone (or changed) since it was read, ErrUsed if another call set the flag first.
func (s *Store) spend(ctx context.Context, bucket []byte, id byte, key []byte, pre preRead, now time.Time) (result, err error) {
	err = s.write(ctx, func(tx *bbolt.Tx) error {
		result = nil
		cur, ok, err := get(tx.Bucket(bucket), key, now)
		if err != nil {
			return err
		}
		switch {
		case !ok || !pre.sameBody(cur):
			result = oauth.ErrNotFound
			return nil
		case cur.flags&flagUsed != 0:
			result = oauth.ErrUsed
			return nil
		}
		return setHeader(tx, bucket, id, key, cur, cur.exp, cur.flags|flagUsed)
	})
	return result, err
}

// IssueTokens writes the grant and both tokens in one transaction (oauth.GrantStore). Every
// value is encoded before the write is queued; the writer only checks the grant's header.
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
	in.Access.Spent, in.Refresh.Spent = false, false
	aval, err := encode(in.Access, in.Access.ExpiresAt, 0)
	if err != nil {
		return fmt.Errorf("bolt: issue tokens: %w", err)
	}
	rval, err := encode(in.Refresh, in.Refresh.ExpiresAt, 0)
	if err != nil {
		return fmt.Errorf("bolt: issue tokens: %w", err)
	}
	list, err := json.Marshal(in.Tokens)
	if err != nil {
		return fmt.Errorf("bolt: issue tokens: encode token list: %w", err)
	}
	var gval []byte
	if in.FromCode {
		if gval, err = encode(in.Grant, in.Grant.ExpiresAt, 0); err != nil {
			return fmt.Errorf("bolt: issue tokens: %w", err)
		}
	}
	gid := []byte(in.Grant.ID)
	var result error
	err = s.write(ctx, func(tx *bbolt.Tx) error {
		result = nil
		r, exists, err := getRaw(tx.Bucket(bGrants), gid)
		if err != nil {
			return err
		}
		if in.FromCode {
			switch {
			case exists && r.flags&flagRevoked != 0:
				result = oauth.ErrRevoked
				return nil
			case exists:
				result = oauth.ErrAlreadyExists
				return nil
			}
			if err := put(tx, bGrants, idGrants, gid, gval); err != nil {
				return err
			}
			if err := indexGrant(tx, in.Grant); err != nil {
				return err
			}
		} else {
			if !exists || r.flags&flagRevoked != 0 || !r.live(now) {
				result = oauth.ErrRevoked
				return nil
			}
			tokens := tx.Bucket(bTokens)
			for _, h := range in.Retire {
				if err := tokens.Delete([]byte(h)); err != nil {
					return fmt.Errorf("retire token: %w", err)
				}
			}
		}
		if err := tx.Bucket(bGrantTokens).Put(gid, list); err != nil {
			return fmt.Errorf("put token list: %w", err)
		}
		if err := put(tx, bTokens, idTokens, []byte(in.Access.Hash), aval); err != nil {
			return err
		}
		return put(tx, bTokens, idTokens, []byte(in.Refresh.Hash), rval)
	})
	if err != nil {
		return fmt.Errorf("bolt: issue tokens: %w", err)
	}
	return result
}

// SpendRefreshToken marks a refresh token spent and returns it (oauth.GrantStore), reading and
// checking it outside the writer as ConsumeCode does.
func (s *Store) SpendRefreshToken(ctx context.Context, hash, clientID string, now time.Time) (oauth.Token, error) {
	key := []byte(hash)
	pre, err := s.readCopy(ctx, bTokens, key)
	if err != nil {
		return oauth.Token{}, fmt.Errorf("bolt: spend refresh token: %w", err)
	}
	r, ok, err := pre.live(now)
	if err != nil || !ok {
		return oauth.Token{}, notFoundOr("spend refresh token", err)
	}
	t, err := decodeToken(r)
	if err != nil {
		return oauth.Token{}, fmt.Errorf("bolt: spend refresh token: %w", err)
	}
	if t.Kind != oauth.KindRefresh || t.Grant.ClientID != clientID {
		return oauth.Token{}, oauth.ErrNotFound
	}
	if t.Spent {
		return t, oauth.ErrUsed
	}
	result, err := s.spend(ctx, bTokens, idTokens, key, pre, now)
	if err != nil {
		return oauth.Token{}, fmt.Errorf("bolt: spend refresh token: %w", err)
	}
	if errors.Is(result, oauth.ErrNotFound) {
		return oauth.Token{}, result
	}
	t.Spent = true
	return t, result
}

// GetToken returns a live access or refresh token in one read (oauth.GrantStore).
func (s *Store) GetToken(ctx context.Context, hash string, now time.Time) (oauth.Token, error) {
	var tok oauth.Token
	err := s.read(ctx, func(tx *bbolt.Tx) error {
		r, ok, err := get(tx.Bucket(bTokens), []byte(hash), now)
		if err != nil {
			return err
		}
		if !ok {
			return oauth.ErrNotFound
		}
		tok, err = decodeToken(r)
		return err
	})
	if err != nil {
		return oauth.Token{}, notFoundOr("get token", err)
	}
	return tok, nil
}

func decodeToken(r record) (oauth.Token, error) {
	var t oauth.Token
	if err := decode(r.body, &t); err != nil {
		return oauth.Token{}, err
	}
	t.Spent = r.flags&flagUsed != 0
	return t, nil
}

// RevokeToken deletes one token; unknown tokens are not an error.
func (s *Store) RevokeToken(ctx context.Context, hash string) error {
	err := s.write(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bTokens).Delete([]byte(hash))
	})
	if err != nil {
		return fmt.Errorf("bolt: revoke token: %w", err)
	}
	return nil
}

// RevokeGrant marks the grant revoked and deletes every token it lists, in one transaction; an
// unknown grant gets a tombstone for TombstoneTTL (oauth.GrantStore). A revoked grant is kept
// at least as long as a tombstone, so that it blocks a late first issuance just the same.
func (s *Store) RevokeGrant(ctx context.Context, grantID string, now time.Time) error {
	keep := now.Add(TombstoneTTL)
	tomb, err := encode(oauth.Grant{ID: grantID, ExpiresAt: keep}, keep, flagRevoked)
	if err != nil {
		return fmt.Errorf("bolt: revoke grant: %w", err)
	}
	gid := []byte(grantID)
	err = s.write(ctx, func(tx *bbolt.Tx) error {
		r, exists, err := getRaw(tx.Bucket(bGrants), gid)
		if err != nil {
			return err
		}
		if !exists {
			return put(tx, bGrants, idGrants, gid, tomb)
		}
		if err := deleteGrantTokens(tx, gid); err != nil {
			return err
		}
		if r.flags&flagRevoked != 0 {
			return nil
		}
		exp := r.exp
		if exp != 0 {
			exp = max(exp, expiryOf(keep))
		}
		return setHeader(tx, bGrants, idGrants, gid, r, exp, r.flags|flagRevoked)
	})
	if err != nil {
		return fmt.Errorf("bolt: revoke grant: %w", err)
	}
	return nil
}

// deleteGrantTokens deletes every token the grant lists, and the list.
func deleteGrantTokens(tx *bbolt.Tx, gid []byte) error {
	lists := tx.Bucket(bGrantTokens)
	v := lists.Get(gid)
	if v == nil {
		return nil
	}
	var hashes []string
	if err := decode(v, &hashes); err != nil {
		return err
	}
	tokens := tx.Bucket(bTokens)
	for _, h := range hashes {
		if err := tokens.Delete([]byte(h)); err != nil {
			return fmt.Errorf("delete token: %w", err)
		}
	}
	return lists.Delete(gid)
}

// GetGrant returns a grant record, revoked ones and tombstones too (oauth.GrantStore).
func (s *Store) GetGrant(ctx context.Context, id string, now time.Time) (oauth.GrantRecord, error) {
	var rec oauth.GrantRecord
	err := s.read(ctx, func(tx *bbolt.Tx) error {
		r, ok, err := readGrant(tx, []byte(id))
		if err != nil {
			return err
		}
		if !ok || !grantLive(r, now) {
			return oauth.ErrNotFound
		}
		rec = r
		return nil
	})
	if err != nil {
		return oauth.GrantRecord{}, notFoundOr("get grant", err)
	}
	return rec, nil
}

// ListGrants lists the live grants of a user or a client through the owner indexes.
func (s *Store) ListGrants(ctx context.Context, f oauth.GrantFilter, now time.Time) ([]oauth.GrantRecord, error) {
	idx, owner := bGrantsByUser, f.UID
	if f.UID == "" {
		idx, owner = bGrantsByCli, f.ClientID
	}
	if owner == "" {
		return nil, fmt.Errorf("bolt: list grants: the filter names neither a user nor a client")
	}
	prefix := ownerKey(owner, "")
	var out []oauth.GrantRecord
	err := s.read(ctx, func(tx *bbolt.Tx) error {
		c := tx.Bucket(idx).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			rec, ok, err := readGrant(tx, k[len(prefix):])
			if err != nil {
				return err
			}
			if ok && !rec.Revoked && grantLive(rec, now) {
				out = append(out, rec)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bolt: list grants: %w", err)
	}
	return out, nil
}

// readGrant reads a whole grant record, tombstone or not, expired or not.
func readGrant(tx *bbolt.Tx, id []byte) (oauth.GrantRecord, bool, error) {
	r, ok, err := getRaw(tx.Bucket(bGrants), id)
	if err != nil || !ok {
		return oauth.GrantRecord{}, false, err
	}
	rec := oauth.GrantRecord{Revoked: r.flags&flagRevoked != 0}
	if err := decode(r.body, &rec.Grant); err != nil {
		return oauth.GrantRecord{}, false, err
	}
	if v := tx.Bucket(bGrantTokens).Get(id); v != nil {
		if err := decode(v, &rec.Tokens); err != nil {
			return oauth.GrantRecord{}, false, err
		}
	}
	return rec, true, nil
}

// grantLive reports whether the grant (or tombstone) has not reached its end at now.
func grantLive(rec oauth.GrantRecord, now time.Time) bool {
	return !now.IsZero() && now.Before(rec.Grant.ExpiresAt)
}

// indexGrant adds a new grant to the indexes of its user and its client.
func indexGrant(tx *bbolt.Tx, g oauth.Grant) error {
	if err := tx.Bucket(bGrantsByUser).Put(ownerKey(g.UID, g.ID), nil); err != nil {
		return fmt.Errorf("index grant by user: %w", err)
	}
	if err := tx.Bucket(bGrantsByCli).Put(ownerKey(g.ClientID, g.ID), nil); err != nil {
		return fmt.Errorf("index grant by client: %w", err)
	}
	return nil
}

// dropGrant deletes a grant with its token list and its index entries (garbage collection).
func dropGrant(tx *bbolt.Tx, id []byte, r record) error {
	var g oauth.Grant
	if err := decode(r.body, &g); err != nil {
		return err
	}
	if g.UID != "" || g.ClientID != "" { // tombstones are not indexed
		if err := tx.Bucket(bGrantsByUser).Delete(ownerKey(g.UID, g.ID)); err != nil {
			return fmt.Errorf("unindex grant by user: %w", err)
		}
		if err := tx.Bucket(bGrantsByCli).Delete(ownerKey(g.ClientID, g.ID)); err != nil {
			return fmt.Errorf("unindex grant by client: %w", err)
		}
	}
	if err := tx.Bucket(bGrantTokens).Delete(id); err != nil {
		return fmt.Errorf("delete token list: %w", err)
	}
	return tx.Bucket(bGrants).Delete(id)
}

// live splits a pre-read value and reports whether it exists and is live at now.
func (p preRead) live(now time.Time) (record, bool, error) {
	if p.val == nil {
		return record{}, false, nil
	}
	r, err := split(p.val)
	if err != nil || !r.live(now) {
		return record{}, false, err
	}
	return r, true, nil
}

// notFoundOr passes ErrNotFound (or a nil error, meaning "none") through as ErrNotFound and
// gives other errors their context.
func notFoundOr(what string, err error) error {
	if err == nil || errors.Is(err, oauth.ErrNotFound) {
		return oauth.ErrNotFound
	}
	return fmt.Errorf("bolt: %s: %w", what, err)
}
