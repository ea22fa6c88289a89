// Package regional is the store of a multi-region deployment (docs/multiregion.md). The table
// is a DynamoDB global table: every region reads and writes its own replica, and replication
// between replicas is asynchronous (typically under a second) with last-writer-wins. A
// conditional write is evaluated against the replica it is sent to, so two regions could both
// consume one code, or both spend one refresh token, within the replication window.
//
// Store closes that window: the single-use writes of a code or a refresh token (its consume or
// spend, the issuance that follows, the revocation that a replay triggers, and revocations by
// the client) go to the
// replica of the code's or token's home, the region that issued it, named in the context by
// the domain (oauth.WithHome). One replica then serializes every write that decides who wins,
// as in a single region. Everything else (the pages' state, sessions, clients, users, the key
// registry) is served by the local replica. An access token not yet replicated to the local
// replica is looked up at its home.
//
// When a home is unreachable, its codes and refresh tokens cannot be used (the client gets
// temporarily_unavailable); codes live a minute, and a client whose refresh token's home is
// gone for longer signs its user in again.
package regional

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// Store serves a region's requests: Local is this region's replica (home Home), Peers the
// other homes' replicas, by home label.
type Store struct {
	oauth.Store
	Home  string
	Peers map[string]oauth.Store
}

// ErrUnknownHome is a code or token whose home is not a region of this deployment: it was not
// issued here (or the deployment's regions changed), so it is treated as unknown.
var ErrUnknownHome = errors.New("home region not configured")

// New returns the store of region home over its local replica and its peers' replicas.
func New(home string, local oauth.Store, peers map[string]oauth.Store) (*Store, error) {
	if !oauth.ValidHome(home) {
		return nil, fmt.Errorf("home label %q: want 1 to 32 lowercase letters, digits or dashes", home)
	}
	for h := range peers {
		if !oauth.ValidHome(h) || h == home {
			return nil, fmt.Errorf("peer home label %q is invalid or is this region's", h)
		}
	}
	return &Store{Store: local, Home: home, Peers: peers}, nil
}

// at returns the replica that decides for the home named in ctx.
func (s *Store) at(ctx context.Context) (oauth.Store, error) {
	h := oauth.HomeFrom(ctx)
	if h == "" || h == s.Home {
		return s.Store, nil
	}
	if p, ok := s.Peers[h]; ok {
		return p, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownHome, h)
}

func (s *Store) ConsumeCode(ctx context.Context, hash, clientID string, now time.Time) (oauth.Code, error) {
	st, err := s.at(ctx)
	if err != nil {
		return oauth.Code{}, fmt.Errorf("%w (%w)", oauth.ErrNotFound, err)
	}
	return st.ConsumeCode(ctx, hash, clientID, now)
}

func (s *Store) IssueTokens(ctx context.Context, in oauth.Issue, now time.Time) error {
	st, err := s.at(ctx)
	if err != nil {
		return fmt.Errorf("%w (%w)", oauth.ErrRevoked, err)
	}
	return st.IssueTokens(ctx, in, now)
}

func (s *Store) RevokeGrant(ctx context.Context, grantID string, now time.Time) error {
	st, err := s.at(ctx)
	if err != nil {
		return err
	}
	return st.RevokeGrant(ctx, grantID, now)
}

// TakeAuthRequest takes a pushed authorization request (RFC 9126) at its home, the region its
// client pushed it to, whichever region the browser reached; a pending request of the pages
// (no home named) is this region's.
func (s *Store) TakeAuthRequest(ctx context.Context, id string, now time.Time) (oauth.AuthRequest, error) {
	st, err := s.at(ctx)
	if err != nil {
		return oauth.AuthRequest{}, fmt.Errorf("%w (%w)", oauth.ErrNotFound, err)
	}
	return st.TakeAuthRequest(ctx, id, now)
}

// RevokeToken deletes the token at its home, where it was written: a delete in a replica that
// has not received the token yet would be undone when the token arrives.
func (s *Store) RevokeToken(ctx context.Context, hash string) error {
	st, err := s.at(ctx)
	if err != nil {
		return err
	}
	return st.RevokeToken(ctx, hash)
}

func (s *Store) GetGrant(ctx context.Context, id string, now time.Time) (oauth.GrantRecord, error) {
	st, err := s.at(ctx)
	if err != nil {
		return oauth.GrantRecord{}, fmt.Errorf("%w (%w)", oauth.ErrNotFound, err)
	}
	return st.GetGrant(ctx, id, now)
}

// GetToken reads the local replica first: an access token is checked on every API call, and
// its own region answers in one local read. A token the local replica does not have yet (issued
// at its home less than a replication delay ago) is read at its home.
func (s *Store) GetToken(ctx context.Context, hash string, now time.Time) (oauth.Token, error) {
	t, err := s.Store.GetToken(ctx, hash, now)
	if !errors.Is(err, oauth.ErrNotFound) {
		return t, err
	}
	h := oauth.HomeFrom(ctx)
	if h == "" || h == s.Home {
		return t, err
	}
	st, herr := s.at(ctx)
	if herr != nil {
		return t, err
	}
	return st.GetToken(ctx, hash, now)
}
