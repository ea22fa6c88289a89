package datakey

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/acmebank/authserver/shared/keys/kmskey"
	"github.com/acmebank/authserver/shared/oauth"
)

// NonceEncryptionContext binds every wrapped DPoP nonce key to its purpose, apart from the
// signing keys' (EncryptionContext): the wrapping key's policy lets the token and PAR functions
// decrypt under it, and only the rotation generate under it (template.yaml), so no function
// that may unwrap nonce keys can unwrap a signing key, nor the other way round.
var NonceEncryptionContext = map[string]string{"authserver:purpose": "dpop-nonce"}

// NonceKeys wraps the DPoP nonce keys under the same symmetric KMS key as the signing keys (a
// multi-Region key in a multi-region deployment, so both regions unwrap what the primary's
// rotation made): oauth.NonceKeyWrapper.
type NonceKeys struct {
	client  *kms.Client
	wrapKey string
}

var _ oauth.NonceKeyWrapper = NonceKeys{}

// NewNonceKeys returns the nonce-key wrapper over wrapKey (key ID, ARN or alias).
func NewNonceKeys(client *kms.Client, wrapKey string) NonceKeys {
	return NonceKeys{client: client, wrapKey: wrapKey}
}

// NewNonceKey has KMS make a random 256-bit key and return it encrypted only: one
// GenerateDataKeyWithoutPlaintext, so the rotation never holds the key.
func (n NonceKeys) NewNonceKey(ctx context.Context) ([]byte, error) {
	out, err := n.client.GenerateDataKeyWithoutPlaintext(ctx, &kms.GenerateDataKeyWithoutPlaintextInput{
		KeyId:             aws.String(n.wrapKey),
		KeySpec:           types.DataKeySpecAes256,
		EncryptionContext: NonceEncryptionContext,
	})
	if err != nil {
		return nil, fmt.Errorf("kms GenerateDataKeyWithoutPlaintext: %w", kmskey.Classify(err))
	}
	if len(out.CiphertextBlob) == 0 {
		return nil, errors.New("kms GenerateDataKeyWithoutPlaintext: response without a ciphertext")
	}
	return out.CiphertextBlob, nil
}

// UnwrapNonceKey decrypts a nonce key: one Decrypt, under the nonce keys' encryption context.
func (n NonceKeys) UnwrapNonceKey(ctx context.Context, wrapped []byte) ([]byte, error) {
	out, err := n.client.Decrypt(ctx, &kms.DecryptInput{
		CiphertextBlob:    wrapped,
		KeyId:             aws.String(n.wrapKey),
		EncryptionContext: NonceEncryptionContext,
	})
	if err != nil {
		return nil, fmt.Errorf("kms Decrypt of a DPoP nonce key: %w", kmskey.Classify(err))
	}
	return out.Plaintext, nil
}
