package bolt_test

import (
	"path/filepath"
	"testing"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/bolt"
	"github.com/acmebank/authserver/shared/store/storetest"
)

// openTemp opens a store in a fresh temporary directory, closed when the test ends.
func openTemp(tb testing.TB) *bolt.Store {
	tb.Helper()
	s, err := bolt.Open(filepath.Join(tb.TempDir(), "data", "store.db"))
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) oauth.Store { return openTemp(t) })
}
