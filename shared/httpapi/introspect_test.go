package httpapi

import "testing"

// TestAcceptsIntrospectionJWT_NamedWithAPositiveQuality: the JWT response is asked for when an
// Accept value names application/token-introspection+jwt (RFC 9701 4) with a quality above
// zero, alone or in a list; wildcards and other types do not ask for it.
func TestAcceptsIntrospectionJWT_NamedWithAPositiveQuality(t *testing.T) {
	for _, tc := range []struct {
		accept []string
		want   bool
	}{
		{nil, false},
		{[]string{"application/json"}, false},
		{[]string{"*/*"}, false},
		{[]string{"application/jwt"}, false},
		{[]string{"application/token-introspection+jwt"}, true},
		{[]string{"Application/Token-Introspection+JWT"}, true},
		{[]string{"application/json;q=0.9, application/token-introspection+jwt"}, true},
		{[]string{"application/json", "application/token-introspection+jwt;q=0.5"}, true},
		{[]string{"application/token-introspection+jwt;q=0"}, false},
		{[]string{"application/token-introspection+jwt; q=0.000"}, false},
		{[]string{"application/token-introspection+jwt;q=0.001"}, true},
		{[]string{"application/token-introspection+jwt;;"}, false},
	} {
		if got := acceptsIntrospectionJWT(tc.accept); got != tc.want {
			t.Errorf("acceptsIntrospectionJWT(%q) = %v, want %v", tc.accept, got, tc.want)
		}
	}
}
