// Package keytest is the contract suite every keys.Backend runs (like Dex's storage
// conformance): each adapter's own tests call Run with a constructor, so the local key files
// and KMS can never drift apart in what they promise the Signer and the Rotator.
package keytest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"testing"

	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/golang-jwt/jwt/v5"
)

// Options relax the suite for an emulator that departs from the service it stands for.
type Options struct {
	// PSSAnySalt accepts PS256 signatures with a salt longer than the 32 bytes RFC 7518 3.5 and
	// AWS KMS's RSASSA_PSS_SHA_256 use. Only for local-kms, which signs PSS with the longest
	// salt that fits (rsa.SignPSS with nil options); every client library we test with
	// (go-jose, golang-jwt) verifies either.
	PSSAnySalt bool
}

// Run runs the contract suite; newBackend returns a fresh, empty backend for each sub-test.
// Every case runs once per algorithm (keys.Algs), as <alg>/<case>.
func Run(t *testing.T, newBackend func(t *testing.T) keys.Backend) {
	t.Helper()
	RunWithOptions(t, newBackend, Options{})
}

// RunWithOptions is Run with the suite relaxed as opts say.
func RunWithOptions(t *testing.T, newBackend func(t *testing.T) keys.Backend, opts Options) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, b keys.Backend, alg string)
	}{
		{"CreateKeyReturnsTheAlgorithmsKeyType", testCreate},
		{"PublicKeyMatchesCreatedKey", testPublicKeyMatches},
		{"SignatureIsTheJWSValueAndVerifies", testSignVerifies},
		{"KeysAreDistinct", testDistinct},
		{"SignRejectsBadDigestLength", testBadDigest},
		{"SignRejectsAnAlgorithmOfAnotherKeyType", testWrongKeyType},
		{"ScheduleDeletionMakesSignFail", testScheduleDeletion},
		{"ConcurrentSignaturesAllVerify", testConcurrentSign},
		{"SigningMethodMakesJWTsThatParse", testSigningMethod},
	}
	for _, alg := range keys.Algs {
		for _, tc := range tests {
			t.Run(alg+"/"+tc.name, func(t *testing.T) { tc.run(t, newBackend(t), alg) })
		}
	}
	t.Run("PS256/SaltIsAsLongAsTheHash", func(t *testing.T) {
		if opts.PSSAnySalt {
			t.Skip("the emulator signs PSS with the longest salt (keytest.Options.PSSAnySalt)")
		}
		b := newBackend(t)
		ref, pub := create(t, b, keys.PS256)
		d := digestOf("header.payload")
		sig, err := b.Sign(context.Background(), ref, keys.PS256, d)
		if err != nil {
			t.Fatal(err)
		}
		// RFC 7518 3.5: the salt is as long as the hash; a verifier that insists on it accepts.
		if err := rsa.VerifyPSS(pub.(*rsa.PublicKey), crypto.SHA256, d, sig, &rsa.PSSOptions{SaltLength: 32}); err != nil {
			t.Fatalf("PS256 signature without a 32-byte salt: %v", err)
		}
	})
	t.Run("CreateKeyRefusesAnUnknownAlgorithm", func(t *testing.T) {
		for _, alg := range []string{"", "HS256", "none", "RS512", "es256"} {
			if ref, _, err := newBackend(t).CreateKey(context.Background(), alg); err == nil {
				t.Errorf("CreateKey(%q) made key %s", alg, ref)
			}
		}
	})
}

// publicKey is what every crypto public key type implements.
type publicKey interface {
	Equal(crypto.PublicKey) bool
}

func create(t *testing.T, b keys.Backend, alg string) (string, crypto.PublicKey) {
	t.Helper()
	ref, pub, err := b.CreateKey(context.Background(), alg)
	if err != nil {
		t.Fatalf("CreateKey(%s): %v", alg, err)
	}
	return ref, pub
}

func digestOf(s string) []byte {
	d := sha256.Sum256([]byte(s))
	return d[:]
}

func testCreate(t *testing.T, b keys.Backend, alg string) {
	ref, pub := create(t, b, alg)
	if ref == "" {
		t.Fatal("CreateKey returned an empty ref")
	}
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if alg == keys.ES256 || k.N.BitLen() != keys.KeyBits || k.E != 65537 {
			t.Fatalf("CreateKey(%s) returned an RSA %d key with e=%d", alg, k.N.BitLen(), k.E)
		}
	case *ecdsa.PublicKey:
		if alg != keys.ES256 || k.Curve != elliptic.P256() {
			t.Fatalf("CreateKey(%s) returned an EC key on %s", alg, k.Curve.Params().Name)
		}
	default:
		t.Fatalf("CreateKey(%s) returned a %T", alg, pub)
	}
	if err := keys.CheckKey(alg, pub); err != nil {
		t.Fatal(err)
	}
}

func testPublicKeyMatches(t *testing.T, b keys.Backend, alg string) {
	ref, pub := create(t, b, alg)
	got, err := b.PublicKey(context.Background(), ref)
	if err != nil {
		t.Fatalf("PublicKey: %v", err)
	}
	if !got.(publicKey).Equal(pub) {
		t.Fatal("PublicKey differs from the key CreateKey returned")
	}
	k1, err1 := keys.Thumbprint(got)
	k2, err2 := keys.Thumbprint(pub)
	if err1 != nil || err2 != nil || k1 != k2 {
		t.Fatalf("thumbprints differ: %s %v, %s %v", k1, err1, k2, err2)
	}
}

