package keys_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/oauth"
)

// TestES256FromDER_MatchesTheDERIntegers: for signatures from the standard library's
// ecdsa.SignASN1 (the DER form KMS returns), R||S holds the same integers, zero-padded to 32
// bytes each, and verifies.
func TestES256FromDER_MatchesTheDERIntegers(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	short := 0
	// About one signature in 128 has a short r or s: sign until one has (300 at least, and
	// at most 5000, where missing one has a chance of e^-39).
	for i := 0; i < 5000 && (i < 300 || short == 0); i++ {
		d := sha256.Sum256([]byte{byte(i), byte(i >> 8)})
		der, err := ecdsa.SignASN1(rand.Reader, key, d[:])
		if err != nil {
			t.Fatal(err)
		}
		var want struct{ R, S *big.Int }
		if _, err := asn1.Unmarshal(der, &want); err != nil {
			t.Fatal(err)
		}
		if len(want.R.Bytes()) < 32 || len(want.S.Bytes()) < 32 {
			short++
		}
		rs, err := keys.ES256FromDER(der)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 64 || new(big.Int).SetBytes(rs[:32]).Cmp(want.R) != 0 || new(big.Int).SetBytes(rs[32:]).Cmp(want.S) != 0 {
			t.Fatalf("R||S %x does not hold r=%x s=%x", rs, want.R, want.S)
		}
		if err := keys.VerifyDigest(&key.PublicKey, keys.ES256, d[:], rs); err != nil {
			t.Fatal(err)
		}
	}
	if short == 0 {
		t.Fatal("no signature had a short r or s: the padding was not exercised")
	}
}

