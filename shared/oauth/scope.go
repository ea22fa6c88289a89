package oauth

import (
	"slices"
	"strings"
)

// The scopes the service knows. ScopeTransfersWrite has a second documented spelling,
// ScopeTransfersWriteDotted; both name one scope, and a response spells it as the client asked.
const (
	ScopeOpenID               = "openid"
	ScopeEmail                = "email"
	ScopePhone                = "phone"
	ScopeProfile              = "profile"
	ScopeTransfersWrite       = "bank:transfers:write"
	ScopeTransfersWriteDotted = "bank:transfers.write"
)

// KnownScopes lists every scope in its canonical spelling, in the order pages and discovery
// show them.
var KnownScopes = []string{ScopeOpenID, ScopeEmail, ScopePhone, ScopeProfile, ScopeTransfersWrite, ScopeGrantQuery, ScopeGrantRevoke}

// CanonicalScope maps a scope's spelling to its canonical name; unknown scopes map to
// themselves.
func CanonicalScope(s string) string {
	if s == ScopeTransfersWriteDotted {
		return ScopeTransfersWrite
	}
	return s
}

// IsKnownScope reports whether s, in either spelling, is a scope the service issues.
func IsKnownScope(s string) bool {
	return slices.Contains(KnownScopes, CanonicalScope(s))
}

// Scopes is a list of scopes as a client spelled them, without duplicates, in request order.
type Scopes []string

// ParseScopes splits a space-delimited scope parameter (RFC 6749 3.3). Repeated scopes, in
// either spelling, are kept once. It runs in linear time: the parameter is the caller's, and a
// quadratic de-duplication made one 64 KiB request cost seconds of CPU.
func ParseScopes(s string) Scopes {
	var out Scopes
	seen := map[string]bool{}
	for _, f := range strings.Fields(s) {
		if c := CanonicalScope(f); !seen[c] {
			seen[c] = true
			out = append(out, f)
		}
	}
	return out
}

// String joins the scopes with spaces, as the scope parameter and response field spell them.
func (s Scopes) String() string { return strings.Join(s, " ") }

// Has reports whether the list holds scope, comparing canonical names.
func (s Scopes) Has(scope string) bool {
	c := CanonicalScope(scope)
	for _, x := range s {
		if CanonicalScope(x) == c {
			return true
		}
	}
	return false
}

// Contains reports whether every scope of sub is in s.
func (s Scopes) Contains(sub Scopes) bool {
	for _, x := range sub {
		if !s.Has(x) {
			return false
		}
	}
	return true
}

// Narrow returns the scopes of s that are also in want, spelled as want spells them, so that a
// refresh asking for the other spelling of the transfers scope gets it back in that spelling.
func (s Scopes) Narrow(want Scopes) Scopes {
	var out Scopes
	for _, w := range want {
		if s.Has(w) && !out.Has(w) {
			out = append(out, w)
		}
	}
	return out
}

// ValidateFor checks requested scopes against the known scopes and those the client may ask
// for; an empty request is refused too, since every grant of this service names its scopes.
func (s Scopes) ValidateFor(c *Client) *Error {
	if len(s) == 0 {
		return InvalidScope("the scope parameter is required")
	}
	for _, x := range s {
		if !IsKnownScope(x) {
			return InvalidScope("unknown scope '%s'", x)
		}
		if !Scopes(c.Scopes).Has(x) {
			return InvalidScope("the client may not request scope '%s'", x)
		}
	}
	return nil
}

// ScopeOfflineAccess is OIDC Core 11's scope for a refresh token: the service does not issue
// it (refresh tokens come with every code exchange), and a token without a user never may.
const ScopeOfflineAccess = "offline_access"

// userScopes are the scopes that only make sense with a user: OpenID Connect's (the user's
// identity and claims, offline access to them) and Grant Management's (which act on a user's
// grant). A token without a user (client_credentials) never carries one.
var userScopes = []string{ScopeOpenID, ScopeEmail, ScopePhone, ScopeProfile, ScopeOfflineAccess, ScopeGrantQuery, ScopeGrantRevoke}

// NeedsUser reports whether scope (either spelling) is only granted by a user.
func NeedsUser(scope string) bool {
	return slices.Contains(userScopes, CanonicalScope(scope))
}

// ClientOnlyScopes are the scopes a client_credentials token of c may carry: the client's
// registered scopes that need no user (NeedsUser).
func ClientOnlyScopes(c *Client) Scopes {
	var out Scopes
	for _, s := range c.Scopes {
		if !NeedsUser(s) {
			out = append(out, s)
		}
	}
	return out
}
