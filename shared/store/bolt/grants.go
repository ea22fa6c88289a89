package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/acmebank/authserver/shared/oauth"
)

// CreateCode stores a new authorization code.
func (s *Store) CreateCode(ctx context.Context, c oauth.Code) error {
	if err := requireExpiry("code", c.ExpiresAt); err != nil {
		return err
	}
	err := s.write(ctx, func(tx *bbolt.Tx) error {
		return put(tx, bCodes, idCodes, []byte(c.Hash), c, c.ExpiresAt, 0)
	})
	if err != nil {
		return fmt.Errorf("bolt: create code: %w", err)
	}
	return nil
}

// ConsumeCode marks the code used and returns it (oauth.GrantStore).
func (s *Store) ConsumeCode(ctx context.Context, hash, clientID string, now time.Time) (oauth.Code, error) {
	var (
		code   oauth.Code
		result error
	)
	err := s.write(ctx, func(tx *bbolt.Tx) error {
		code, result = oauth.Code{}, nil
		b := tx.Bucket(bCodes)
		r, ok, err := get(b, []byte(hash), now)
		if err != nil {
			return err
		}
		if !ok {
			result = oauth.ErrNotFound
			return nil
		}
		var c oauth.Code
		if err := decode(r, &c); err != nil {
			return err
		}
		if c.Grant.ClientID != clientID {
			result = oauth.ErrNotFound
			return nil
		}
		code = c
		if r.flags&flagUsed != 0 {
			result = oauth.ErrUsed
			return nil
		}
		return setFlags(b, []byte(hash), r, r.flags|flagUsed)
	})
	if err != nil {
		return oauth.Code{}, fmt.Errorf("bolt: consume code: %w", err)
	}
	return code, result
}

