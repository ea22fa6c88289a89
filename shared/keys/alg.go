package keys

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/acmebank/authserver/shared/oauth"
)

// es256Size is the length of an ES256 signature: R and S, 32 bytes each (RFC 7518 3.4).
const es256Size = 64

// pssOptions are PS256's RSASSA-PSS parameters (RFC 7518 3.5): SHA-256, MGF1 with SHA-256 and
// a salt as long as the hash, which is also what KMS's RSASSA_PSS_SHA_256 uses.
var pssOptions = &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash, Hash: crypto.SHA256}

// GenerateKey makes a private key for alg in process (the local key files; any backend that
// holds its private keys itself): RSA 2048 for RS256 and PS256, P-256 for ES256.
func GenerateKey(alg string) (crypto.Signer, error) {
	switch alg {
	case RS256, PS256:
		return rsa.GenerateKey(rand.Reader, KeyBits)
	case ES256:
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	return nil, fmt.Errorf("%w %q", ErrUnsupportedAlg, alg)
}

// SignDigest signs a SHA-256 digest with an in-process private key and returns the JWS
// signature value of alg: PKCS #1 v1.5 for RS256, PSS with a 32-byte salt for PS256, R||S for
// ES256. A key of the wrong type for alg is ErrUnsupportedAlg.
func SignDigest(key crypto.Signer, alg string, digest []byte) ([]byte, error) {
	if len(digest) != 32 {
		return nil, fmt.Errorf("sign: digest must be 32 bytes, got %d", len(digest))
	}
	if err := CheckKey(alg, key.Public()); err != nil {
		return nil, fmt.Errorf("sign: %w: %w", ErrUnsupportedAlg, err)
	}
	var opts crypto.SignerOpts = crypto.SHA256
	if alg == PS256 {
		opts = pssOptions
	}
	sig, err := key.Sign(rand.Reader, digest, opts)
	if err != nil {
		return nil, fmt.Errorf("sign %s: %w", alg, err)
	}
	if alg == ES256 {
		// crypto.Signer returns ECDSA signatures in ASN.1 DER, as KMS does; JWS wants R||S.
		return ES256FromDER(sig)
	}
	return sig, nil
}

// VerifyDigest checks a JWS signature value of alg over a SHA-256 digest with pub: the check a
// client makes, so a signer can refuse to hand out a token no client would accept. For PS256 it
// accepts any salt length, as go-jose (go-oidc) and golang-jwt do: our signers use 32 bytes
// (SignDigest, KMS), but local-kms, the KMS emulator, signs with the longest salt that fits.
func VerifyDigest(pub crypto.PublicKey, alg string, digest, sig []byte) error {
	if err := CheckKey(alg, pub); err != nil {
		return err
	}
	switch alg {
	case RS256:
		return rsa.VerifyPKCS1v15(pub.(*rsa.PublicKey), crypto.SHA256, digest, sig)
	case PS256:
		return rsa.VerifyPSS(pub.(*rsa.PublicKey), crypto.SHA256, digest, sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthAuto})
	default: // ES256, as CheckKey leaves no other
		if len(sig) != es256Size {
			return fmt.Errorf("ES256 signature of %d bytes, want %d", len(sig), es256Size)
		}
		r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
		if !ecdsa.Verify(pub.(*ecdsa.PublicKey), digest, r, s) {
			return errors.New("ES256 signature does not verify")
		}
		return nil
	}
}

// ES256FromDER turns an ECDSA P-256 signature in ASN.1 DER (SEQUENCE { r INTEGER, s INTEGER },
// what crypto.Signer and KMS's ECDSA_SHA_256 return) into the JWS form: r and s as 32-byte
// big-endian integers, concatenated (RFC 7518 3.4). It refuses trailing bytes and values that
// are not in [1, n-1], so a malformed answer never becomes a token.
func ES256FromDER(der []byte) ([]byte, error) {
	var sig struct{ R, S *big.Int }
	rest, err := asn1.Unmarshal(der, &sig)
	if err != nil {
		return nil, fmt.Errorf("ECDSA signature: %w", err)
	}
	if len(rest) > 0 {
		return nil, errors.New("ECDSA signature: trailing bytes after the DER sequence")
	}
	n := elliptic.P256().Params().N
	if sig.R.Sign() <= 0 || sig.S.Sign() <= 0 || sig.R.Cmp(n) >= 0 || sig.S.Cmp(n) >= 0 {
		return nil, errors.New("ECDSA signature: r or s out of range for P-256")
	}
	out := make([]byte, es256Size)
	sig.R.FillBytes(out[:32])
	sig.S.FillBytes(out[32:])
	return out, nil
}

// ValidClientAlg checks a client's id_token_signed_response_alg at registration: "" (RS256,
// the OIDC default) or one of Algs, and one the deployment keeps keys for (configured, i.e.
// AUTH_ID_TOKEN_ALGS; Algs when nil), so that no client is registered for tokens the server
// cannot sign.
func ValidClientAlg(alg string, configured []string) error {
	return ValidResponseAlg("id_token_signed_response_alg", alg, configured)
}

// ValidResponseAlg checks the client metadata name (id_token_signed_response_alg,
// authorization_signed_response_alg, introspection_signed_response_alg) at registration: ""
// (its default) or one of Algs the deployment keeps keys for (configured; Algs when nil). The
// id_token keys sign all three.
func ValidResponseAlg(name, alg string, configured []string) error {
	if configured == nil {
		configured = Algs
	}
	effective := alg
	if effective == "" {
		effective = oauth.DefaultIDTokenAlg
	}
	if !Supported(effective) {
		return fmt.Errorf("%s %q is not supported: use %s", name, alg, strings.Join(Algs, ", "))
	}
	if !slices.Contains(configured, effective) {
		return fmt.Errorf("%s %s has no signing keys in this deployment (AUTH_ID_TOKEN_ALGS=%s): use one of those",
			name, effective, strings.Join(configured, ","))
	}
	return nil
}
