package oauth

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/go-jose/go-jose/v4"
)

// errUnreadableClientKeys is answered when a client's registered keys cannot be read.
var errUnreadableClientKeys = errors.New("the client's registered keys are unreadable")

// clientKeys is the one lookup of the public keys a client signs with: its client assertions
// (private_key_jwt) and anything else it signs are verified with what this returns. kid, when
// not empty, narrows the set to the keys of that id.
func (s *Service) clientKeys(_ context.Context, c *Client, kid string) ([]jose.JSONWebKey, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(c.JWKS, &set); err != nil {
		return nil, errUnreadableClientKeys
	}
	if kid != "" {
		return set.Key(kid), nil
	}
	return set.Keys, nil
}
