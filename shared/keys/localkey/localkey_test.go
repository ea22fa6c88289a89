package localkey_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
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

func TestCreateKey_FileIsPrivatePKCS8AndNamedByKid(t *testing.T) {
	for _, alg := range keys.Algs {
		dir := t.TempDir()
		b, err := localkey.New(dir)
		if err != nil {
			t.Fatal(err)
		}
		ref, pub, err := b.CreateKey(context.Background(), alg)
		if err != nil {
			t.Fatal(err)
		}
		kid, _ := keys.Thumbprint(pub)
		if want := kid + ".pem"; ref != want {
			t.Fatalf("%s: ref = %q, want %q", alg, ref, want)
		}
		fi, err := os.Stat(filepath.Join(dir, ref))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: key file mode %v, want 0600", alg, fi.Mode().Perm())
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 {
			t.Fatalf("%s: directory holds %d files, want only the key", alg, len(entries))
		}
		data, _ := os.ReadFile(filepath.Join(dir, ref))
		block, _ := pem.Decode(data)
		if block == nil || block.Type != "PRIVATE KEY" {
			t.Fatalf("%s: key file is not a PKCS #8 PEM block", alg)
		}
		priv, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil || !priv.(crypto.Signer).Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(pub) {
			t.Fatalf("%s: key file holds another key (%v)", alg, err)
		}
	}
}

// TestLoad_SEC1AndPKCS1FilesAreRead: key files written by openssl's older defaults (an
// "EC PRIVATE KEY" or "RSA PRIVATE KEY" block) sign too, once named by their kid.
func TestLoad_SEC1AndPKCS1FilesAreRead(t *testing.T) {
	dir := t.TempDir()
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalECPrivateKey(ec)
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	for alg, f := range map[string]struct {
		block *pem.Block
		pub   crypto.PublicKey
	}{
		keys.ES256: {&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecDER}, &ec.PublicKey},
		keys.PS256: {&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rk)}, &rk.PublicKey},
	} {
		kid, _ := keys.Thumbprint(f.pub)
		if err := os.WriteFile(filepath.Join(dir, kid+".pem"), pem.EncodeToMemory(f.block), 0o600); err != nil {
			t.Fatal(err)
		}
		b, _ := localkey.New(dir)
		d := sha256.Sum256([]byte("x"))
		sig, err := b.Sign(context.Background(), kid+".pem", alg, d[:])
		if err != nil {
			t.Fatalf("%s: %v", alg, err)
		}
		if err := keys.VerifyDigest(f.pub, alg, d[:], sig); err != nil {
			t.Fatalf("%s: %v", alg, err)
		}
	}
}

// TestLoad_WeakKeysAreRefused: an RSA key under 2048 bits or an EC key on another curve is
// never loaded, whatever its file is named.
func TestLoad_WeakKeysAreRefused(t *testing.T) {
	dir := t.TempDir()
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	for name, key := range map[string]crypto.Signer{"rsa1024.pem": small, "p384.pem": p384} {
		der, _ := x509.MarshalPKCS8PrivateKey(key)
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		b, _ := localkey.New(dir)
		if _, err := b.PublicKey(context.Background(), name); err == nil {
			t.Errorf("%s was loaded", name)
		}
	}
}

func TestSign_KeyReadFromFileByAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	a, _ := localkey.New(dir)
	for _, alg := range keys.Algs {
		ref, pub, err := a.CreateKey(context.Background(), alg)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := localkey.New(dir) // a fresh process: nothing cached
		got, err := b.PublicKey(context.Background(), ref)
		if err != nil || !got.(interface{ Equal(crypto.PublicKey) bool }).Equal(pub) {
			t.Fatalf("%s: PublicKey from file = %v, %v", alg, got, err)
		}
		d := sha256.Sum256([]byte("x"))
		sig, err := b.Sign(context.Background(), ref, alg, d[:])
		if err == nil {
			err = keys.VerifyDigest(pub, alg, d[:], sig)
		}
		if err != nil {
			t.Fatalf("%s: signing with the key read from file: %v", alg, err)
		}
	}
}

func TestRefs_OutsideTheDirectoryAreRefused(t *testing.T) {
	dir := t.TempDir()
	b, _ := localkey.New(filepath.Join(dir, "keys"))
	// A valid key file one level up must not be reachable through a crafted ref.
	a, _ := localkey.New(dir)
	ref, _, err := a.CreateKey(context.Background(), keys.RS256)
	if err != nil {
		t.Fatal(err)
	}
	d := sha256.Sum256([]byte("x"))
	for _, bad := range []string{"../" + ref, "/etc/passwd", "", ".pem", ".new-1.pem", "x.txt", `..\` + ref} {
		if _, err := b.Sign(context.Background(), bad, keys.RS256, d[:]); !errors.Is(err, keys.ErrUnknownKey) {
			t.Errorf("Sign(%q) = %v, want ErrUnknownKey", bad, err)
		}
	}
}

func TestLoad_FileWithAnotherKeyIsRefused(t *testing.T) {
	dir := t.TempDir()
	b, _ := localkey.New(dir)
	ref1, _, _ := b.CreateKey(context.Background(), keys.RS256)
	ref2, _, _ := b.CreateKey(context.Background(), keys.ES256)
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
