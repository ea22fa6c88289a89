package registration

import (
	"context"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// FuzzRead: whatever body a caller sends, reading it as registration metadata never panics,
// and a refusal is one of RFC 7591's errors (400), never a server error.
func FuzzRead(f *testing.F) {
	for _, seed := range []string{`{}`, `{"redirect_uris":["https://a.example/cb"],"scope":"openid","jwks":{"keys":[]}}`,
		`{"client_name":1}`, `{"a":1,"a":2}`, `[`, `{"software_statement":"a.b.c"}`, `{"grant_types":[null]}`, `null`} {
		f.Add([]byte(seed))
	}
	g := &Registrar{keysOf: inlineOrFetched(nil)}
	f.Fuzz(func(t *testing.T, body []byte) {
		_, _, err := g.read(context.Background(), body, time.Now())
		if err != nil && oauth.AsError(err).Status != 400 {
			t.Fatalf("refusal %v is not a 400 of RFC 7591", err)
		}
	})
}
