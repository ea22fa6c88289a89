package template_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/acmebank/authserver/test/template/cfn"
)

// TestDPoPNonces_NoFunctionEnvironmentCarriesANonceKey: in every deployment (DPoPNonces either
// value), no function's environment carries a nonce key or a resolved secret, the stack has no
// Secrets Manager secret, and the token, PAR and rotation functions are told only whether the
// nonces are on (AUTH_DPOP_NONCES): the keys are read from the table at run time.
func TestDPoPNonces_NoFunctionEnvironmentCarriesANonceKey(t *testing.T) {
	out := samTransform(t)
	seen := map[bool]bool{}
	for i, ev := range deployments(out) {
		on, err := ev.Cond("UseDPoPNonces")
		if err != nil {
			t.Fatal(err)
		}
		seen[on] = true
		r, err := ev.Render()
		if err != nil {
			t.Fatal(err)
		}
		want := map[bool]string{true: "on", false: "off"}[on]
		for id, res := range r.Resources {
			if res["Type"] == "AWS::SecretsManager::Secret" {
				t.Errorf("deployment %d: %s is a Secrets Manager secret", i, id)
			}
			if res["Type"] != "AWS::Lambda::Function" {
				continue
			}
			env := cfn.AsMap(cfn.Path(res, "Properties", "Environment", "Variables"))
			for k, v := range env {
				if strings.Contains(k, "NONCE_KEY") || strings.Contains(fmt.Sprint(v), "resolve:") {
					t.Errorf("deployment %d: %s's environment has %s=%v", i, id, k, v)
				}
			}
			switch id {
			case "TokenFunction", "ParFunction", "RotateKeysFunction":
				if env["AUTH_DPOP_NONCES"] != want {
					t.Errorf("deployment %d (nonces %v): %s has AUTH_DPOP_NONCES=%v, want %s", i, on, id, env["AUTH_DPOP_NONCES"], want)
				}
			}
		}
	}
	if !seen[true] || !seen[false] {
		t.Fatalf("deployments gave UseDPoPNonces only %v", seen)
	}
}

// TestKeyPolicy_DPoPNonceKeysAreUnwrappedByTheTokenAndPARFunctionsOnly evaluates the wrapping
// key (and its replica) for DPoPNonces and SigningMode each way: the key exists when either
// needs it (UsesWrapKey), and with nonces on only the token and PAR roles decrypt under the
// nonce keys' encryption context and only the rotation's role makes nonce keys, ciphertext
// only; the PAR role never unwraps a signing key, the other signing functions never a nonce
// key; with nonces off no one does either. The IAM policies granting the same exist only with
// nonces on.
func TestKeyPolicy_DPoPNonceKeysAreUnwrappedByTheTokenAndPARFunctionsOnly(t *testing.T) {
	out := samTransform(t)
	token, par, rotation := roleARN("TokenFunctionRole"), roleARN("ParFunctionRole"), roleARN("RotateKeysFunctionRole")
	authorize, introspect := roleARN("AuthorizeFunctionRole"), roleARN("IntrospectFunctionRole")
	nonce := map[string]string{"kms:EncryptionContext:authserver:purpose": "dpop-nonce"}
	signing := map[string]string{"kms:EncryptionContext:authserver:purpose": "id-token-signing"}
	type deployment struct {
		region, mode, nonces string
		key                  string // the wrapping key's resource, "" none
	}
	for _, d := range []deployment{
		{"", "kms-sign", "Disabled", ""},
		{"", "kms-sign", "Enabled", "SigningKeyWrapKey"},
		{"", "data-key", "Disabled", "SigningKeyWrapKey"},
		{"", "data-key", "Enabled", "SigningKeyWrapKey"},
		{"eu-west-1", "data-key", "Enabled", "SigningKeyWrapKey"},
		{"eu-central-1", "data-key", "Enabled", "SigningKeyWrapKeyReplica"},
		{"eu-central-1", "data-key", "Disabled", "SigningKeyWrapKeyReplica"},
	} {
		name := fmt.Sprintf("region %q %s nonces %s", d.region, d.mode, d.nonces)
		params := map[string]string{"BaseUrl": "https://auth.bank.example"}
		if d.region != "" {
			params = multiRegion(d.region)
		}
		params["SigningMode"], params["DPoPNonces"] = d.mode, d.nonces
		ev := out.NewEvaluator(params)
		if bad := ev.CheckParameters(); len(bad) > 0 {
			t.Fatal(bad)
		}
		for _, id := range []string{"SigningKeyWrapKey", "SigningKeyWrapKeyReplica"} {
			if got, err := ev.Creates(id); err != nil || got != (id == d.key) {
				t.Errorf("%s: creates %s %v (%v), want %v", name, id, got, err, id == d.key)
			}
		}
		on := d.nonces == "Enabled"
		for _, id := range []string{"NonceKeysUnwrapPolicy", "RotateKeysFunctionNonceKeyPolicy"} {
			if got, err := ev.Creates(id); err != nil || got != on {
				t.Errorf("%s: creates %s %v (%v), want %v", name, id, got, err, on)
			}
		}
		if d.key == "" {
			continue
		}
		r, err := ev.Render()
		if err != nil {
			t.Fatal(err)
		}
		stmts, err := ev.KeyPolicy(r.Resources[d.key], roleARN)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			req  cfn.KMSRequest
			want bool
		}{
			{"token function unwraps a nonce key", asAdmin(token, "kms:Decrypt", nonce), on},
			{"PAR function unwraps a nonce key", asAdmin(par, "kms:Decrypt", nonce), on},
			{"PAR function unwraps a signing key", asAdmin(par, "kms:Decrypt", signing), false},
			{"authorize function unwraps a nonce key", asAdmin(authorize, "kms:Decrypt", nonce), false},
			{"introspect function unwraps a nonce key", asAdmin(introspect, "kms:Decrypt", nonce), false},
			{"rotation unwraps a nonce key", asAdmin(rotation, "kms:Decrypt", nonce), false},
			{"rotation makes a nonce key", asAdmin(rotation, "kms:GenerateDataKeyWithoutPlaintext", nonce), on},
			{"rotation makes a data key under the signing context", asAdmin(rotation, "kms:GenerateDataKeyWithoutPlaintext", signing), false},
			{"rotation makes a data key with its plaintext", asAdmin(rotation, "kms:GenerateDataKey", nonce), false},
			{"token function makes a nonce key", asAdmin(token, "kms:GenerateDataKeyWithoutPlaintext", nonce), false},
			{"account administrator unwraps a nonce key", asAdmin(accountAdmin, "kms:Decrypt", nonce), false},
			{"account administrator makes a nonce key", asAdmin(accountAdmin, "kms:GenerateDataKeyWithoutPlaintext", nonce), false},
			{"token function unwraps a signing key", asAdmin(token, "kms:Decrypt", signing), true},
		} {
			if got, err := cfn.KeyPolicyAllows(stmts, tc.req); err != nil || got != tc.want {
				t.Errorf("%s: %s: %s: allowed %v (%v), want %v", name, d.key, tc.name, got, err, tc.want)
			}
		}
	}
}
