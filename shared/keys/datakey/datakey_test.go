package datakey_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/datakey"
	"github.com/acmebank/authserver/shared/keys/keytest"
	"github.com/acmebank/authserver/shared/keys/kmskey"
	"github.com/acmebank/authserver/shared/keys/kmstest"
	"github.com/acmebank/authserver/shared/oauth"
)

// wrappingKey creates a symmetric ENCRYPT_DECRYPT key in local-kms, as the template does.
func wrappingKey(t testing.TB, client *kms.Client) string {
	t.Helper()
	out, err := client.CreateKey(context.Background(), &kms.CreateKeyInput{
		KeySpec: types.KeySpecSymmetricDefault, KeyUsage: types.KeyUsageTypeEncryptDecrypt,
		Description: aws.String("test wrapping key of id_token signing keys")})
	if err != nil {
		t.Fatalf("create the wrapping key: %v", err)
	}
	return aws.ToString(out.KeyMetadata.Arn)
}

func TestContract(t *testing.T) {
	keytest.Run(t, func(t *testing.T) keys.Backend {
		client, _ := kmstest.New(t)
		return datakey.New(client, wrappingKey(t, client), nil)
	})
}

func digest(s string) []byte {
	d := sha256.Sum256([]byte(s))
	return d[:]
}

func TestSign_DecryptsOnceAndNeverCallsKMSSign(t *testing.T) {
	for _, alg := range keys.Algs {
		t.Run(alg, func(t *testing.T) { testDecryptsOnce(t, alg) })
	}
}

