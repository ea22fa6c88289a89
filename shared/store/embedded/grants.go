package embedded

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/bbolt"

	"github.com/acmebank/authserver/shared/oauth"
)

// storedCode is a code as stored: the code and whether it was consumed.
type storedCode struct {
	oauth.Code
	Used bool `json:"used,omitempty"`
}

// storedGrant is a grant as stored: the grant, whether it is revoked (a tombstone is a revoked
// grant of which only the id and the end are known), and the hashes of its live tokens.
type storedGrant struct {
	oauth.Grant
	Revoked bool     `json:"revoked,omitempty"`
	Tokens  []string `json:"tokens,omitempty"`
	// ConsumedAt marks a payment grant used at the bank API (ConsumeGrant).
	ConsumedAt time.Time `json:"consumed_at,omitzero"`
	// LastUsedAt is the grant's last refresh (IssueTokens).
	LastUsedAt time.Time `json:"last_used_at,omitzero"`
}

func (g storedGrant) record() oauth.GrantRecord {
	return oauth.GrantRecord{Grant: g.Grant, Revoked: g.Revoked, Tokens: g.Tokens, ConsumedAt: g.ConsumedAt, LastUsedAt: g.LastUsedAt}
}

// CreateCode stores a new authorization code (oauth.GrantStore).
func (s *Store) CreateCode(ctx context.Context, c oauth.Code) error {
	if err := requireExpiry("code", c.ExpiresAt); err != nil {
		return err
	}
	return s.update(ctx, func(tx *bbolt.Tx) error {
		return put(tx, bCodes, c.Hash, storedCode{Code: c})
	})
}

// ConsumeCode marks the code used and returns it, in one transaction (oauth.GrantStore). A
// code that is unknown, expired, another client's or already used is written nothing; the
// one-time values are recorded in the same transaction, and one used before writes nothing.
func (s *Store) ConsumeCode(ctx context.Context, hash, clientID string, now time.Time, once ...oauth.Once) (oauth.Code, error) {
	if err := requireOnceExpiry(once); err != nil {
		return oauth.Code{}, err
	}
	var c storedCode
	found := false
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		c, found = storedCode{}, false // fn may run again (see update): nothing from a run before
		if err := recordOnces(tx, once, now); err != nil {
			return err
		}
		ok, err := get(tx, bCodes, hash, &c)
		if err != nil {
			return err
		}
		if !ok || !live(c.ExpiresAt, now) || c.Grant.ClientID != clientID {
			return oauth.ErrNotFound
		}
		found = true
		if c.Used {
			return oauth.ErrUsed
		}
		c.Used = true
		return put(tx, bCodes, hash, c)
	})
	if !found {
		return oauth.Code{}, err
	}
	return c.Code, err
}

// IssueTokens writes the grant and both tokens in one transaction (oauth.GrantStore), after
// checking the grant's state in the same transaction.
func (s *Store) IssueTokens(ctx context.Context, in oauth.Issue, now time.Time) error {
	if err := requireExpiry("access token", in.Access.ExpiresAt); err != nil {
		return err
	}
	if in.Keep == nil && in.Refresh.Hash != "" {
		if err := requireExpiry("refresh token", in.Refresh.ExpiresAt); err != nil {
			return err
		}
	}
	if err := requireExpiry("grant", in.Grant.ExpiresAt); err != nil {
		return err
	}
	if err := requireOnceExpiry(in.Once); err != nil {
		return err
	}
	for _, t := range []*oauth.Token{&in.Access, &in.Refresh} {
		t.Spent, t.SpentAt, t.Successors, t.Retried = false, time.Time{}, nil, false
	}
	return s.update(ctx, func(tx *bbolt.Tx) error {
		if err := recordOnces(tx, in.Once, now); err != nil {
			return err
		}
		var g storedGrant
		exists, err := get(tx, bGrants, in.Grant.ID, &g)
		if err != nil {
			return err
		}
		switch {
		case in.FromCode && in.Rewrite != nil:
			if err := rewriteGrant(tx, g, exists, in, now); err != nil {
				return err
			}
		case in.FromCode && exists && g.Revoked:
			return oauth.ErrRevoked
		case in.FromCode && exists:
			return oauth.ErrAlreadyExists
		case !in.FromCode && (!exists || g.Revoked || !live(g.ExpiresAt, now)):
			return oauth.ErrRevoked
		}
		if in.FromCode {
			g = storedGrant{Grant: in.Grant}
		}
		if err := recordSuccessors(tx, in, now); err != nil {
			return err
		}
		if err := keepRefresh(tx, in, now); err != nil {
			return err
		}
		for _, h := range in.Retire {
			if err := del(tx, bTokens, h); err != nil {
				return err
			}
		}
		g.Tokens = in.Tokens
		if !in.FromCode {
			g.LastUsedAt = now
		}
		if err := put(tx, bGrants, g.ID, g); err != nil {
			return err
		}
		if err := put(tx, bTokens, in.Access.Hash, in.Access); err != nil {
			return err
		}
		if in.Keep != nil || in.Refresh.Hash == "" {
			return nil // a kept refresh token, or a payment grant's issuance (no refresh token)
		}
		return put(tx, bTokens, in.Refresh.Hash, in.Refresh)
	})
}

