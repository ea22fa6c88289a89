package embedded_test

import (
	"testing"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
	"github.com/acmebank/authserver/shared/store/storetest"
)

// openTemp opens a store in a fresh temporary directory, closed when the test ends.
func openTemp(tb testing.TB, opts embedded.Options) (*embedded.Store, string) {
	tb.Helper()
	dir := tb.TempDir()
	s, err := embedded.OpenWith(dir, opts)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s, dir
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) oauth.Store { s, _ := openTemp(t, embedded.Options{}); return s })
}
