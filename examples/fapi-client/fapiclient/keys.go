package fapiclient

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// clientKey is the client's private signing key, read from the file `authctl clients keygen`
// wrote, with the algorithm and kid it signs client assertions with.
type clientKey struct {
	key crypto.Signer
	alg jose.SignatureAlgorithm
	kid string
}

// readClientKey reads a PEM private key (PKCS #8, or SEC 1 / PKCS #1 as openssl writes them):
// EC P-256 signs ES256, RSA of 2048 bits or more signs PS256 (FAPI 2.0 Security Profile
// (Final) 5.4.1). kid "" means the key's RFC 7638 thumbprint, the kid keygen registers.
func readClientKey(path, kid string) (*clientKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%s holds no PEM block", path)
	}
	var key any
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("%s holds a %q block, not a private key", path, block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ck := &clientKey{}
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return nil, errors.New("an EC client key must be on P-256 (ES256)")
		}
		ck.key, ck.alg = k, jose.ES256
	case *rsa.PrivateKey:
		if k.N.BitLen() < 2048 {
			return nil, errors.New("an RSA client key needs at least 2048 bits (PS256)")
		}
		ck.key, ck.alg = k, jose.PS256
	default:
		return nil, fmt.Errorf("a %T cannot sign ES256 or PS256", key)
	}
	ck.kid = kid
	if ck.kid == "" {
		if ck.kid, err = thumbprint(ck.key.Public()); err != nil {
			return nil, err
		}
	}
	return ck, nil
}

// thumbprint is the RFC 7638 thumbprint of a public key, base64url.
func thumbprint(pub crypto.PublicKey) (string, error) {
	tp, err := (&jose.JSONWebKey{Key: pub}).Thumbprint(crypto.SHA256)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(tp), nil
}

// assertion is a client assertion (RFC 7523 3, private_key_jwt): iss and sub the client_id,
// aud the issuer identifier as a single string (FAPI 2.0 Security Profile (Final) 5.3.2.1), a
// short exp and a fresh jti, signed with the client's key under its kid.
func (k *clientKey) assertion(clientID, issuer string, now time.Time) (string, error) {
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: jose.JSONWebKey{Key: k.key, KeyID: k.kid}}, nil)
	if err != nil {
		return "", err
	}
	return jwt.Signed(sig).Claims(jwt.Claims{
		Issuer: clientID, Subject: clientID, Audience: jwt.Audience{issuer}, ID: rand.Text(),
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Minute)),
	}).Serialize()
}

// dpopKey is the key the client's tokens are bound to (RFC 9449): made for this run, never
// written anywhere.
type dpopKey struct {
	signer jose.Signer
	jkt    string
}

func newDPoPKey() (*dpopKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	// The proof carries the public key in its header (RFC 9449 4.2: typ dpop+jwt, jwk).
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key},
		(&jose.SignerOptions{EmbedJWK: true}).WithType("dpop+jwt"))
	if err != nil {
		return nil, err
	}
	jkt, err := thumbprint(key.Public())
	if err != nil {
		return nil, err
	}
	return &dpopKey{signer: sig, jkt: jkt}, nil
}

// dpopClaims are a proof's claims (RFC 9449 4.2); ath at a resource, nonce when the server
// asked for one (RFC 9449 8).
type dpopClaims struct {
	JTI   string `json:"jti"`
	HTM   string `json:"htm"`
	HTU   string `json:"htu"`
	IAT   int64  `json:"iat"`
	Nonce string `json:"nonce,omitempty"`
	ATH   string `json:"ath,omitempty"`
}

// proof is a DPoP proof for one request: method and URL (without query or fragment), with
// the server's nonce if it gave one and, for a resource, the hash of the access token.
func (k *dpopKey) proof(method, u, nonce, accessToken string, now time.Time) (string, error) {
	c := dpopClaims{JTI: rand.Text(), HTM: method, HTU: u, IAT: now.Unix(), Nonce: nonce}
	if accessToken != "" {
		h := sha256.Sum256([]byte(accessToken))
		c.ATH = base64.RawURLEncoding.EncodeToString(h[:])
	}
	return jwt.Signed(k.signer).Claims(c).Serialize()
}