func testSignVerifies(t *testing.T, b keys.Backend, alg string) {
	ref, pub := create(t, b, alg)
	d := digestOf("header.payload")
	sig, err := b.Sign(context.Background(), ref, alg, d)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	// The JWS value, checked with the standard library directly (not keys.VerifyDigest).
	switch alg {
	case keys.RS256:
		err = rsa.VerifyPKCS1v15(pub.(*rsa.PublicKey), crypto.SHA256, d, sig)
	case keys.PS256:
		// The salt length is checked by PS256/SaltIsAsLongAsTheHash.
		err = rsa.VerifyPSS(pub.(*rsa.PublicKey), crypto.SHA256, d, sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthAuto})
		if rsa.VerifyPKCS1v15(pub.(*rsa.PublicKey), crypto.SHA256, d, sig) == nil {
			t.Fatal("a PS256 signature verifies as PKCS #1 v1.5")
		}
	case keys.ES256:
		if len(sig) != 64 {
			t.Fatalf("ES256 signature of %d bytes, want R||S of 64 (not DER)", len(sig))
		}
		if !ecdsa.Verify(pub.(*ecdsa.PublicKey), d, newInt(sig[:32]), newInt(sig[32:])) {
			err = errors.New("ecdsa.Verify failed")
		}
	}
	if err != nil {
		t.Fatalf("signature does not verify: %v", err)
	}
	if err := keys.VerifyDigest(pub, alg, digestOf("header.other"), sig); err == nil {
		t.Fatal("signature verifies for another message")
	}
}

func testDistinct(t *testing.T, b keys.Backend, alg string) {
	ref1, pub1 := create(t, b, alg)
	ref2, pub2 := create(t, b, alg)
	if ref1 == ref2 || pub1.(publicKey).Equal(pub2) {
		t.Fatalf("two CreateKey calls returned the same key (%s, %s)", ref1, ref2)
	}
	d := digestOf("x")
	sig, err := b.Sign(context.Background(), ref2, alg, d)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	if keys.VerifyDigest(pub1, alg, d, sig) == nil {
		t.Fatal("a signature of the second key verifies with the first")
	}
	if err := keys.VerifyDigest(pub2, alg, d, sig); err != nil {
		t.Fatalf("a signature of the second key does not verify with it: %v", err)
	}
}

func testBadDigest(t *testing.T, b keys.Backend, alg string) {
	ref, _ := create(t, b, alg)
	if _, err := b.Sign(context.Background(), ref, alg, []byte("short")); err == nil {
		t.Fatal("Sign accepted a 5-byte digest")
	}
}

// testWrongKeyType: an RSA key never makes an ES256 signature, an EC key never an RS256 or
// PS256 one, and no key signs with an algorithm outside keys.Algs.
func testWrongKeyType(t *testing.T, b keys.Backend, alg string) {
	ref, _ := create(t, b, alg)
	other := []string{keys.ES256}
	if alg == keys.ES256 {
		other = []string{keys.RS256, keys.PS256}
	}
	for _, o := range append(other, "HS256", "") {
		if sig, err := b.Sign(context.Background(), ref, o, digestOf("x")); err == nil {
			t.Errorf("a %s key signed with %q (%d bytes)", alg, o, len(sig))
		}
	}
}

func testScheduleDeletion(t *testing.T, b keys.Backend, alg string) {
	ctx := context.Background()
	ref, _ := create(t, b, alg)
	keep, keepPub := create(t, b, alg)
	if err := b.ScheduleDeletion(ctx, ref); err != nil {
		t.Fatalf("ScheduleDeletion: %v", err)
	}
	_, err := b.Sign(ctx, ref, alg, digestOf("x"))
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
	sig, err := b.Sign(ctx, keep, alg, d)
	if err != nil {
		t.Fatalf("Sign with the other key: %v", err)
	}
	if err := keys.VerifyDigest(keepPub, alg, d, sig); err != nil {
		t.Fatalf("deleting one key broke another: %v", err)
	}
}

func testConcurrentSign(t *testing.T, b keys.Backend, alg string) {
	ref, pub := create(t, b, alg)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := digestOf(fmt.Sprint("msg", i))
			sig, err := b.Sign(context.Background(), ref, alg, d)
			if err == nil {
				err = keys.VerifyDigest(pub, alg, d, sig)
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

func testSigningMethod(t *testing.T, b keys.Backend, alg string) {
	ref, pub := create(t, b, alg)
	kid, err := keys.Thumbprint(pub)
	if err != nil {
		t.Fatal(err)
	}
	tok := jwt.NewWithClaims(keys.NewSigningMethod(b, alg), jwt.MapClaims{"sub": "u1"})
	tok.Header["kid"] = kid
	s, err := tok.SignedString(keys.KeyRef{Ctx: context.Background(), Ref: ref})
	if err != nil {
		t.Fatalf("SignedString: %v", err)
	}
	// golang-jwt's own method for alg verifies it.
	parsed, err := jwt.Parse(s, func(tk *jwt.Token) (any, error) { return pub, nil },
		jwt.WithValidMethods([]string{alg}))
	if err != nil || !parsed.Valid {
		t.Fatalf("parse: %v", err)
	}
	if parsed.Header["kid"] != kid || parsed.Header["alg"] != alg {
		t.Fatalf("header = %v", parsed.Header)
	}
}

func newInt(b []byte) *big.Int { return new(big.Int).SetBytes(b) }
