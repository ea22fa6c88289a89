package oauth_test

import (
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// TestGrantRecord_LastUsedIsTheLastRefreshOrPaymentElseTheExchange: the Connected apps page's
// and authctl's "last used" is the grant's last refresh, or a payment grant's one use at the
// bank API (ConsumedAt) when later; a grant never refreshed nor consumed was last used at its
// code exchange, its creation to within the code's lifetime.
func TestGrantRecord_LastUsedIsTheLastRefreshOrPaymentElseTheExchange(t *testing.T) {
	created := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	g := oauth.Grant{CreatedAt: created}
	for _, c := range []struct {
		name string
		rec  oauth.GrantRecord
		want time.Time
	}{
		{"exchanged only", oauth.GrantRecord{Grant: g}, created},
		{"refreshed", oauth.GrantRecord{Grant: g, LastUsedAt: created.Add(time.Hour)}, created.Add(time.Hour)},
		{"a payment used at the bank API", oauth.GrantRecord{Grant: g, ConsumedAt: created.Add(time.Minute)}, created.Add(time.Minute)},
		{"refreshed after a consumption", oauth.GrantRecord{Grant: g, LastUsedAt: created.Add(time.Hour), ConsumedAt: created.Add(time.Minute)}, created.Add(time.Hour)},
	} {
		if got := c.rec.LastUsed(); !got.Equal(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
