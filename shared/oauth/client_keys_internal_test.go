package oauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

// TestKeySetCache_BoundedByCountAndBytes: the cache of parsed client keys never holds more
// entries than its count bound nor more bytes than its byte bound, keeps the most recently
// used, and keeps no entry larger than the byte bound.
func TestKeySetCache_BoundedByCountAndBytes(t *testing.T) {
	jwks := func(n int) json.RawMessage {
		var set jose.JSONWebKeySet
		for i := range n {
			k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.Public(), KeyID: fmt.Sprint("k", i), Use: "sig"})
		}
		b, _ := json.Marshal(set)
		return b
	}
	one, ten := jwks(1), jwks(10)
	oneSize := (&keySet{raw: string(one)}).size("c-00")
	for _, tc := range []struct {
		name               string
		entries, maxBytes  int
		wantMax            int
		wantLatestKept     bool
		tooLargeForTheByte bool
	}{
		{"count", 3, 1 << 20, 3, true, false},
		{"bytes", 100, 4 * oneSize, 4, true, false},
		{"entry larger than the bound", 100, len(ten), 0, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newKeySetCache(tc.entries, tc.maxBytes)
			raw := one
			if tc.tooLargeForTheByte {
				raw = ten
			}
			for i := range 20 {
				cl := &Client{ID: fmt.Sprintf("c-%02d", i), JWKS: raw}
				if _, err := c.parsed(cl); err != nil {
					t.Fatal(err)
				}
				c.mu.Lock()
				n, b := c.entries.Len(), c.bytes
				c.mu.Unlock()
				if n > tc.wantMax || b > tc.maxBytes {
					t.Fatalf("after %d clients: %d entries, %d bytes; bounds %d entries, %d bytes", i+1, n, b, tc.wantMax, tc.maxBytes)
				}
			}
			if _, ok := c.entries.Peek("c-19"); ok != tc.wantLatestKept {
				t.Fatalf("the most recent client cached: %v, want %v", ok, tc.wantLatestKept)
			}
		})
	}
}
