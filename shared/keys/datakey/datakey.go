// Package datakey is the key backend for deployments that sign more id_tokens per second than
// the KMS Sign quota allows. A signing key is a data key pair that KMS generates
// (GenerateDataKeyPairWithoutPlaintext: RSA 2048 for RS256 and PS256, P-256 for ES256) and returns with its private half encrypted under one
// symmetric KMS key; the ciphertext is the key's ref, so it lives in the key registry beside the
// public half and nothing else stores it. A function instance decrypts each key once (one
// kms:Decrypt, a symmetric operation whose quota is in the thousands per second) and signs in
// memory: no KMS call per id_token.
//
// The trade-off, stated in docs/keys.md and docs/SECURITY.md: the private key is in the
// function's memory while the instance lives, not only inside KMS's HSMs. Who can call Decrypt
// on the wrapping key with this package's encryption context can read every signing key.
package datakey

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"golang.org/x/sync/singleflight"

	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/kmskey"
)

// RefPrefix starts every ref of this backend: the rest is the base64url ciphertext of the
// private key. A ref of another backend (a KMS key ARN, a local file name) never starts so.
const RefPrefix = "kms-data-key:"

// EncryptionContext binds every wrapped key to its purpose: KMS refuses to decrypt the
// ciphertext without it, and IAM grants Decrypt only with it (kms:EncryptionContext condition in
// template.yaml), so the wrapping key's other uses, if any, cannot unwrap signing keys, nor can
// this backend's grant unwrap anything else.
var EncryptionContext = map[string]string{"authserver:purpose": "id-token-signing"}

// Backend keeps key pairs wrapped by one symmetric KMS key.
type Backend struct {
	client  *kms.Client
	wrapKey string // key ID, ARN or alias of the symmetric KMS key

	decrypts singleflight.Group // one Decrypt per ref however many first signatures race
	plain    sync.Map           // ref → crypto.Signer (*rsa.PrivateKey, *ecdsa.PrivateKey), for the life of the instance
	deleted  sync.Map           // ref → struct{}: ScheduleDeletion was called in this instance

	// previous takes the refs this backend did not make: the KMS keys of the kms-sign mode a
	// stack was switched from, which stay current until the rotation promotes a data key
	// (nil: such refs are unknown keys).
	previous keys.Backend
}

var _ keys.Backend = (*Backend)(nil)

// New returns a backend that wraps keys under wrapKey. Refs it did not make go to previous,
// when not nil: a stack switched from kms-sign to data-key mode signs with its current KMS key
// until the rotation has published and promoted a data key, and the rotation deletes the old
// KMS keys when they retire, so the switch needs no window without a signing key.
func New(client *kms.Client, wrapKey string, previous keys.Backend) *Backend {
	return &Backend{client: client, wrapKey: wrapKey, previous: previous}
}

// foreign reports whether ref was made by the previous backend.
func (b *Backend) foreign(ref string) bool {
	return b.previous != nil && !strings.HasPrefix(ref, RefPrefix)
}

// pairSpecs are the data key pairs of each algorithm.
var pairSpecs = map[string]types.DataKeyPairSpec{
	keys.RS256: types.DataKeyPairSpecRsa2048,
	keys.PS256: types.DataKeyPairSpecRsa2048,
	keys.ES256: types.DataKeyPairSpecEccNistP256,
}

// CreateKey has KMS generate a key pair for alg and return its private half encrypted under
// the wrapping key (it never sees the plaintext): one GenerateDataKeyPairWithoutPlaintext.
func (b *Backend) CreateKey(ctx context.Context, alg string) (string, crypto.PublicKey, error) {
	spec, ok := pairSpecs[alg]
	if !ok {
		return "", nil, fmt.Errorf("data key: %w %q", keys.ErrUnsupportedAlg, alg)
	}
	out, err := b.client.GenerateDataKeyPairWithoutPlaintext(ctx, &kms.GenerateDataKeyPairWithoutPlaintextInput{
		KeyId:             aws.String(b.wrapKey),
		KeyPairSpec:       spec,
		EncryptionContext: EncryptionContext,
	})
	if err != nil {
		return "", nil, fmt.Errorf("kms GenerateDataKeyPairWithoutPlaintext: %w", kmskey.Classify(err))
	}
	if len(out.PrivateKeyCiphertextBlob) == 0 {
		return "", nil, errors.New("kms GenerateDataKeyPairWithoutPlaintext: response without a private key ciphertext")
	}
	pub, err := parsePublic(alg, out.PublicKey)
	if err != nil {
		return "", nil, fmt.Errorf("kms GenerateDataKeyPairWithoutPlaintext: %w", err)
	}
	return RefPrefix + base64.RawURLEncoding.EncodeToString(out.PrivateKeyCiphertextBlob), pub, nil
}

