package oauth

import (
	"context"
	"strings"
	"time"
)

// Prefixes of the secrets of dynamic client registration (RFC 7591, RFC 7592), beside those of
// secret.go.
const (
	// PrefixInitialAccess is an operator's initial access token: it registers one client.
	PrefixInitialAccess = "iat_"
	// PrefixInitialAccessFAPI2 is one whose client is held to the fapi2 profile: the prefix
	// lets registration check the metadata under the profile before it spends the token (the
	// token's hash covers its prefix, so a changed prefix is an unknown token).
	PrefixInitialAccessFAPI2 = "iat-fapi2_"
	// PrefixRegistrationAccess is a client's registration access token: it reads, replaces
	// and deletes that client at its registration_client_uri.
	PrefixRegistrationAccess = "rat_"
)

// InitialAccessPrefix is the prefix of an initial access token for profile ("" or
// ProfileFAPI2).
func InitialAccessPrefix(profile string) string {
	if profile == ProfileFAPI2 {
		return PrefixInitialAccessFAPI2
	}
	return PrefixInitialAccess
}

// InitialAccessProfile is the profile an initial access token's prefix names ("" for none).
func InitialAccessProfile(token string) string {
	if strings.HasPrefix(token, PrefixInitialAccessFAPI2) {
		return ProfileFAPI2
	}
	return ""
}

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
	// GetInitialAccessToken reads a live token without taking it (ErrNotFound for an unknown,
	// expired or taken hash): a registration is refused on an unknown token before anything
	// of its metadata is checked or fetched.
	GetInitialAccessToken(ctx context.Context, hash string, now time.Time) (InitialAccessToken, error)
}

// Error codes of dynamic client registration (RFC 7591 3.2.2).
const (
	ErrCodeInvalidRedirectURI          = "invalid_redirect_uri"
	ErrCodeInvalidClientMetadata       = "invalid_client_metadata"
	ErrCodeInvalidSoftwareStatement    = "invalid_software_statement"
	ErrCodeUnapprovedSoftwareStatement = "unapproved_software_statement"
	registrationErrorStatus            = 400
)

// InvalidRedirectURI is a registration whose redirect_uris break the rules (RFC 7591 3.2.2).
func InvalidRedirectURI(format string, args ...any) *Error {
	return newError(ErrCodeInvalidRedirectURI, registrationErrorStatus, format, args...)
}

// InvalidClientMetadata is a registration whose other metadata break the rules (RFC 7591 3.2.2).
func InvalidClientMetadata(format string, args ...any) *Error {
	return newError(ErrCodeInvalidClientMetadata, registrationErrorStatus, format, args...)
}

// InvalidSoftwareStatement is a software statement that is malformed, badly signed, expired or
// not yet issued (RFC 7591 3.2.2).
func InvalidSoftwareStatement(format string, args ...any) *Error {
	return newError(ErrCodeInvalidSoftwareStatement, registrationErrorStatus, format, args...)
}

// UnapprovedSoftwareStatement is a software statement of an issuer the deployment does not
// trust (RFC 7591 3.2.2).
func UnapprovedSoftwareStatement(format string, args ...any) *Error {
	return newError(ErrCodeUnapprovedSoftwareStatement, registrationErrorStatus, format, args...)
}
