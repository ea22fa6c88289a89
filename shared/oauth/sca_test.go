package oauth

import (
	"slices"
	"testing"
	"time"
)

// TestParseSCAPolicy_PaymentsAlwaysOrADuration.
func TestParseSCAPolicy_PaymentsAlwaysOrADuration(t *testing.T) {
	days := func(s string) (time.Duration, error) { return 180 * 24 * time.Hour, nil }
	for v, want := range map[string]SCAPolicy{
		"":         {Scopes: DefaultSCAScopes},
		"payments": {Scopes: DefaultSCAScopes},
		"always":   {Scopes: DefaultSCAScopes, Always: true},
		"180d":     {Scopes: DefaultSCAScopes, Every: 180 * 24 * time.Hour},
	} {
		got, err := ParseSCAPolicy(v, days)
		if err != nil || got.Always != want.Always || got.Every != want.Every || !slices.Equal(got.Scopes, want.Scopes) {
			t.Errorf("%q: %+v %v, want %+v", v, got, err, want)
		}
	}
	bad := func(string) (time.Duration, error) { return 0, nil }
	if _, err := ParseSCAPolicy("sometimes", bad); err == nil {
		t.Error("an unknown policy was accepted")
	}
}