// rewriteGrant checks a merge's or a replace's rewrite of the stored grant g and deletes
// every token g lists, inside the issuance's transaction (oauth.GrantStore.IssueTokens): the
// caller then writes the new grant over it.
func rewriteGrant(tx *bbolt.Tx, g storedGrant, exists bool, in oauth.Issue, now time.Time) error {
	if !exists || g.Revoked || !live(g.ExpiresAt, now) || g.ClientID != in.Grant.ClientID || g.UID != in.Grant.UID {
		return oauth.ErrRevoked
	}
	if g.Revision != in.Rewrite.Revision {
		return oauth.ErrConflict
	}
	for _, h := range g.Tokens {
		if err := del(tx, bTokens, h); err != nil {
			return err
		}
	}
	return nil
}

// keepRefresh updates the Live list of the refresh token a non-rotating refresh keeps, if its
// list is still the one the caller read (oauth.GrantStore.IssueTokens): else ErrConflict.
func keepRefresh(tx *bbolt.Tx, in oauth.Issue, now time.Time) error {
	k := in.Keep
	if k == nil || in.FromCode {
		return nil
	}
	var t oauth.Token
	ok, err := get(tx, bTokens, k.Hash, &t)
	if err != nil {
		return err
	}
	if !ok || !live(t.ExpiresAt, now) || t.Kind != oauth.KindRefresh || t.Grant.ID != in.Grant.ID ||
		t.Grant.ClientID != in.Grant.ClientID || t.Spent || !slices.Equal(t.Live, k.Read) {
		return oauth.ErrConflict
	}
	t.Live = k.Live
	return put(tx, bTokens, k.Hash, t)
}

// recordSuccessors spends the refresh token a refresh names and writes on it the hashes its
// issuance writes, inside the issuance's transaction, so that the spend commits with the
// issuance or not at all (oauth.GrantStore.IssueTokens). For a retry it first checks what
// IssueTokens states, and deletes the successors it replaces.
func recordSuccessors(tx *bbolt.Tx, in oauth.Issue, now time.Time) error {
	hash := in.Spent
	if in.Retry != nil {
		hash = in.Retry.Token.Hash
	}
	if in.FromCode || hash == "" {
		return nil
	}
	var t oauth.Token
	ok, err := get(tx, bTokens, hash, &t)
	if err != nil {
		return err
	}
	valid := ok && live(t.ExpiresAt, now) && t.Kind == oauth.KindRefresh && t.Grant.ID == in.Grant.ID && t.Grant.ClientID == in.Grant.ClientID
	if in.Retry == nil {
		// The spend: a token spent (by a racing refresh) or gone since the caller read it.
		if !valid || t.Spent {
			return oauth.ErrConflict
		}
		t.Spent, t.SpentAt = true, now
	} else if !valid || !t.Spent {
		return oauth.ErrRevoked
	}
	if r := in.Retry; r != nil {
		if err := retryAllowed(tx, t, r, now); err != nil {
			return err
		}
		for _, h := range t.Successors {
			if err := del(tx, bTokens, h); err != nil {
				return err
			}
		}
		t.Retried = true
	}
	t.Successors = []string{in.Access.Hash, in.Refresh.Hash}
	return put(tx, bTokens, hash, t)
}

// retryAllowed checks a retry against the spent token t as stored (oauth.GrantStore.IssueTokens):
// the window, then the current successor refresh token (used or gone: reuse), and only then
// whether another retry won, so a duplicate is told from reuse by the winner's token.
func retryAllowed(tx *bbolt.Tx, t oauth.Token, r *oauth.Retry, now time.Time) error {
	if !t.SpentAt.Equal(r.Token.SpentAt) || t.Grant.ClientID != r.Token.Grant.ClientID || len(t.Successors) != 2 {
		return oauth.ErrConflict
	}
	if now.After(t.SpentAt.Add(r.Window)) {
		return oauth.ErrUsed
	}
	var next oauth.Token
	ok, err := get(tx, bTokens, t.Successors[1], &next)
	if err != nil {
		return err
	}
	if !ok || !live(next.ExpiresAt, now) || next.Spent {
		return oauth.ErrUsed
	}
	if t.Retried || !slices.Equal(t.Successors, r.Token.Successors) {
		return oauth.ErrConflict
	}
	return nil
}