// IssueTokens writes the grant record and both tokens in one transaction (oauth.GrantStore).
func (s *Store) IssueTokens(ctx context.Context, in oauth.Issue, now time.Time) error {
	if err := requireExpiry("access token", in.Access.ExpiresAt); err != nil {
		return err
	}
	if err := requireExpiry("refresh token", in.Refresh.ExpiresAt); err != nil {
		return err
	}
	var result error
	err := s.write(ctx, func(tx *bbolt.Tx) error {
		result = nil
		gid := []byte(in.Grant.ID)
		rec, exists, err := getGrant(tx, gid)
		if err != nil {
			return err
		}
		var exp time.Time
		if in.FromCode {
			switch {
			case exists && rec.Revoked:
				result = oauth.ErrRevoked
				return nil
			case exists:
				result = oauth.ErrAlreadyExists
				return nil
			}
			rec = oauth.GrantRecord{Grant: in.Grant}
			exp = in.Grant.ExpiresAt
			if err := indexGrant(tx, in.Grant); err != nil {
				return err
			}
		} else {
			if !exists || rec.Revoked || !grantLive(rec, now) {
				result = oauth.ErrRevoked
				return nil
			}
			exp = rec.Grant.ExpiresAt
			tokens := tx.Bucket(bTokens)
			for _, h := range in.Retire {
				if err := tokens.Delete([]byte(h)); err != nil {
					return fmt.Errorf("retire token: %w", err)
				}
			}
		}
		rec.Tokens = in.Tokens
		if err := put(tx, bGrants, idGrants, gid, rec, exp, 0); err != nil {
			return err
		}
		for _, t := range []oauth.Token{in.Access, in.Refresh} {
			t.Spent = false
			if err := put(tx, bTokens, idTokens, []byte(t.Hash), t, t.ExpiresAt, 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("bolt: issue tokens: %w", err)
	}
	return result
}

// SpendRefreshToken marks a refresh token spent and returns it (oauth.GrantStore).
func (s *Store) SpendRefreshToken(ctx context.Context, hash, clientID string, now time.Time) (oauth.Token, error) {
	var (
		tok    oauth.Token
		result error
	)
	err := s.write(ctx, func(tx *bbolt.Tx) error {
		tok, result = oauth.Token{}, nil
		b := tx.Bucket(bTokens)
		r, ok, err := get(b, []byte(hash), now)
		if err != nil {
			return err
		}
		if !ok {
			result = oauth.ErrNotFound
			return nil
		}
		t, err := decodeToken(r)
		if err != nil {
			return err
		}
		if t.Kind != oauth.KindRefresh || t.Grant.ClientID != clientID {
			result = oauth.ErrNotFound
			return nil
		}
		tok = t
		if t.Spent {
			result = oauth.ErrUsed
			return nil
		}
		tok.Spent = true
		return setFlags(b, []byte(hash), r, r.flags|flagUsed)
	})
	if err != nil {
		return oauth.Token{}, fmt.Errorf("bolt: spend refresh token: %w", err)
	}
	return tok, result
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
	if errors.Is(err, oauth.ErrNotFound) {
		return oauth.Token{}, err
	}
	if err != nil {
		return oauth.Token{}, fmt.Errorf("bolt: get token: %w", err)
	}
	return tok, nil
}

func decodeToken(r record) (oauth.Token, error) {
	var t oauth.Token
	if err := decode(r, &t); err != nil {
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
// unknown grant gets a tombstone for TombstoneTTL (oauth.GrantStore).
func (s *Store) RevokeGrant(ctx context.Context, grantID string, now time.Time) error {
	err := s.write(ctx, func(tx *bbolt.Tx) error {
		gid := []byte(grantID)
		rec, exists, err := getGrant(tx, gid)
		if err != nil {
			return err
		}
		keep := now.Add(TombstoneTTL)
		if !exists {
			tomb := oauth.GrantRecord{Grant: oauth.Grant{ID: grantID, ExpiresAt: keep}, Revoked: true}
			return put(tx, bGrants, idGrants, gid, tomb, keep, 0)
		}
		tokens := tx.Bucket(bTokens)
		for _, h := range rec.Tokens {
			if err := tokens.Delete([]byte(h)); err != nil {
				return fmt.Errorf("delete token: %w", err)
			}
		}
		if rec.Revoked && len(rec.Tokens) == 0 {
			return nil
		}
		rec.Revoked, rec.Tokens = true, nil
		if rec.Grant.ExpiresAt.After(keep) {
			keep = rec.Grant.ExpiresAt
		}
		return put(tx, bGrants, idGrants, gid, rec, keep, 0)
	})
	if err != nil {
		return fmt.Errorf("bolt: revoke grant: %w", err)
	}
	return nil
}

// GetGrant returns a grant record, revoked ones and tombstones too (oauth.GrantStore).
func (s *Store) GetGrant(ctx context.Context, id string, now time.Time) (oauth.GrantRecord, error) {
	var rec oauth.GrantRecord
	err := s.read(ctx, func(tx *bbolt.Tx) error {
		r, ok, err := getGrant(tx, []byte(id))
		if err != nil {
			return err
		}
		if !ok || !grantLive(r, now) {
			return oauth.ErrNotFound
		}
		rec = r
		return nil
	})
	if errors.Is(err, oauth.ErrNotFound) {
		return oauth.GrantRecord{}, err
	}
	if err != nil {
		return oauth.GrantRecord{}, fmt.Errorf("bolt: get grant: %w", err)
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
			rec, ok, err := getGrant(tx, k[len(prefix):])
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

// getGrant reads a grant record, tombstone or not, expired or not.
func getGrant(tx *bbolt.Tx, id []byte) (oauth.GrantRecord, bool, error) {
	r, ok, err := getRaw(tx.Bucket(bGrants), id)
	if err != nil || !ok {
		return oauth.GrantRecord{}, false, err
	}
	var rec oauth.GrantRecord
	if err := decode(r, &rec); err != nil {
		return oauth.GrantRecord{}, false, err
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

// unindexGrant removes a deleted grant from the indexes.
func unindexGrant(tx *bbolt.Tx, g oauth.Grant) error {
	if g.UID == "" && g.ClientID == "" {
		return nil // a tombstone was never indexed
	}
	if err := tx.Bucket(bGrantsByUser).Delete(ownerKey(g.UID, g.ID)); err != nil {
		return fmt.Errorf("unindex grant by user: %w", err)
	}
	if err := tx.Bucket(bGrantsByCli).Delete(ownerKey(g.ClientID, g.ID)); err != nil {
		return fmt.Errorf("unindex grant by client: %w", err)
	}
	return nil
}
