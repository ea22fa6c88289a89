package web

import (
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// TestLastUsed_IsThePaymentsUseAtTheBankAPIWhenLater: the Connected apps page's "last used" is
// the grant's last exchange or refresh, or a payment grant's one use at the bank API
// (ConsumedAt) when that came later.
func TestLastUsed_IsThePaymentsUseAtTheBankAPIWhenLater(t *testing.T) {
	exchanged := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		rec  oauth.GrantRecord
		want time.Time
	}{
		{"exchanged, never consumed", oauth.GrantRecord{LastUsedAt: exchanged}, exchanged},
		{"a payment consumed after its exchange", oauth.GrantRecord{LastUsedAt: exchanged, ConsumedAt: exchanged.Add(time.Minute)}, exchanged.Add(time.Minute)},
		{"refreshed after a consumption", oauth.GrantRecord{LastUsedAt: exchanged.Add(time.Hour), ConsumedAt: exchanged.Add(time.Minute)}, exchanged.Add(time.Hour)},
		{"never used", oauth.GrantRecord{}, time.Time{}},
	} {
		if got := lastUsed(&c.rec); !got.Equal(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
