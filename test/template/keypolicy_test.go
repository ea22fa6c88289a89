package template_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/acmebank/authserver/test/template/cfn"
)

const (
	// keyAdmin is the role named in KeyAdminRoleArns; accountAdmin a role with
	// AdministratorAccess that the key policy does not name.
	keyAdmin     = "arn:aws:iam::123456789012:role/authserver-key-admin"
	accountAdmin = "arn:aws:iam::123456789012:role/Admin"
)

// roleARN is what Fn::GetAtt <role>.Arn gives in these tests.
func roleARN(logicalID string) string { return "arn:aws:iam::123456789012:role/" + logicalID }

// asAdmin is a request by a principal whose IAM policies allow it (AdministratorAccess; for
// the functions, their IAM statements are checked by other tests).
func asAdmin(principal, action string, context map[string]string) cfn.KMSRequest {
	return cfn.KMSRequest{Principal: principal, IAMAllows: true, Action: action, Context: context}
}

// TestKeyPolicy_OnlyTheSigningFunctionsUnwrapAndAdministratorsCannotUseTheKey evaluates the
// data-key wrapping key's policy (and its replica's in a pair's secondary) as rendered from
// the transformed template, for the principals a bank's account holds: only the token
// function's role may Decrypt and only the rotation's role wrap new keys, each under the
// signing keys' encryption context; a role with AdministratorAccess is refused every use,
// and so is the named key administrator, who alone may change the policy or schedule the
// key's deletion; the functions can neither tag nor delete nor re-police the key.
func TestKeyPolicy_OnlyTheSigningFunctionsUnwrapAndAdministratorsCannotUseTheKey(t *testing.T) {
	out := samTransform(t)
	token, rotation := roleARN("TokenFunctionRole"), roleARN("RotateKeysFunctionRole")
	// The other functions that sign (JARM responses, JWT introspection responses), and one
	// that does not.
	authorize, introspect, userinfo := roleARN("AuthorizeFunctionRole"), roleARN("IntrospectFunctionRole"), roleARN("UserinfoFunctionRole")
	grants := roleARN("GrantsFunctionRole") // consent receipts
	ctx := map[string]string{"kms:EncryptionContext:authserver:purpose": "id-token-signing"}
	other := map[string]string{"kms:EncryptionContext:authserver:purpose": "something-else"}
	checked := map[string]bool{}
	for _, region := range []string{"", "eu-west-1", "eu-central-1"} {
		for _, admins := range []string{"", keyAdmin} {
			params := map[string]string{"BaseUrl": "https://auth.bank.example", "SigningMode": "data-key", "KeyAdminRoleArns": admins}
			if region != "" {
				params = multiRegion(region)
				params["KeyAdminRoleArns"] = admins
			}
			ev := out.NewEvaluator(params)
			if bad := ev.CheckParameters(); len(bad) > 0 {
				t.Fatal(bad)
			}
			r, err := ev.Render()
			if err != nil {
				t.Fatal(err)
			}
			id := "SigningKeyWrapKey"
			if _, ok := r.Resources[id]; !ok {
				id = "SigningKeyWrapKeyReplica"
			}
			checked[id] = true
			stmts, err := ev.KeyPolicy(r.Resources[id], roleARN)
			if err != nil {
				t.Fatal(err)
			}
			named := admins != ""
			for _, tc := range []struct {
				name string
				req  cfn.KMSRequest
				want bool
			}{
				{"token function unwraps", asAdmin(token, "kms:Decrypt", ctx), true},
				{"token function unwraps another context", asAdmin(token, "kms:Decrypt", other), false},
				{"token function wraps", asAdmin(token, "kms:GenerateDataKeyPairWithoutPlaintext", ctx), false},
				{"authorize function unwraps (JARM)", asAdmin(authorize, "kms:Decrypt", ctx), true},
				{"introspect function unwraps (JWT introspection)", asAdmin(introspect, "kms:Decrypt", ctx), true},
				{"grants function unwraps (consent receipts)", asAdmin(grants, "kms:Decrypt", ctx), true},
				{"grants function schedules deletion", asAdmin(grants, "kms:ScheduleKeyDeletion", nil), false},
				{"authorize function schedules deletion", asAdmin(authorize, "kms:ScheduleKeyDeletion", nil), false},
				{"userinfo function unwraps", asAdmin(userinfo, "kms:Decrypt", ctx), false},
				{"token function schedules deletion", asAdmin(token, "kms:ScheduleKeyDeletion", nil), false},
				{"rotation wraps", asAdmin(rotation, "kms:GenerateDataKeyPairWithoutPlaintext", ctx), true},
				{"rotation unwraps", asAdmin(rotation, "kms:Decrypt", ctx), false},
				{"rotation tags", asAdmin(rotation, "kms:TagResource", nil), false},
				{"rotation schedules deletion", asAdmin(rotation, "kms:ScheduleKeyDeletion", nil), false},
				{"rotation disables", asAdmin(rotation, "kms:DisableKey", nil), false},
				{"rotation rewrites the policy", asAdmin(rotation, "kms:PutKeyPolicy", nil), false},
				{"account administrator unwraps", asAdmin(accountAdmin, "kms:Decrypt", ctx), false},
				{"account administrator wraps", asAdmin(accountAdmin, "kms:GenerateDataKeyPair", ctx), false},
				{"account administrator encrypts", asAdmin(accountAdmin, "kms:Encrypt", ctx), false},
				{"account administrator grants", asAdmin(accountAdmin, "kms:CreateGrant", nil), false},
				{"account administrator rewrites the policy", asAdmin(accountAdmin, "kms:PutKeyPolicy", nil), !named},
				{"account administrator schedules deletion", asAdmin(accountAdmin, "kms:ScheduleKeyDeletion", nil), !named},
				{"key administrator unwraps", asAdmin(keyAdmin, "kms:Decrypt", ctx), false},
				{"key administrator re-encrypts", asAdmin(keyAdmin, "kms:ReEncryptFrom", ctx), false},
				{"key administrator rewrites the policy", asAdmin(keyAdmin, "kms:PutKeyPolicy", nil), true},
				{"key administrator schedules deletion", asAdmin(keyAdmin, "kms:ScheduleKeyDeletion", nil), true},
				{"a role without IAM permissions rewrites the policy", cfn.KMSRequest{Principal: "arn:aws:iam::123456789012:role/app", Action: "kms:PutKeyPolicy"}, false},
			} {
				if got, err := cfn.KeyPolicyAllows(stmts, tc.req); err != nil || got != tc.want {
					t.Errorf("%s (region %q, KeyAdminRoleArns %q): %s: allowed %v (%v), want %v", id, region, admins, tc.name, got, err, tc.want)
				}
			}
		}
	}
	if !checked["SigningKeyWrapKey"] || !checked["SigningKeyWrapKeyReplica"] {
		t.Errorf("checked %v, want the key and its replica", checked)
	}
}

