package oauth

import (
	"testing"
	"time"
)

// A token request's one-time values (a FAPI request's assertion and proof jtis) become the
// store's form in one allocation, and no value is none (nil).
func TestOnces_OneAllocationForTheRequestsValues(t *testing.T) {
	exp := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	values := []OneTime{{key: "assertion:j1", expires: exp}, {}, {key: "dpop:j2", expires: exp}}
	got := onces(values)
	if len(got) != 2 || got[0] != (Once{Key: "assertion:j1", Expires: exp}) || got[1] != (Once{Key: "dpop:j2", Expires: exp}) {
		t.Fatalf("onces = %v", got)
	}
	if n := testing.AllocsPerRun(100, func() { onces(values) }); n != 1 {
		t.Fatalf("onces allocated %v times, want 1", n)
	}
	if onces([]OneTime{{}, {}}) != nil || onces(nil) != nil {
		t.Fatal("no value is not nil")
	}
}
