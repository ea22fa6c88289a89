package oauth

import (
	"context"
	"time"
)

// Prefixes of the secrets of dynamic client registration (RFC 7591, RFC 7592), beside those of
// secret.go.
const (
	// PrefixInitialAccess is an operator's initial access token: it registers one client.
	PrefixInitialAccess = "iat_"
	// PrefixRegistrationAccess is a client's registration access token: it reads, replaces
	// and deletes that client at its registration_client_uri.
	PrefixRegistrationAccess = "rat_"
)

// InitialAccessToken is an operator's permission to register one client at the registration
// endpoint (RFC 7591 3, "initial access token"). The store keeps its hash only (HashToken);
// it is single-use: the registration it authorizes takes it (RegistrationStore).
type InitialAccessToken struct {
	Hash string `json:"hash" dynamodbav:"hash"`
	// Profile, when set (ProfileFAPI2), is the security profile every client registered with
	// the token is held to, whatever the request says.
	Profile   string    `json:"profile,omitempty" dynamodbav:"profile,omitempty"`
	CreatedAt time.Time `json:"created_at" dynamodbav:"created_at"`
	ExpiresAt time.Time `json:"expires_at" dynamodbav:"expires_at"`
}

// RegistrationStore keeps the operator's initial access tokens until they are used or expire.
type RegistrationStore interface {
	// PutInitialAccessToken stores a token until its ExpiresAt; ErrAlreadyExists when its hash
	// is taken.
	PutInitialAccessToken(ctx context.Context, t InitialAccessToken) error
	// TakeInitialAccessToken deletes and returns a live token, once: a token is single-use, so
	// of N racing calls for one hash exactly one gets it and the others get ErrNotFound, as
	// does an unknown or expired hash (which the call leaves as it was).
	TakeInitialAccessToken(ctx context.Context, hash string, now time.Time) (InitialAccessToken, error)
}
