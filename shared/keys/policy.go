package keys

import "github.com/acmebank/authserver/shared/keys/keypolicy"

// The key lifecycle's rule lives in the leaf package keypolicy, which shared/config also uses to
// validate the settings at load; these names keep it reachable as keys.X.

// Default timing of the key lifecycle (keypolicy). Each is a zero-value default of Policy.
const (
	DefaultRotationPeriod = keypolicy.DefaultRotationPeriod
	DefaultJWKSCacheTTL   = keypolicy.DefaultJWKSCacheTTL
	DefaultIDTokenTTL     = keypolicy.DefaultIDTokenTTL
	DefaultClockSkew      = keypolicy.DefaultClockSkew
	DefaultMargin         = keypolicy.DefaultMargin
)

// Policy is the timing of the key lifecycle: keypolicy.Policy.
type Policy = keypolicy.Policy

// ErrUnpublishedSigner is keypolicy.ErrUnpublishedSigner.
var ErrUnpublishedSigner = keypolicy.ErrUnpublishedSigner

// DefaultPolicy returns the defaults spelled out.
func DefaultPolicy() Policy { return keypolicy.DefaultPolicy() }
