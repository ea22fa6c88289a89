package multiregion_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/go-jose/go-jose/v4"

	"github.com/acmebank/authserver/shared/keys/datakey"
	"github.com/acmebank/authserver/shared/keys/kmstest"
	"github.com/acmebank/authserver/shared/oauth"
)

const tokenURL = "https://auth.bank.example/v2/authentication/oauth2/token"

// tokenProof is a DPoP proof of key for a POST to the token endpoint carrying nonce.
func tokenProof(t *testing.T, key any, nonce string) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{EmbedJWK: true}).WithType("dpop+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(map[string]any{"jti": oauth.NewID("j_"), "htm": "POST", "htu": tokenURL, "iat": time.Now().Unix(), "nonce": nonce})
	jws, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSimulation_DPoPNonceFromOneRegionPassesInTheOther: the primary region's rotation makes
// the DPoP nonce key, wrapped by KMS, in its replica of the global table; once replicated, the
// secondary region's token function (a keyring over its own replica, unwrapping with the same
// multi-Region key, here one local-kms key) accepts a nonce the primary issued, in a proof
// through the token domain's DPoP check. After the next rotation, the primary issues nonces of
// the new key, and the secondary, started before it, accepts them without a restart (it reads
// the keys again when a nonce names a newer key), and still accepts the older key's nonce.
func TestSimulation_DPoPNonceFromOneRegionPassesInTheOther(t *testing.T) {
	w := newWorld(t, true, replicationDelay)
	client, _ := kmstest.New(t)
	wrap := datakey.NewNonceKeys(client, wrappingKey(t, client))
	now := time.Now()
	before := w.rep.copied(w.b.name)
	if _, err := oauth.RotateNonceKeys(t.Context(), w.storeA, wrap, now); err != nil {
		t.Fatal(err)
	}
	w.waitReplicated(t, w.b.name, before+1)
	ringA, err := oauth.NewNonceKeyring(t.Context(), w.storeA, wrap, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	ringB, err := oauth.NewNonceKeyring(t.Context(), w.storeB, wrap, nil, now)
	if err != nil {
		t.Fatalf("the secondary region reads the replicated nonce key: %v", err)
	}
	svcB := service(w.storeB, w.b.name)
	svcB.DPoPNonces = ringB
	key := newProofKey(t)
	check := func(nonce string) error {
		_, err := svcB.VerifyDPoP(oauth.DPoPRequest{Proof: tokenProof(t, key, nonce), Method: "POST", URLs: []string{tokenURL}, NonceRequired: true})
		return err
	}
	first := ringA.Current(now)
	if err := check(first); err != nil {
		t.Fatalf("the primary's nonce in the secondary: %v", err)
	}
	if err := check("forged"); err == nil {
		t.Fatal("a forged nonce passed in the secondary")
	}

	// The next rotation, a key's life later (the rotation's clock), in the primary only.
	later := now.Add(oauth.NonceKeyLife)
	before = w.rep.copied(w.b.name)
	if rep, err := oauth.RotateNonceKeys(t.Context(), w.storeA, wrap, later); err != nil || !rep.Made {
		t.Fatalf("rotation: %+v %v", rep, err)
	}
	w.waitReplicated(t, w.b.name, before+1)
	freshA, err := oauth.NewNonceKeyring(t.Context(), w.storeA, wrap, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	second := freshA.Current(now)
	if second == first {
		t.Fatal("the primary issues the same nonce after the rotation")
	}
	if err := check(second); err != nil {
		t.Fatalf("the primary's nonce of the new key in the secondary (running since before the rotation): %v", err)
	}
	if err := check(first); err != nil {
		t.Fatalf("the older key's nonce in the secondary after the rotation: %v", err)
	}
}

// wrappingKey creates a symmetric ENCRYPT_DECRYPT key in local-kms, as the template does.
func wrappingKey(t *testing.T, client *kms.Client) string {
	t.Helper()
	out, err := client.CreateKey(t.Context(), &kms.CreateKeyInput{KeySpec: kmstypes.KeySpecSymmetricDefault,
		KeyUsage: kmstypes.KeyUsageTypeEncryptDecrypt, Description: aws.String("test wrapping key of the DPoP nonce keys")})
	if err != nil {
		t.Fatalf("create the wrapping key: %v", err)
	}
	return aws.ToString(out.KeyMetadata.Arn)
}
