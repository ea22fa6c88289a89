package admin_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/acmebank/authserver/shared/admin"
	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/seed"
)

// BenchmarkImportUsers measures an import row on the embedded store: with the test's cheap
// argon2id cost (the store's share) and with the production default (the hash dominates).
func BenchmarkImportUsers(b *testing.B) {
	for _, hc := range []struct {
		name   string
		hasher authn.PasswordHasher
	}{{"cheap-hash", cheapHasher}, {"default-hash", authn.DefaultPasswordHasher}} {
		b.Run(hc.name, func(b *testing.B) {
			s, _ := newService(b)
			s.Passwords = hc.hasher
			rows := make([]admin.ImportRow, b.N)
			for i := range rows {
				rows[i] = admin.ImportRow{Where: fmt.Sprint(i), User: seed.User{
					Username: fmt.Sprintf("user%d", i), Password: "a-long-enough-passphrase", Email: fmt.Sprintf("u%d@example.com", i)}}
			}
			b.ResetTimer()
			rep := s.ImportUsers(context.Background(), rows, admin.ImportOptions{})
			if rep.Created != b.N {
				b.Fatalf("created %d of %d", rep.Created, b.N)
			}
		})
	}
}
