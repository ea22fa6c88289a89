package seed

import (
	"context"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// TestLoad_IdempotentAndPasswordChanges: loading a file twice keeps the stored password hash
// (no re-hash), and a changed password is hashed anew and verifies.
func TestLoad_IdempotentAndPasswordChanges(t *testing.T) {
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	h := oauth.PasswordHasher{Time: 1, MemoryKiB: 64, Threads: 1}
	f := &File{Users: []User{{UID: "u1", Username: "Alice", Password: "first-password-123"}}}
	load := func() oauth.User {
		t.Helper()
		if _, err := Load(ctx, st, f, h, time.Now()); err != nil {
			t.Fatal(err)
		}
		u, err := st.GetUser(ctx, "u1")
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	first := load()
	if first.Username != "alice" {
		t.Fatalf("username %q was not normalised", first.Username)
	}
	if again := load(); again.PasswordHash != first.PasswordHash {
		t.Fatal("reloading an unchanged password re-hashed it")
	}
	f.Users[0].Password = "second-password-456"
	changed := load()
	if ok, _ := h.Verify("second-password-456", changed.PasswordHash); !ok {
		t.Fatal("the changed password does not verify")
	}
	if ok, _ := h.Verify("first-password-123", changed.PasswordHash); ok {
		t.Fatal("the old password still verifies")
	}
}