// GetToken returns a live access or refresh token (oauth.GrantStore).
func (s *Store) GetToken(ctx context.Context, hash string, now time.Time) (oauth.Token, error) {
	var t oauth.Token
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		ok, err := get(tx, bTokens, hash, &t)
		if err != nil {
			return err
		}
		if !ok || !live(t.ExpiresAt, now) {
			return oauth.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return oauth.Token{}, err
	}
	return t, nil
}

// RevokeToken deletes one token; unknown tokens are not an error.
func (s *Store) RevokeToken(ctx context.Context, hash string) error {
	return s.update(ctx, func(tx *bbolt.Tx) error { return del(tx, bTokens, hash) })
}

// RevokeGrant marks the grant revoked and deletes every token it lists, in one transaction; an
// unknown grant gets a tombstone for TombstoneTTL (oauth.GrantStore). A revoked grant is kept
// at least as long as a tombstone, so that it blocks a late first issuance just the same.
func (s *Store) RevokeGrant(ctx context.Context, grantID string, now time.Time) error {
	keep := now.Add(TombstoneTTL)
	return s.update(ctx, func(tx *bbolt.Tx) error {
		var g storedGrant
		exists, err := get(tx, bGrants, grantID, &g)
		switch {
		case err != nil:
			return err
		case !exists:
			return put(tx, bGrants, grantID, storedGrant{Grant: oauth.Grant{ID: grantID, ExpiresAt: keep}, Revoked: true})
		case g.Revoked && len(g.Tokens) == 0:
			return nil
		}
		for _, h := range g.Tokens {
			if err := del(tx, bTokens, h); err != nil {
				return err
			}
		}
		g.Revoked, g.Tokens = true, nil
		if keep.After(g.ExpiresAt) {
			g.ExpiresAt = keep
		}
		return put(tx, bGrants, grantID, g)
	})
}

// ConsumeGrant marks a payment grant consumed in one write transaction (oauth.GrantStore):
// bbolt runs one at a time, so of racing calls exactly one finds it unconsumed. The one-time
// values are recorded first, and any refusal rolls the transaction back.
func (s *Store) ConsumeGrant(ctx context.Context, grantID string, now time.Time, once ...oauth.Once) error {
	if err := requireOnceExpiry(once); err != nil {
		return err
	}
	return s.update(ctx, func(tx *bbolt.Tx) error {
		if err := recordOnces(tx, once, now); err != nil {
			return err
		}
		var g storedGrant
		exists, err := get(tx, bGrants, grantID, &g)
		switch {
		case err != nil:
			return err
		case !exists || g.Revoked || !live(g.ExpiresAt, now):
			return oauth.ErrRevoked
		case !g.ConsumedAt.IsZero():
			return oauth.ErrUsed
		}
		g.ConsumedAt = now
		return put(tx, bGrants, grantID, g)
	})
}

// GetGrant returns a grant record, revoked ones and tombstones too (oauth.GrantStore).
func (s *Store) GetGrant(ctx context.Context, id string, now time.Time) (oauth.GrantRecord, error) {
	var g storedGrant
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		ok, err := get(tx, bGrants, id, &g)
		if err != nil {
			return err
		}
		if !ok || !live(g.ExpiresAt, now) {
			return oauth.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return oauth.GrantRecord{}, err
	}
	return g.record(), nil
}

// ListGrants lists the live grants of a user or a client, ordered by id. It reads every grant:
// it serves operators, not requests.
func (s *Store) ListGrants(ctx context.Context, f oauth.GrantFilter, now time.Time) ([]oauth.GrantRecord, error) {
	if f.UID == "" && f.ClientID == "" {
		return nil, fmt.Errorf("embedded store: list grants: the filter names neither a user nor a client")
	}
	var out []oauth.GrantRecord
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return forEach(tx, bGrants, func(g *storedGrant) {
			if g.Revoked || !live(g.ExpiresAt, now) {
				return
			}
			if (f.UID != "" && g.UID != f.UID) || (f.UID == "" && g.ClientID != f.ClientID) {
				return
			}
			out = append(out, g.record())
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
