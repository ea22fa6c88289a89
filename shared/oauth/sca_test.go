package oauth

import (
	"slices"
	"testing"
	"time"
)

// TestAddAMR_MFAOnlyForTwoIndependentFactors: a password with a possession factor, or a
// passkey with user verification, is two factors; a password alone, a code alone or a passkey
// without user verification is one.
func TestAddAMR_MFAOnlyForTwoIndependentFactors(t *testing.T) {
	for _, tc := range []struct {
		start, add []string
		mfa        bool
	}{
		{nil, []string{AMRPassword}, false},
		{[]string{AMRPassword}, []string{AMROTP}, true},
		{[]string{AMRPassword}, []string{AMRHardware, AMRUser}, true},
		{nil, []string{AMRHardware, AMRUser}, true},
		{nil, []string{AMRSoftware, AMRUser}, true},
		{nil, []string{AMRHardware}, false},
		{nil, []string{AMROTP}, false},
		{[]string{AMRPassword, AMROTP, AMRMFA}, []string{AMROTP}, true},
	} {
		got := addAMR(tc.start, tc.add...)
		if AMRStrong(got) != tc.mfa || ACRFor(got) != map[bool]string{true: ACRStrong, false: ACRPassword}[tc.mfa] {
			t.Errorf("%v + %v = %v, want mfa %v", tc.start, tc.add, got, tc.mfa)
		}
		if n := len(got); n != len(slices.Compact(slices.Sorted(slices.Values(got)))) {
			t.Errorf("%v + %v = %v: a method twice", tc.start, tc.add, got)
		}
	}
}

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

// TestTOTPStep_WithinOneStepOnly: a code is matched to its step within one step of now,
// never further.
func TestTOTPStep_WithinOneStepOnly(t *testing.T) {
	const secret = "JBSWY3DPEHPK3PXP"
	now := time.Unix(1_800_000_000, 0)
	cur := now.Unix() / 30
	for off := int64(-3); off <= 3; off++ {
		code, err := codeAt(secret, cur+off)
		if err != nil {
			t.Fatal(err)
		}
		got := totpStep(secret, code, now)
		want := int64(-1)
		if off >= -1 && off <= 1 {
			want = cur + off
		}
		if got != want && !(want == -1 && got != -1 && got != cur+off) { // another step may share the code
			t.Errorf("offset %d: step %d, want %d", off, got, want)
		}
	}
	if totpStep(secret, "12345", now) != -1 || totpStep(secret, "abcdef", now) != -1 {
		t.Error("a malformed code matched")
	}
}
