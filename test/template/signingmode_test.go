package template_test

import (
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/test/template/cfn"
)

// TestIAM_EachSigningModeGrantsOnlyItsKMSActions: in kms-sign mode the token function may only
// Sign and the rotation only manage asymmetric keys; in data-key mode the token function may
// Decrypt the wrapping key (under the signing keys' encryption context) and the rotation only
// generate wrapped pairs, plus, for the KMS keys of a stack switched from kms-sign, Sign and
// ScheduleKeyDeletion on keys tagged for the stack. The authorize, introspect and grants
// functions, which sign JARM and RFC 9701 responses and consent receipts with the same keys,
// have the token function's grants.
// No other function touches KMS.
func TestIAM_EachSigningModeGrantsOnlyItsKMSActions(t *testing.T) {
	tpl := load(t)
	want := map[string]map[string][]string{
		"kms-sign": {
			"TokenFunction":      {"kms:Sign"},
			"AuthorizeFunction":  {"kms:Sign"},
			"IntrospectFunction": {"kms:Sign"},
			"GrantsFunction":     {"kms:Sign"},
			"RotateKeysFunction": {"kms:CreateKey", "kms:GetPublicKey", "kms:ScheduleKeyDeletion", "kms:TagResource"},
		},
		"data-key": {
			"TokenFunction":      {"kms:Decrypt", "kms:Sign"},
			"AuthorizeFunction":  {"kms:Decrypt", "kms:Sign"},
			"IntrospectFunction": {"kms:Decrypt", "kms:Sign"},
			"GrantsFunction":     {"kms:Decrypt", "kms:Sign"},
			"RotateKeysFunction": {"kms:GenerateDataKeyPairWithoutPlaintext", "kms:ScheduleKeyDeletion"},
		},
	}
	backend := map[string]string{"kms-sign": "kms", "data-key": "kms-data-key"}
	for mode, fns := range want {
		ev := tpl.NewEvaluator(map[string]string{"BaseUrl": "https://a.example", "SigningMode": mode})
		for id := range functionNames {
			stmts, err := tpl.StatementsIn(ev, tpl.Resources[id])
			if err != nil {
				t.Fatalf("%s %s: %v", mode, id, err)
			}
			var got []string
			for _, s := range stmts {
				for _, a := range s.Actions {
					if strings.HasPrefix(a, "kms:") {
						got = append(got, a)
						if a == "kms:Sign" || a == "kms:ScheduleKeyDeletion" {
							tag, _ := ev.Eval(cfn.AsMap(s.Condition["StringEquals"])["aws:ResourceTag/authserver:purpose"])
							if tag == "" {
								t.Errorf("%s %s: %s is not limited to the stack's tagged keys", mode, id, a)
							}
						}
						if mode == "data-key" && a != "kms:Sign" && a != "kms:ScheduleKeyDeletion" {
							ctx, _ := ev.Eval(cfn.AsMap(s.Condition["StringEquals"])["kms:EncryptionContext:authserver:purpose"])
							if ctx != "id-token-signing" {
								t.Errorf("data-key %s: %s without the signing keys' encryption context condition", id, a)
							}
							if res, _ := ev.Eval(s.Resources[0]); !strings.HasSuffix(res, ":key/ref-SigningKeyWrapKey") {
								t.Errorf("data-key %s: %s on %q, want the wrapping key only", id, a, res)
							}
						}
					}
				}
			}
			sort.Strings(got)
			if !slices.Equal(got, fns[id]) {
				t.Errorf("%s mode, %s: KMS actions %v, want %v", mode, id, got, fns[id])
			}
			env := tpl.Env(tpl.Resources[id])
			if b, err := ev.Eval(env[config.EnvKeyBackend]); err != nil || b != backend[mode] {
				t.Errorf("%s mode, %s: %s = %q (%v), want %q", mode, id, config.EnvKeyBackend, b, err, backend[mode])
			}
			if k, _ := ev.Eval(env[config.EnvKMSDataKey]); (mode == "data-key") != (k != "") {
				t.Errorf("%s mode, %s: %s = %q", mode, id, config.EnvKMSDataKey, k)
			}
		}
	}
	if c := cfn.AsMap(tpl.Resources["SigningKeyWrapKey"]); c["Condition"] != "CreatesWrapKey" {
		t.Errorf("the wrapping key must exist only in data-key mode (Condition CreatesWrapKey), got %v", c["Condition"])
	}
}
