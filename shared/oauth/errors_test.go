package oauth

import (
	"strings"
	"testing"
)

// Descriptions keep to RFC 6749 5.2's characters and 200 bytes whether they are fixed or
// formatted from the caller's input; a fixed clean one is kept as written.
func TestNewError_DescriptionCleanedAndBounded(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, c := range []struct {
		name string
		err  *Error
		want string
	}{
		{"fixed", InvalidToken("the access token is invalid, expired or revoked"), "the access token is invalid, expired or revoked"},
		{"fixed_with_quote", InvalidRequest(`a "quoted" \ word`), "a ?quoted? ? word"},
		{"fixed_too_long", InvalidRequest("%s", long), long[:200]},
		{"formatted", InvalidRequest("the %s parameter is repeated", "scope"), "the scope parameter is repeated"},
		{"formatted_input", InvalidScope("unknown scope '%s'", "a\"b\x00é"), "unknown scope 'a?b???'"},
		{"formatted_too_long", InvalidScope("unknown scope '%s'", long), ("unknown scope '" + long)[:200]},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.err.Description != c.want {
				t.Fatalf("description %q, want %q", c.err.Description, c.want)
			}
		})
	}
}