// Sign signs a SHA-256 digest with alg in memory (keys.SignDigest), after the key's one
// Decrypt.
func (b *Backend) Sign(ctx context.Context, ref, alg string, digest []byte) ([]byte, error) {
	if len(digest) != 32 {
		return nil, fmt.Errorf("data key Sign: digest must be 32 bytes, got %d", len(digest))
	}
	if b.foreign(ref) {
		return b.previous.Sign(ctx, ref, alg, digest)
	}
	priv, err := b.private(ctx, ref)
	if err != nil {
		return nil, err
	}
	return keys.SignDigest(priv, alg, digest)
}

// SignsInProcess reports whether ref is a data key of this backend (keys.InProcessSigner): it
// is unwrapped once and signs in memory, and its ciphertext, the ref, decrypts to one private
// key only. The KMS keys of the previous backend sign in KMS: false.
func (b *Backend) SignsInProcess(ref string) bool { return !b.foreign(ref) }

var _ keys.InProcessSigner = (*Backend)(nil)

// PublicKey returns the public half of ref (it needs the key's Decrypt, once, like Sign: the
// ref holds only the encrypted private half; the registry holds the public one, which is what
// the request path reads).
func (b *Backend) PublicKey(ctx context.Context, ref string) (crypto.PublicKey, error) {
	if b.foreign(ref) {
		return b.previous.PublicKey(ctx, ref)
	}
	priv, err := b.private(ctx, ref)
	if err != nil {
		return nil, err
	}
	return priv.Public(), nil
}

// ScheduleDeletion forgets ref in this instance: later Sign calls here fail with ErrUnknownKey.
// There is no KMS key to delete: the ciphertext exists only in the ref, so the rotation
// removing the key's registry record is what destroys it. Instances that decrypted it keep the
// plaintext until they end (minutes to hours); they never sign with it, since they sign only
// with the registry's current key (docs/keys.md).
func (b *Backend) ScheduleDeletion(ctx context.Context, ref string) error {
	if b.foreign(ref) {
		return b.previous.ScheduleDeletion(ctx, ref)
	}
	b.deleted.Store(ref, struct{}{})
	b.plain.Delete(ref)
	return nil
}

// private returns the decrypted private key of ref, calling Decrypt once per ref per instance.
func (b *Backend) private(ctx context.Context, ref string) (crypto.Signer, error) {
	if _, gone := b.deleted.Load(ref); gone {
		return nil, fmt.Errorf("data key %.24s…: %w", ref, keys.ErrUnknownKey)
	}
	if k, ok := b.plain.Load(ref); ok {
		return k.(crypto.Signer), nil
	}
	blob, ok := strings.CutPrefix(ref, RefPrefix)
	if !ok {
		return nil, fmt.Errorf("ref is not a data key ref: %w", keys.ErrUnknownKey)
	}
	ciphertext, err := base64.RawURLEncoding.DecodeString(blob)
	if err != nil || len(ciphertext) == 0 {
		return nil, fmt.Errorf("data key ref is not base64url: %w", keys.ErrUnknownKey)
	}
	// A Decrypt cancelled by one caller's context must not fail the others waiting on it.
	v, err, _ := b.decrypts.Do(ref, func() (any, error) {
		// A caller that missed the cache just before another caller's flight finished must
		// not start a second one: look again inside the flight.
		if k, ok := b.plain.Load(ref); ok {
			return k, nil
		}
		out, err := b.client.Decrypt(context.WithoutCancel(ctx), &kms.DecryptInput{
			CiphertextBlob:    ciphertext,
			KeyId:             aws.String(b.wrapKey),
			EncryptionContext: EncryptionContext,
		})
		if err != nil {
			var invalid *types.InvalidCiphertextException
			if errors.As(err, &invalid) {
				return nil, fmt.Errorf("kms Decrypt of a data key: %w: %w", keys.ErrUnknownKey, err)
			}
			return nil, fmt.Errorf("kms Decrypt of a data key: %w", kmskey.Classify(err))
		}
		parsed, err := x509.ParsePKCS8PrivateKey(out.Plaintext)
		clear(out.Plaintext)
		if err != nil {
			return nil, fmt.Errorf("data key: parse the decrypted private key: %w", err)
		}
		// The registry says which algorithm a key serves; any key one of them can use is
		// accepted here, and SignDigest refuses a key of the wrong type for the algorithm.
		priv, ok := parsed.(crypto.Signer)
		if !ok || (keys.CheckKey(keys.RS256, priv.Public()) != nil && keys.CheckKey(keys.ES256, priv.Public()) != nil) {
			return nil, fmt.Errorf("data key is a %T, want RSA %d or P-256", parsed, keys.KeyBits)
		}
		b.plain.Store(ref, priv)
		return priv, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(crypto.Signer), nil
}

func parsePublic(alg string, der []byte) (crypto.PublicKey, error) {
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("parse public key: %w", err)
	}
	if err := keys.CheckKey(alg, pub); err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	return pub, nil
}
