package storetest

import (
	"context"
	"testing"

	"github.com/acmebank/authserver/shared/oauth"
)

// testCheckWrite: a store that can prove it takes writes (the readiness probe) does so
// repeatedly, and leaves the items the service reads (here the key registry) as they were.
func testCheckWrite(t *testing.T, s oauth.Store) {
	wc, ok := s.(oauth.WriteChecker)
	if !ok {
		t.Skip("this store has no write check")
	}
	ctx, now := context.Background(), start()
	before, err := s.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := wc.CheckWrite(ctx, now); err != nil {
			t.Fatalf("CheckWrite #%d: %v", i+1, err)
		}
	}
	after, err := s.Keys(ctx)
	if err != nil || after.Version != before.Version || len(after.Keys) != len(before.Keys) {
		t.Fatalf("CheckWrite changed the key registry: %+v → %+v (%v)", before, after, err)
	}
}
