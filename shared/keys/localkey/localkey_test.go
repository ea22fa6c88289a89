package localkey_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/keytest"
	"github.com/acmebank/authserver/shared/keys/localkey"
)

func newBackend(t *testing.T) keys.Backend {
	b, err := localkey.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestContract(t *testing.T) { keytest.Run(t, newBackend) }

func TestCreateKey_FileIsPrivateAndNamedByKid(t *testing.T) {
	dir := t.TempDir()
	b, err := localkey.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	ref, pub, err := b.CreateKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := keys.Thumbprint(pub) + ".pem"; ref != want {
		t.Fatalf("ref = %q, want %q", ref, want)
	}
	fi, err := os.Stat(filepath.Join(dir, ref))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("directory holds %d files, want only the key", len(entries))
	}
}

func TestSign_KeyReadFromFileByAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	a, _ := localkey.New(dir)
	ref, pub, err := a.CreateKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := localkey.New(dir) // a fresh process: nothing cached
	got, err := b.PublicKey(context.Background(), ref)
	if err != nil || !got.Equal(pub) {
		t.Fatalf("PublicKey from file = %v, %v", got, err)
	}
}

func TestRefs_OutsideTheDirectoryAreRefused(t *testing.T) {
	dir := t.TempDir()
	b, _ := localkey.New(filepath.Join(dir, "keys"))
	// A valid key file one level up must not be reachable through a crafted ref.
	a, _ := localkey.New(dir)
	ref, _, err := a.CreateKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d := sha256.Sum256([]byte("x"))
	for _, bad := range []string{"../" + ref, "/etc/passwd", "", ".pem", ".new-1.pem", "x.txt", `..\` + ref} {
		if _, err := b.Sign(context.Background(), bad, d[:]); !errors.Is(err, keys.ErrUnknownKey) {
			t.Errorf("Sign(%q) = %v, want ErrUnknownKey", bad, err)
		}
	}
}

func TestLoad_FileWithAnotherKeyIsRefused(t *testing.T) {
	dir := t.TempDir()
	b, _ := localkey.New(dir)
	ref1, _, _ := b.CreateKey(context.Background())
	ref2, _, _ := b.CreateKey(context.Background())
	data, _ := os.ReadFile(filepath.Join(dir, ref2))
	if err := os.WriteFile(filepath.Join(dir, ref1), data, 0o600); err != nil {
		t.Fatal(err)
	}
	fresh, _ := localkey.New(dir)
	_, err := fresh.PublicKey(context.Background(), ref1)
	if err == nil || !strings.Contains(err.Error(), "another key") {
		t.Fatalf("PublicKey of a swapped file = %v, want refusal", err)
	}
}