// TestKeyPolicy_ProductionDataKeysNeedNamedAdministrators: a rule refuses a production
// data-key stack without KeyAdminRoleArns.
func TestKeyPolicy_ProductionDataKeysNeedNamedAdministrators(t *testing.T) {
	tpl := load(t)
	for _, tc := range []struct {
		admins  string
		refused bool
	}{{"", true}, {keyAdmin, false}, {keyAdmin + ",arn:aws:iam::123456789012:role/break-glass", false}} {
		ev := tpl.NewEvaluator(map[string]string{"BaseUrl": "https://auth.bank.example", "Environment": "production", "SigningMode": "data-key", "KeyAdminRoleArns": tc.admins,
			"CustomDomainName": "connect.bank.example", "PublicDomainName": "auth.bank.example", "CertificateArn": testCert, "TruststoreUri": "s3://truststore/ca.pem"})
		if bad := ev.CheckParameters(); len(bad) > 0 {
			t.Fatal(bad)
		}
		failed, err := ev.FailedRules()
		if err != nil {
			t.Fatal(err)
		}
		if refused := slices.ContainsFunc(failed, func(s string) bool { return strings.Contains(s, "KeyAdminRoleArns") }); refused != tc.refused {
			t.Errorf("KeyAdminRoleArns=%q: refused %v (%v), want %v", tc.admins, refused, failed, tc.refused)
		}
	}
}

// TestKeyPolicy_ReplicaHasThePrimaryKeysPolicy: the secondary's replica of the wrapping key
// carries the same policy as the key (each naming its own stack's roles), so the checks of the
// one (the Lambda harness checks every request to SigningKeyWrapKey) hold for the other.
func TestKeyPolicy_ReplicaHasThePrimaryKeysPolicy(t *testing.T) {
	tpl := load(t)
	key := cfn.Path(tpl.Resources["SigningKeyWrapKey"], "Properties", "KeyPolicy")
	replica := cfn.Path(tpl.Resources["SigningKeyWrapKeyReplica"], "Properties", "KeyPolicy")
	if key == nil || !reflect.DeepEqual(key, replica) {
		t.Errorf("SigningKeyWrapKeyReplica's KeyPolicy differs from SigningKeyWrapKey's:\n%v\n%v", replica, key)
	}
}
