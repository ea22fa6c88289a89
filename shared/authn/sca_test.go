package authn

import (
	"slices"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// TestAddAMR_MFAOnlyForTwoIndependentFactors: a password with a possession factor, or a
// passkey with user verification, is two factors; a password alone, a code alone or a passkey
// without user verification is one.
func TestAddAMR_MFAOnlyForTwoIndependentFactors(t *testing.T) {
	for _, tc := range []struct {
		start, add []string
		mfa        bool
	}{
		{nil, []string{oauth.AMRPassword}, false},
		{[]string{oauth.AMRPassword}, []string{oauth.AMROTP}, true},
		{[]string{oauth.AMRPassword}, []string{oauth.AMRHardware, oauth.AMRUser}, true},
		{nil, []string{oauth.AMRHardware, oauth.AMRUser}, true},
		{nil, []string{oauth.AMRSoftware, oauth.AMRUser}, true},
		{nil, []string{oauth.AMRHardware}, false},
		{nil, []string{oauth.AMROTP}, false},
		{[]string{oauth.AMRPassword, oauth.AMROTP, oauth.AMRMFA}, []string{oauth.AMROTP}, true},
	} {
		got := addAMR(tc.start, tc.add...)
		if oauth.AMRStrong(got) != tc.mfa || oauth.ACRFor(got) != map[bool]string{true: oauth.ACRStrong, false: oauth.ACRPassword}[tc.mfa] {
			t.Errorf("%v + %v = %v, want mfa %v", tc.start, tc.add, got, tc.mfa)
		}
		if n := len(got); n != len(slices.Compact(slices.Sorted(slices.Values(got)))) {
			t.Errorf("%v + %v = %v: a method twice", tc.start, tc.add, got)
		}
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
