package oauth

import (
	"context"
	"strings"
	"testing"
)

func TestHomeOf_ReadsTheLabelAfterThePrefix(t *testing.T) {
	s := &Service{Home: "eu-west-1"}
	code := NewSecret(s.homePrefix(PrefixCode))
	if !strings.HasPrefix(code, "ac_eu-west-1.") || HomeOf(code) != "eu-west-1" {
		t.Fatalf("code %q: home %q", code[:16], HomeOf(code))
	}
	for _, tok := range []string{NewSecret(PrefixRefresh), "", "rt_", "rt_EU.x", "nohome", "rt_" + strings.Repeat("a", 33) + ".x"} {
		if h := HomeOf(tok); h != "" {
			t.Errorf("HomeOf(%q) = %q, want none", tok, h)
		}
	}
	if (&Service{}).homePrefix(PrefixAccess) != PrefixAccess {
		t.Error("a service with no home labels its tokens")
	}
	if HomeFrom(WithHome(context.Background(), "")) != "" || HomeFrom(WithHome(context.Background(), "x")) != "x" {
		t.Error("WithHome/HomeFrom")
	}
}