func testDecryptsOnce(t *testing.T, alg string) {
	client, tr := kmstest.New(t)
	b := datakey.New(client, wrappingKey(t, client), nil)
	ref, pub, err := b.CreateKey(context.Background(), alg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ref, datakey.RefPrefix) {
		t.Fatalf("ref %.40q does not start with %q", ref, datakey.RefPrefix)
	}
	tr.Reset()
	// 50 first signatures race on a fresh instance: one Decrypt between them.
	const racers = 50
	var wg sync.WaitGroup
	errs := make(chan error, racers)
	for i := range racers {
		wg.Go(func() {
			d := digest(fmt.Sprint("token", i))
			sig, err := b.Sign(context.Background(), ref, alg, d)
			if err == nil {
				err = keys.VerifyDigest(pub, alg, d, sig)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for range 100 {
		if _, err := b.Sign(context.Background(), ref, alg, digest("more")); err != nil {
			t.Fatal(err)
		}
	}
	if got := tr.Counts(); got["Decrypt"] != 1 || got["Sign"] != 0 || len(got) != 1 {
		t.Fatalf("KMS calls for 150 signatures: %v, want exactly one Decrypt and no Sign", got)
	}
}

func TestSign_ThrottledDecryptIsTransientAndRetried(t *testing.T) {
	client, tr := kmstest.New(t)
	b := datakey.New(client, wrappingKey(t, client), nil)
	ref, _, err := b.CreateKey(context.Background(), keys.RS256)
	if err != nil {
		t.Fatal(err)
	}
	tr.Fail("Decrypt", kmstest.Throttling, 1)
	if _, err := b.Sign(context.Background(), ref, keys.RS256, digest("x")); !errors.Is(err, oauth.ErrTransient) {
		t.Fatalf("Sign with a throttled Decrypt = %v, want a transient error", err)
	}
	if _, err := b.Sign(context.Background(), ref, keys.RS256, digest("x")); err != nil {
		t.Fatalf("Sign after the throttle: %v (a failed Decrypt must not be cached)", err)
	}
}

func TestSign_RefusesARefItCannotUnwrap(t *testing.T) {
	client, _ := kmstest.New(t)
	b := datakey.New(client, wrappingKey(t, client), nil)
	other := datakey.New(client, wrappingKey(t, client), nil)
	ref, _, err := other.CreateKey(context.Background(), keys.RS256)
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]string{
		"another wrapping key": ref,
		"a KMS key ARN":        "arn:aws:kms:eu-west-1:111122223333:key/0d7c1c6f-0000-4000-8000-000000000000",
		"not base64":           datakey.RefPrefix + "%%%",
		"empty ciphertext":     datakey.RefPrefix,
		"damaged ciphertext":   ref[:len(ref)-8] + "AAAAAAAA",
	} {
		_, err := b.Sign(context.Background(), bad, keys.RS256, digest("x"))
		if err == nil || errors.Is(err, oauth.ErrTransient) {
			t.Errorf("%s: Sign = %v, want a permanent error", name, err)
		}
	}
}

func TestCreateKey_IsOneCallAndTheKeyIsWrappedWithTheEncryptionContext(t *testing.T) {
	client, tr := kmstest.New(t)
	wrap := wrappingKey(t, client)
	b := datakey.New(client, wrap, nil)
	tr.Reset()
	ref, _, err := b.CreateKey(context.Background(), keys.RS256)
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.Counts(); got["GenerateDataKeyPairWithoutPlaintext"] != 1 || len(got) != 1 {
		t.Fatalf("CreateKey made %v, want one GenerateDataKeyPairWithoutPlaintext", got)
	}
	// Without the encryption context KMS refuses to unwrap it.
	blob := strings.TrimPrefix(ref, datakey.RefPrefix)
	ct, err := base64Decode(blob)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Decrypt(context.Background(), &kms.DecryptInput{CiphertextBlob: ct, KeyId: aws.String(wrap)}); err == nil {
		t.Fatal("KMS decrypted the wrapped key without its encryption context")
	}
}

func base64Decode(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }

// TestSwitchFromKMSSign_KMSKeysSignUntilTheyRetire: a stack switched from kms-sign to data-key
// mode still signs with its current KMS key (one kms:Sign), creates data keys from then on,
// and deletes the old KMS key through KMS when it retires.
func TestSwitchFromKMSSign_KMSKeysSignUntilTheyRetire(t *testing.T) {
	client, tr := kmstest.New(t)
	kmsKeys := kmskey.New(client, kmskey.Options{})
	old, oldPub, err := kmsKeys.CreateKey(context.Background(), keys.ES256)
	if err != nil {
		t.Fatal(err)
	}
	b := datakey.New(client, wrappingKey(t, client), kmsKeys)
	tr.Reset()
	d := digest("x")
	sig, err := b.Sign(context.Background(), old, keys.ES256, d)
	if err != nil || keys.VerifyDigest(oldPub, keys.ES256, d, sig) != nil {
		t.Fatalf("Sign with the KMS key after the switch: %v", err)
	}
	if tr.Calls("Sign") != 1 || tr.Calls("Decrypt") != 0 {
		t.Fatalf("calls %v, want the KMS key's one Sign", tr.Counts())
	}
	ref, _, err := b.CreateKey(context.Background(), keys.ES256)
	if err != nil || !strings.HasPrefix(ref, datakey.RefPrefix) {
		t.Fatalf("CreateKey after the switch: %.30q %v, want a data key", ref, err)
	}
	// The Signer checks every signature of a key that signs in KMS, the first only of one that
	// signs in memory (keys.InProcessSigner).
	if b.SignsInProcess(old) || !b.SignsInProcess(ref) {
		t.Fatalf("SignsInProcess: KMS key %v, data key %v; want false, true", b.SignsInProcess(old), b.SignsInProcess(ref))
	}
	if err := b.ScheduleDeletion(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	if st := kmstest.KeyState(t, client, old); st != types.KeyStatePendingDeletion {
		t.Fatalf("the retired KMS key is %s, want PendingDeletion", st)
	}
}

// BenchmarkSign compares one id_token signature in each mode against local-kms: kms-sign is a
// KMS Sign request per signature; data-key is in memory after the instance's one Decrypt.
func BenchmarkSign(b *testing.B) {
	client, _ := kmstest.New(b)
	for _, mode := range []struct {
		name    string
		backend keys.Backend
	}{
		{"kms-sign", kmskey.New(client, kmskey.Options{})},
		{"data-key", datakey.New(client, wrappingKey(b, client), nil)},
	} {
		b.Run(mode.name, func(b *testing.B) {
			ref, _, err := mode.backend.CreateKey(context.Background(), keys.RS256)
			if err != nil {
				b.Fatal(err)
			}
			d := digest("header.claims")
			if _, err := mode.backend.Sign(context.Background(), ref, keys.RS256, d); err != nil { // the Decrypt, in data-key mode
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := mode.backend.Sign(context.Background(), ref, keys.RS256, d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
