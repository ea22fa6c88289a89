package oauth

import (
	"context"
	"strings"
)

// A home is where a code's or a token's single-use state lives: in a multi-region deployment,
// the region that issued it (docs/multiregion.md). Codes and tokens carry their home after
// their type prefix ("ac_eu-west-1.…"): base64url never contains '.', so the label is
// unambiguous. A deployment with one home (Service.Home empty) issues them without a label,
// and a token without a label belongs to whichever home reads it.
//
// The domain only names the home of what it is working on, in the context of the store calls
// (WithHome); which store serves a home is the adapters' business
// (shared/store/regional), so the domain knows nothing of regions or replicas.

type homeKey struct{}

// WithHome returns ctx naming home as the home of the code or token the store calls made with
// it act on. An empty home leaves ctx as it is.
func WithHome(ctx context.Context, home string) context.Context {
	if home == "" {
		return ctx
	}
	return context.WithValue(ctx, homeKey{}, home)
}

// HomeFrom returns the home WithHome put in ctx ("" when none).
func HomeFrom(ctx context.Context) string {
	h, _ := ctx.Value(homeKey{}).(string)
	return h
}

// HomeOf returns the home label a code or token carries after its type prefix ("" when it
// carries none, or is not one of ours).
func HomeOf(token string) string {
	_, rest, ok := strings.Cut(token, "_")
	if !ok {
		return ""
	}
	home, _, ok := strings.Cut(rest, ".")
	if !ok || !ValidHome(home) {
		return ""
	}
	return home
}

// ValidHome reports whether s can be a home label: 1 to 32 lowercase letters, digits and
// dashes (an AWS region name, say).
func ValidHome(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// homePrefix is prefix with the service's home label, for the codes and tokens it issues.
func (s *Service) homePrefix(prefix string) string {
	if s.Home == "" {
		return prefix
	}
	return prefix + s.Home + "."
}
