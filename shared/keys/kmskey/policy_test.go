package kmskey_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/kmskey"
	"github.com/acmebank/authserver/shared/keys/kmstest"
	"github.com/acmebank/authserver/test/template/cfn"
)

// TestCreateKey_PolicyLetsOnlyTheTokenFunctionSign creates keys through local-kms with
// Options.Policy, reads back the policy KMS stored and evaluates it as KMS does (the
// evaluator the template tests use, cfn.KeyPolicyAllows): only the token function's role
// signs, with the key's own algorithm; an administrator role, named or with
// AdministratorAccess, is refused Sign; the rotation reads and deletes the key but cannot
// change its policy; the named administrator can.
func TestCreateKey_PolicyLetsOnlyTheTokenFunctionSign(t *testing.T) {
	role := func(name string) string { return "arn:aws:iam::" + kmstest.Account + ":role/" + name }
	token, rotation, admin, accountAdmin := role("TokenFunctionRole"), role("RotateKeysFunctionRole"), role("key-admin"), role("Admin")
	tpl, err := cfn.Load()
	if err != nil {
		t.Fatal(err)
	}
	ev := tpl.NewEvaluator(nil)
	client, tr := kmstest.New(t)
	b := kmskey.New(client, kmskey.Options{Policy: &kmskey.KeyPolicy{Partition: "aws", Account: kmstest.Account,
		Administrators: []string{admin}, Signers: []string{token}, Manager: rotation}})
	for alg, signing := range map[string]string{keys.RS256: "RSASSA_PKCS1_V1_5_SHA_256", keys.PS256: "RSASSA_PSS_SHA_256", keys.ES256: "ECDSA_SHA_256"} {
		ref, _, err := b.CreateKey(context.Background(), alg)
		if err != nil {
			t.Fatal(err)
		}
		out, err := client.GetKeyPolicy(context.Background(), &kms.GetKeyPolicyInput{KeyId: aws.String(ref), PolicyName: aws.String("default")})
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if err := json.Unmarshal([]byte(aws.ToString(out.Policy)), &doc); err != nil {
			t.Fatalf("%s: the stored policy is not JSON: %v", alg, err)
		}
		stmts, err := ev.KeyPolicy(map[string]any{"Properties": map[string]any{"KeyPolicy": doc}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		other := "RSASSA_PSS_SHA_512"
		for _, tc := range []struct {
			name      string
			principal string
			action    string
			context   map[string]string
			want      bool
		}{
			{"token function signs", token, "kms:Sign", map[string]string{"kms:SigningAlgorithm": signing}, true},
			{"token function signs with another algorithm", token, "kms:Sign", map[string]string{"kms:SigningAlgorithm": other}, false},
			{"token function schedules deletion", token, "kms:ScheduleKeyDeletion", nil, false},
			{"rotation reads the public key", rotation, "kms:GetPublicKey", nil, true},
			{"rotation schedules deletion", rotation, "kms:ScheduleKeyDeletion", nil, true},
			{"rotation signs", rotation, "kms:Sign", map[string]string{"kms:SigningAlgorithm": signing}, false},
			{"rotation rewrites the policy", rotation, "kms:PutKeyPolicy", nil, false},
			{"rotation tags", rotation, "kms:TagResource", nil, false},
			{"key administrator signs", admin, "kms:Sign", map[string]string{"kms:SigningAlgorithm": signing}, false},
			{"key administrator rewrites the policy", admin, "kms:PutKeyPolicy", nil, true},
			{"account administrator signs", accountAdmin, "kms:Sign", map[string]string{"kms:SigningAlgorithm": signing}, false},
			{"account administrator rewrites the policy", accountAdmin, "kms:PutKeyPolicy", nil, false},
			{"account administrator grants itself use", accountAdmin, "kms:CreateGrant", nil, false},
		} {
			got, err := cfn.KeyPolicyAllows(stmts, cfn.KMSRequest{Principal: tc.principal, IAMAllows: true, Action: tc.action, Context: tc.context})
			if err != nil || got != tc.want {
				t.Errorf("%s: %s: allowed %v (%v), want %v", alg, tc.name, got, err, tc.want)
			}
		}
	}
	if tr.Calls("CreateKey") != 3 {
		t.Errorf("%d CreateKey calls, want 3", tr.Calls("CreateKey"))
	}
}

// TestCreateKey_PolicyWithoutSignerCreatesNoKey: a policy that would leave the key unusable
// (no signer or no rotation) is refused before any KMS call.
func TestCreateKey_PolicyWithoutSignerCreatesNoKey(t *testing.T) {
	client, tr := kmstest.New(t)
	for _, p := range []kmskey.KeyPolicy{
		{Partition: "aws", Account: kmstest.Account, Manager: "arn:aws:iam::" + kmstest.Account + ":role/r"},
		{Partition: "aws", Account: kmstest.Account, Signers: []string{"arn:aws:iam::" + kmstest.Account + ":role/t"}},
		{Partition: "aws", Account: kmstest.Account, Signers: []string{"TokenFunctionRole"}, Manager: "arn:aws:iam::" + kmstest.Account + ":role/r"},
	} {
		if _, _, err := kmskey.New(client, kmskey.Options{Policy: &p}).CreateKey(context.Background(), keys.RS256); err == nil {
			t.Errorf("policy %+v: CreateKey succeeded", p)
		}
	}
	if n := tr.Calls("CreateKey"); n != 0 {
		t.Errorf("%d CreateKey calls, want none", n)
	}
}
