package datakey_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/acmebank/authserver/shared/keys/datakey"
	"github.com/acmebank/authserver/shared/keys/kmstest"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// TestNonceKeys_MadeEncryptedOnlyAndUnwrappedUnderTheirOwnContext: a nonce key comes from KMS
// as a ciphertext only (GenerateDataKeyWithoutPlaintext: nothing in the rotation holds it),
// unwraps to 32 bytes under the nonce keys' encryption context, and not under the signing
// keys' one: the two purposes cannot decrypt each other's keys.
func TestNonceKeys_MadeEncryptedOnlyAndUnwrappedUnderTheirOwnContext(t *testing.T) {
	client, tr := kmstest.New(t)
	wrap := wrappingKey(t, client)
	n := datakey.NewNonceKeys(client, wrap)
	wrapped, err := n.NewNonceKey(t.Context())
	if err != nil {
		t.Fatalf("NewNonceKey: %v", err)
	}
	if tr.Calls("GenerateDataKeyWithoutPlaintext") != 1 || tr.Calls("GenerateDataKey") != 0 {
		t.Fatalf("KMS calls %v, want one GenerateDataKeyWithoutPlaintext", tr.Counts())
	}
	plain, err := n.UnwrapNonceKey(t.Context(), wrapped)
	if err != nil || len(plain) != oauth.NonceKeyLen || bytes.Contains(wrapped, plain) {
		t.Fatalf("UnwrapNonceKey: %d bytes, %v; want %d bytes not contained in the ciphertext", len(plain), err, oauth.NonceKeyLen)
	}
	if _, err := client.Decrypt(t.Context(), &kms.DecryptInput{CiphertextBlob: wrapped, KeyId: aws.String(wrap),
		EncryptionContext: datakey.EncryptionContext}); err == nil {
		t.Fatal("a nonce key decrypted under the signing keys' encryption context")
	}
}

// TestNonceKeyring_KeyKMSRefusesToUnwrapFailsClosed: an instance whose KMS Decrypt of the
// nonce key fails (here: another wrapping key than the one the key was made under; in AWS, a
// role the key policy does not let decrypt) does not start: NewNonceKeyring is an error, so no
// function runs with the nonce check skipped.
func TestNonceKeyring_KeyKMSRefusesToUnwrapFailsClosed(t *testing.T) {
	client, _ := kmstest.New(t)
	st, err := embedded.OpenWith(t.TempDir(), embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	wrap := datakey.NewNonceKeys(client, wrappingKey(t, client))
	if _, err := oauth.RotateNonceKeys(t.Context(), st, wrap, now); err != nil {
		t.Fatal(err)
	}
	if _, err := oauth.NewNonceKeyring(context.Background(), st, datakey.NewNonceKeys(client, wrappingKey(t, client)), nil, now); err == nil {
		t.Fatal("a keyring started with a nonce key KMS refused to decrypt")
	}
	ring, err := oauth.NewNonceKeyring(context.Background(), st, wrap, nil, now)
	if err != nil {
		t.Fatalf("the keyring with the wrapping key the nonce key was made under: %v", err)
	}
	if !ring.Valid(ring.Current(now), now) {
		t.Fatal("a nonce of a KMS-wrapped key does not verify")
	}
}
