package oauth

import (
	"context"
	"slices"
	"time"
)

// Strong customer authentication (PSD2 RTS): a user may hold, besides the password, passkeys
// (WebAuthn) and a TOTP authenticator with one-time recovery codes. Which factors a sign-in
// used is recorded as RFC 8176 amr values in the session, and reaches the id_token with an acr.

// Factor kinds.
const (
	FactorPasskey = "passkey"
	FactorTOTP    = "totp"
)

// Authentication method references (RFC 8176 2).
const (
	AMRPassword = "pwd"
	AMROTP      = "otp"
	AMRHardware = "hwk" // a passkey bound to its device
	AMRSoftware = "swk" // a synced passkey (backup eligible)
	AMRUser     = "user"
	AMRMFA      = "mfa"
)

// Authentication context classes: what the id_token's acr says, and what acr_values ask for.
const (
	// ACRPassword is a sign-in with one factor.
	ACRPassword = "urn:acmebank:acr:pwd"
	// ACRStrong is strong customer authentication: two independent factors (PSD2 RTS art. 4).
	ACRStrong = "urn:acmebank:acr:sca"
)

// ACRValues are the classes the service can satisfy (acr_values_supported).
var ACRValues = []string{ACRPassword, ACRStrong}

// Factor is one of a user's second factors.
type Factor struct {
	ID         string    `json:"id" dynamodbav:"id"`
	Kind       string    `json:"kind" dynamodbav:"kind"`
	CreatedAt  time.Time `json:"created_at" dynamodbav:"created_at"`
	LastUsedAt time.Time `json:"last_used_at,omitzero" dynamodbav:"last_used_at,omitempty"`

	// A passkey: the WebAuthn credential record, as JSON (package authn writes and reads it).
	Credential []byte `json:"credential,omitempty" dynamodbav:"credential,omitempty"`
	// CredentialID is the credential's id, to find it among the user's.
	CredentialID []byte `json:"credential_id,omitempty" dynamodbav:"credential_id,omitempty"`

	// A TOTP authenticator: the shared secret (base32) and the last time step accepted, so a
	// code is never accepted twice.
	Secret   string `json:"secret,omitempty" dynamodbav:"secret,omitempty"`
	LastStep int64  `json:"last_step,omitempty" dynamodbav:"last_step,omitempty"`
	// RecoveryHashes are the SHA-256 of the unused recovery codes issued with the TOTP
	// authenticator; each is removed when used.
	RecoveryHashes []string `json:"recovery_hashes,omitempty" dynamodbav:"recovery_hashes,omitempty"`
}

// UserFactors are all the second factors of one user, kept as one versioned record: a
// sign-in reads them with one read, and every change is one compare-and-swap, so a TOTP code
// or a recovery code raced by many requests is accepted once.
type UserFactors struct {
	UID     string   `json:"uid" dynamodbav:"uid"`
	Factors []Factor `json:"factors" dynamodbav:"factors"`
	// LastStrongAuth is when the user last completed strong authentication (the policy may
	// ask for it again after a while).
	LastStrongAuth time.Time `json:"last_strong_auth,omitzero" dynamodbav:"last_strong_auth,omitempty"`
	// RemovedAt is when the operator last removed or reset a factor: a session made strong
	// before it is strong no more (NeedsStrongAuth), since the factor it passed may be the lost
	// one.
	RemovedAt time.Time `json:"removed_at,omitzero" dynamodbav:"removed_at,omitempty"`
	Version   int64     `json:"version" dynamodbav:"version"`
}

// Has reports whether the user holds a factor of kind.
func (f UserFactors) Has(kind string) bool {
	return slices.ContainsFunc(f.Factors, func(x Factor) bool { return x.Kind == kind })
}

// Any reports whether the user holds any second factor.
func (f UserFactors) Any() bool { return len(f.Factors) > 0 }

// FactorStore keeps users' second factors.
type FactorStore interface {
	// Factors returns the user's factors (an empty set, Version 0, when none was ever written).
	Factors(ctx context.Context, uid string) (UserFactors, error)
	// UpdateFactors applies fn to the user's factors and writes the result if the record's
	// version is unchanged (setting Version to the read one plus one); otherwise it returns
	// ErrConflict and writes nothing. An error of fn is returned and nothing is written.
	UpdateFactors(ctx context.Context, uid string, fn func(UserFactors) (UserFactors, error)) error
}

// AMRStrong reports whether amr records two independent factors.
func AMRStrong(amr []string) bool { return slices.Contains(amr, AMRMFA) }

// ACRFor is the authentication context class amr meets.
func ACRFor(amr []string) string {
	if AMRStrong(amr) {
		return ACRStrong
	}
	return ACRPassword
}
