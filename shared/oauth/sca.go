package oauth

import (
	"fmt"
	"strings"
	"time"
)

// SCAPolicy says when a sign-in must be strong (two factors) before the consent page: the
// setting (AUTH_SCA_POLICY), which package authn applies (authn.Service.NeedsStrongAuth).
type SCAPolicy struct {
	// Always requires strong authentication for every sign-in.
	Always bool
	// Scopes require it when requested (by default the payment scope, both spellings).
	Scopes []string
	// Every, when set, requires it of any sign-in whose user has not completed strong
	// authentication within this long (PSD2 RTS art. 10: 180 days for account information).
	Every time.Duration
}

// DefaultSCAScopes are the scopes that require strong authentication by default: payments.
var DefaultSCAScopes = []string{ScopeTransfersWrite, ScopeTransfersWriteDotted}

// ParseSCAPolicy reads AUTH_SCA_POLICY: "payments" (the default: the scopes of
// DefaultSCAScopes), "always", or a duration ("180d") for payments plus any sign-in whose
// last strong authentication is older than that.
func ParseSCAPolicy(v string, parseDuration func(string) (time.Duration, error)) (SCAPolicy, error) {
	p := SCAPolicy{Scopes: DefaultSCAScopes}
	switch v = strings.TrimSpace(v); v {
	case "", "payments":
		return p, nil
	case "always":
		p.Always = true
		return p, nil
	}
	d, err := parseDuration(v)
	if err != nil || d <= 0 {
		return SCAPolicy{}, fmt.Errorf("want payments, always or a positive duration such as 180d, got %q", v)
	}
	p.Every = d
	return p, nil
}
