package admin

import (
	"context"
	"fmt"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// MaxInitialAccessTTL bounds an initial access token's lifetime: it is handed to a third
// party out of band, and a long-lived one is a standing permission to register.
const MaxInitialAccessTTL = 30 * 24 * time.Hour

// CreateInitialAccessToken issues an initial access token for dynamic client registration
// (RFC 7591 3): single-use, valid for ttl (at most MaxInitialAccessTTL), holding the client it
// registers to profile ("" or oauth.ProfileFAPI2), and labelled with home (AUTH_HOME_REGION;
// "" in one region) so a multi-region deployment takes it where it was stored. It returns the
// token, which exists only here: the store keeps its hash.
func (s *Service) CreateInitialAccessToken(ctx context.Context, ttl time.Duration, profile, home string) (string, time.Time, error) {
	if ttl <= 0 || ttl > MaxInitialAccessTTL {
		return "", time.Time{}, invalid("the token's lifetime must be positive and at most %s", MaxInitialAccessTTL)
	}
	if err := oauth.ValidProfile(profile); err != nil {
		return "", time.Time{}, invalid("%s", err)
	}
	prefix := oauth.InitialAccessPrefix(profile)
	if home != "" {
		prefix += home + "."
	}
	token := oauth.NewSecret(prefix)
	now := s.now().UTC()
	t := oauth.InitialAccessToken{Hash: oauth.HashToken(token), Profile: profile, CreatedAt: now, ExpiresAt: now.Add(ttl)}
	if err := s.Store.PutInitialAccessToken(ctx, t); err != nil {
		return "", time.Time{}, fmt.Errorf("store the initial access token: %w", err)
	}
	s.audit(ctx, "initial_access_token_create", "", "")
	return token, t.ExpiresAt, nil
}
