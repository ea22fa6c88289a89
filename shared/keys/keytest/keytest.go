// Package keytest is the contract suite every keys.Backend runs (like Dex's storage
// conformance): each adapter's own tests call Run with a constructor, so the local key files
// and KMS can never drift apart in what they promise the Signer and the Rotator.
package keytest

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/golang-jwt/jwt/v5"
)

// Run runs the contract suite; newBackend returns a fresh, empty backend for each sub-test.
func Run(t *testing.T, newBackend func(t *testing.T) keys.Backend) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, b keys.Backend)
	}{
		{"CreateKeyReturnsRSA2048PublicKey", testCreate},
		{"PublicKeyMatchesCreatedKey", testPublicKeyMatches},
		{"SignatureVerifiesWithCryptoRSA", testSignVerifies},
		{"KeysAreDistinct", testDistinct},
		{"SignRejectsBadDigestLength", testBadDigest},
		{"ScheduleDeletionMakesSignFail", testScheduleDeletion},
		{"ConcurrentSignaturesAllVerify", testConcurrentSign},
		{"SigningMethodMakesJWTsThatParse", testSigningMethod},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newBackend(t)) })
	}
}

func create(t *testing.T, b keys.Backend) (string, *rsa.PublicKey) {
	t.Helper()
	ref, pub, err := b.CreateKey(context.Background())
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	return ref, pub
}

func digestOf(s string) []byte {
	d := sha256.Sum256([]byte(s))
	return d[:]
}

func testCreate(t *testing.T, b keys.Backend) {
	ref, pub := create(t, b)
	if ref == "" {
		t.Fatal("CreateKey returned an empty ref")
	}
	if pub == nil || pub.N.BitLen() != keys.KeyBits || pub.E != 65537 {
		t.Fatalf("CreateKey returned %v, want an RSA %d key with e=65537", pub, keys.KeyBits)
	}
}

func testPublicKeyMatches(t *testing.T, b keys.Backend) {
	ref, pub := create(t, b)
	got, err := b.PublicKey(context.Background(), ref)
	if err != nil {
		t.Fatalf("PublicKey: %v", err)
	}
	if !got.Equal(pub) {
		t.Fatal("PublicKey differs from the key CreateKey returned")
	}
	if keys.Thumbprint(got) != keys.Thumbprint(pub) {
		t.Fatal("thumbprints differ")
	}
}

func testSignVerifies(t *testing.T, b keys.Backend) {
	ref, pub := create(t, b)
	d := digestOf("header.payload")
	sig, err := b.Sign(context.Background(), ref, d)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, d, sig); err != nil {
		t.Fatalf("signature does not verify: %v", err)
	}
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, digestOf("header.other"), sig); err == nil {
		t.Fatal("signature verifies for another message")
	}
}

func testDistinct(t *testing.T, b keys.Backend) {
	ref1, pub1 := create(t, b)
	ref2, pub2 := create(t, b)
	if ref1 == ref2 || pub1.Equal(pub2) {
		t.Fatalf("two CreateKey calls returned the same key (%s, %s)", ref1, ref2)
	}
	d := digestOf("x")
	sig, err := b.Sign(context.Background(), ref2, d)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	if rsa.VerifyPKCS1v15(pub1, crypto.SHA256, d, sig) == nil {
		t.Fatal("a signature of the second key verifies with the first")
	}
}

func testBadDigest(t *testing.T, b keys.Backend) {
	ref, _ := create(t, b)
	if _, err := b.Sign(context.Background(), ref, []byte("short")); err == nil {
		t.Fatal("Sign accepted a 5-byte digest")
	}
}

func testScheduleDeletion(t *testing.T, b keys.Backend) {
	ctx := context.Background()
	ref, _ := create(t, b)
	keep, keepPub := create(t, b)
	if err := b.ScheduleDeletion(ctx, ref); err != nil {
		t.Fatalf("ScheduleDeletion: %v", err)
	}
	_, err := b.Sign(ctx, ref, digestOf("x"))
	if err == nil {
		t.Fatal("Sign succeeded with a key scheduled for deletion")
	}
	if !errors.Is(err, keys.ErrUnknownKey) || errors.Is(err, oauth.ErrTransient) {
		t.Fatalf("Sign after deletion: %v, want ErrUnknownKey and not transient", err)
	}
	if err := b.ScheduleDeletion(ctx, ref); err != nil {
		t.Fatalf("second ScheduleDeletion: %v, want nil (idempotent)", err)
	}
	d := digestOf("y")
	sig, err := b.Sign(ctx, keep, d)
	if err != nil {
		t.Fatalf("Sign with the other key: %v", err)
	}
	if err := rsa.VerifyPKCS1v15(keepPub, crypto.SHA256, d, sig); err != nil {
		t.Fatalf("deleting one key broke another: %v", err)
	}
}

func testConcurrentSign(t *testing.T, b keys.Backend) {
	ref, pub := create(t, b)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := digestOf(fmt.Sprint("msg", i))
			sig, err := b.Sign(context.Background(), ref, d)
			if err == nil {
				err = rsa.VerifyPKCS1v15(pub, crypto.SHA256, d, sig)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func testSigningMethod(t *testing.T, b keys.Backend) {
	ref, pub := create(t, b)
	tok := jwt.NewWithClaims(keys.NewSigningMethod(b), jwt.MapClaims{"sub": "u1"})
	tok.Header["kid"] = keys.Thumbprint(pub)
	s, err := tok.SignedString(keys.KeyRef{Ctx: context.Background(), Ref: ref})
	if err != nil {
		t.Fatalf("SignedString: %v", err)
	}
	parsed, err := jwt.Parse(s, func(tk *jwt.Token) (any, error) { return pub, nil },
		jwt.WithValidMethods([]string{"RS256"}))
	if err != nil || !parsed.Valid {
		t.Fatalf("parse: %v", err)
	}
	if parsed.Header["kid"] != keys.Thumbprint(pub) {
		t.Fatalf("kid = %v", parsed.Header["kid"])
	}
}
