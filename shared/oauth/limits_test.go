package oauth

import (
	"slices"
	"testing"
)

// TestAuthorizeParamLimits_NameParametersTheRequestReads: every limit names a parameter that
// ParseAuthorizeParams reads, once, and reads that parameter's value; every parameter kept with
// a pending request has a limit.
func TestAuthorizeParamLimits_NameParametersTheRequestReads(t *testing.T) {
	seen := map[string]bool{}
	for _, l := range AuthorizeParamLimits() {
		if !slices.Contains(authorizeParamNames, l.Name) || seen[l.Name] || l.Max <= 0 {
			t.Fatalf("limit %+v: not a parameter of the request, repeated, or not positive", l)
		}
		seen[l.Name] = true
		p, _ := ParseAuthorizeParams(map[string][]string{l.Name: {"value-of-" + l.Name}})
		if got := l.get(&p); got != "value-of-"+l.Name {
			t.Fatalf("the %s limit reads %q", l.Name, got)
		}
	}
	for _, n := range authorizeParamNames {
		// A request object is refused, never kept; authorization_details has its own bound
		// (rar.MaxBytes), refused as invalid_authorization_details (RFC 9396 5).
		if !seen[n] && n != "request" && n != "authorization_details" {
			t.Fatalf("the %s parameter has no limit", n)
		}
	}
	if limitOf("nonce").Max != 2048 || limitOf("no-such").Max != 0 {
		t.Fatal("limitOf")
	}
}
