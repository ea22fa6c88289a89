package localkey

import (
	"context"
	"crypto/rand"
	"slices"

	"github.com/acmebank/authserver/shared/oauth"
)

// NonceKeys makes the DPoP nonce keys of the local server without a key service: a key is
// random bytes kept as they are in the embedded store, under the data directory that holds
// the local signing keys in the clear too. For local use only: with DynamoDB the functions
// wrap them with KMS (datakey.NonceKeys), and the configuration refuses nonces with DynamoDB
// and no wrapping key.
type NonceKeys struct{}

var _ oauth.NonceKeyWrapper = NonceKeys{}

// NewNonceKey returns oauth.NonceKeyLen random bytes.
func (NonceKeys) NewNonceKey(context.Context) ([]byte, error) {
	k := make([]byte, oauth.NonceKeyLen)
	rand.Read(k) // never fails (crypto/rand)
	return k, nil
}

// UnwrapNonceKey returns the key as it is kept.
func (NonceKeys) UnwrapNonceKey(_ context.Context, wrapped []byte) ([]byte, error) {
	return slices.Clone(wrapped), nil
}