func TestES256FromDER_RefusesMalformedSignatures(t *testing.T) {
	n := elliptic.P256().Params().N
	enc := func(r, s *big.Int) []byte {
		b, err := asn1.Marshal(struct{ R, S *big.Int }{r, s})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	one := big.NewInt(1)
	for name, der := range map[string][]byte{
		"empty":          nil,
		"not DER":        []byte("not a signature at all"),
		"trailing bytes": append(enc(one, one), 0),
		"zero r":         enc(big.NewInt(0), one),
		"negative s":     enc(one, big.NewInt(-5)),
		"r equals n":     enc(n, one),
		"s above n":      enc(one, new(big.Int).Add(n, one)),
		"R||S, not DER":  make([]byte, 64),
	} {
		if out, err := keys.ES256FromDER(der); err == nil {
			t.Errorf("%s: accepted, gave %x", name, out)
		}
	}
}

// TestThumbprint_AgreesWithGoJOSE: the kid of RSA and P-256 keys is the RFC 7638 thumbprint
// go-jose computes, and the JWK we publish parses (with go-jose) back to the same key.
func TestThumbprint_AgreesWithGoJOSE(t *testing.T) {
	for _, alg := range keys.Algs {
		priv, err := keys.GenerateKey(alg)
		if err != nil {
			t.Fatal(err)
		}
		pub := priv.Public()
		kid, err := keys.Thumbprint(pub)
		if err != nil {
			t.Fatal(err)
		}
		tp, err := (&jose.JSONWebKey{Key: pub}).Thumbprint(crypto.SHA256)
		if err != nil {
			t.Fatal(err)
		}
		if want := base64.RawURLEncoding.EncodeToString(tp); kid != want {
			t.Fatalf("%s: kid %s, go-jose thumbprint %s", alg, kid, want)
		}
		rec, err := keys.NewSigningKey("ref", alg, pub, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(keys.JWK(rec))
		var jwk jose.JSONWebKey
		if err := jwk.UnmarshalJSON(raw); err != nil {
			t.Fatalf("%s: go-jose cannot read our JWK %s: %v", alg, raw, err)
		}
		if jwk.KeyID != kid || jwk.Algorithm != alg || jwk.Use != "sig" || !jwk.Key.(interface{ Equal(crypto.PublicKey) bool }).Equal(pub) {
			t.Fatalf("%s: JWK %s reads back as %+v", alg, raw, jwk)
		}
		back, err := keys.PublicKey(rec)
		if err != nil || !back.(interface{ Equal(crypto.PublicKey) bool }).Equal(pub) {
			t.Fatalf("%s: PublicKey(record) = %v, %v", alg, back, err)
		}
	}
}

// TestNewSigningKey_RefusesAKeyOfTheWrongType: an EC key is never recorded as RS256 or PS256,
// nor an RSA key as ES256, nor anything under an unknown algorithm.
func TestNewSigningKey_RefusesAKeyOfTheWrongType(t *testing.T) {
	ec, _ := keys.GenerateKey(keys.ES256)
	rs, _ := keys.GenerateKey(keys.RS256)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	for _, tc := range []struct {
		alg string
		pub crypto.PublicKey
	}{{keys.RS256, ec.Public()}, {keys.PS256, ec.Public()}, {keys.ES256, rs.Public()}, {keys.ES256, &p384.PublicKey}, {"HS256", rs.Public()}, {"", ec.Public()}} {
		if k, err := keys.NewSigningKey("ref", tc.alg, tc.pub, time.Now()); err == nil {
			t.Errorf("NewSigningKey(%q, %T) = %+v", tc.alg, tc.pub, k)
		}
	}
}

// TestPublicKey_RejectsBadECMembers: coordinates that are not 32 bytes, a point off the curve,
// or another curve never become a verification key.
func TestPublicKey_RejectsBadECMembers(t *testing.T) {
	priv, _ := keys.GenerateKey(keys.ES256)
	good, err := keys.NewSigningKey("ref", keys.ES256, priv.Public(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keys.PublicKey(good); err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	xb, _ := base64.RawURLEncoding.DecodeString(good.X)
	off := append([]byte(nil), xb...)
	off[31] ^= 1
	for name, mut := range map[string]func(k *oauth.SigningKey){
		"other curve":    func(k *oauth.SigningKey) { k.Crv = "P-384" },
		"short x":        func(k *oauth.SigningKey) { k.X = b64(xb[1:]) },
		"not base64":     func(k *oauth.SigningKey) { k.Y = "!!" },
		"off the curve":  func(k *oauth.SigningKey) { k.X = b64(off) },
		"RSA members":    func(k *oauth.SigningKey) { k.X, k.Y, k.N, k.E = "", "", "AQAB", "AQAB" },
		"unknown alg":    func(k *oauth.SigningKey) { k.Alg = "ES512" },
		"EC as RS (old)": func(k *oauth.SigningKey) { k.Alg = "" },
	} {
		k := good
		mut(&k)
		if _, err := keys.PublicKey(k); err == nil {
			t.Errorf("%s: PublicKey accepted %+v", name, k)
		}
	}
}

// TestSignDigest_PS256UsesAHashLengthSalt: local PS256 signatures verify with a verifier that
// insists on a 32-byte salt (RFC 7518 3.5), and do not verify as RS256.
func TestSignDigest_PS256UsesAHashLengthSalt(t *testing.T) {
	priv, _ := keys.GenerateKey(keys.PS256)
	d := sha256.Sum256([]byte("h.p"))
	sig, err := keys.SignDigest(priv, keys.PS256, d[:])
	if err != nil {
		t.Fatal(err)
	}
	if err := rsaVerifyPSS32(priv.Public(), d[:], sig); err != nil {
		t.Fatal(err)
	}
	if keys.VerifyDigest(priv.Public(), keys.RS256, d[:], sig) == nil {
		t.Fatal("a PS256 signature verifies as RS256")
	}
	if _, err := keys.SignDigest(priv, keys.ES256, d[:]); err == nil {
		t.Fatal("an RSA key made an ES256 signature")
	}
}

func rsaVerifyPSS32(pub crypto.PublicKey, digest, sig []byte) error {
	return rsa.VerifyPSS(pub.(*rsa.PublicKey), crypto.SHA256, digest, sig, &rsa.PSSOptions{SaltLength: 32})
}
