package dynamo

import (
	"context"
	"fmt"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// PutInitialAccessToken writes an operator's initial access token (IAT#<hash>) until it
// expires, with a TTL; a taken hash is oauth.ErrAlreadyExists.
func (s *Store) PutInitialAccessToken(ctx context.Context, t oauth.InitialAccessToken) error {
	if t.ExpiresAt.IsZero() {
		return fmt.Errorf("put initial access token: it has no expiry")
	}
	item, err := newItem(typeIAT, t.Hash, t)
	if err != nil {
		return fmt.Errorf("put initial access token: %w", err)
	}
	setExpiry(item, t.ExpiresAt)
	return s.putNew(ctx, "put initial access token", item)
}

// GetInitialAccessToken is one strongly consistent GetItem; an expired token (not yet removed
// by the TTL) is oauth.ErrNotFound.
func (s *Store) GetInitialAccessToken(ctx context.Context, hash string, now time.Time) (oauth.InitialAccessToken, error) {
	return getLive[oauth.InitialAccessToken](ctx, s, "get initial access token", key(typeIAT, hash), now)
}

// TakeInitialAccessToken is one conditional DeleteItem that returns the item it deleted: of
// racing calls only the one whose delete found the live token gets it.
func (s *Store) TakeInitialAccessToken(ctx context.Context, hash string, now time.Time) (oauth.InitialAccessToken, error) {
	return takeLive[oauth.InitialAccessToken](ctx, s, "take initial access token", key(typeIAT, hash), now)
}
