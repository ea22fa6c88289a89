package main

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	"github.com/go-jose/go-jose/v4"
	"github.com/spf13/cobra"
)

// keygenRSABits is the size of a PS256 client key: FAPI 2.0 Security Profile (Final) 5.4.1
// asks for RSA keys of at least 2048 bits.
const keygenRSABits = 2048

func (c *cli) clientsKeygen() *cobra.Command {
	var alg, out string
	cmd := &cobra.Command{
		Use:   "keygen --alg ES256|PS256 --out FILE",
		Short: "Make a client key pair: the private key to a new file (0600), the public JWK Set to stdout",
		Long: `Make a key pair for a private_key_jwt client (RFC 7523), such as a FAPI 2.0 client (FAPI 2.0
Security Profile (Final) 5.4.1: ES256 on P-256, or PS256 on RSA 2048). The private key is
written, as PKCS #8 PEM, to a new file readable only by its owner (mode 0600); an existing file
is never overwritten. The public JWK Set, one key with kid its RFC 7638 thumbprint, use sig and
alg, goes to stdout, for 'clients create --auth-method private_key_jwt --jwks-file'. The
private key is never printed. The command opens no store: a client can run it on its own side
and hand over only the JWK Set.`,
		Example: `  authctl clients keygen --alg ES256 --out client-key.pem > client-jwks.json
  authctl clients create --id budget-app ... --auth-method private_key_jwt --jwks-file client-jwks.json`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			key, err := newClientKey(alg)
			if err != nil {
				return err
			}
			jwks, err := publicClientJWKS(key, alg)
			if err != nil {
				return err
			}
			der, err := x509.MarshalPKCS8PrivateKey(key)
			if err != nil {
				return fmt.Errorf("encode the private key: %w", err)
			}
			if err := writeNewFile(out, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})); err != nil {
				return err
			}
			if _, err := c.std.out.Write(jwks); err != nil {
				return err
			}
			c.note("The private key is in %s (mode 0600): keep it with the client. Register the public JWK Set above with 'authctl clients create ... --auth-method private_key_jwt --jwks-file FILE'.", out)
			return nil
		},
	}
	cmd.Flags().StringVar(&alg, "alg", "ES256", "signing algorithm of the key: ES256 (EC P-256) or PS256 (RSA 2048)")
	cmd.Flags().StringVar(&out, "out", "", "new file for the private key (PKCS #8 PEM, mode 0600; never overwritten; required)")
	cmd.MarkFlagRequired("out")
	return cmd
}

// newClientKey makes the private key of alg.
func newClientKey(alg string) (crypto.Signer, error) {
	switch alg {
	case "ES256":
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "PS256":
		return rsa.GenerateKey(rand.Reader, keygenRSABits)
	}
	return nil, usagef("--alg %q: want ES256 or PS256 (FAPI 2.0 Security Profile (Final) 5.4.1)", alg)
}

// publicClientJWKS is the JWK Set of key's public half, indented, with kid its RFC 7638
// thumbprint (base64url SHA-256), so the kid names the key and nothing else.
func publicClientJWKS(key crypto.Signer, alg string) ([]byte, error) {
	jwk := jose.JSONWebKey{Key: key.Public(), Use: "sig", Algorithm: alg}
	tp, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("thumbprint of the public key: %w", err)
	}
	jwk.KeyID = base64.RawURLEncoding.EncodeToString(tp)
	b, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{jwk}})
	if err != nil {
		return nil, fmt.Errorf("encode the JWK Set: %w", err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// writeNewFile writes data to a file that must not exist yet (O_EXCL: not a file, not a
// symlink, not a device such as /dev/stdout), readable and writable by its owner only. A
// failed write removes the file it created, and only that one.
func writeNewFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return usagef("--out %s exists: refusing to overwrite it (a key file is never replaced; choose another name)", path)
	}
	if err != nil {
		return fmt.Errorf("create the key file: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("write the key file %s: %w", path, err)
	}
	return nil
}
