package template_test

import (
	"fmt"
	"path"
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

// keyStatement is one statement of a rendered key policy, its values evaluated.
type keyStatement struct {
	sid, effect string
	principals  []string // "*" for everyone
	actions     []string
	conditions  map[string]map[string][]string // operator → key → values
}

// keyPolicy evaluates the rendered key policy of a KMS key resource: Fn::GetAtt of a role is
// roleARN, Fn::Split and Fn::Sub as CloudFormation does.
func keyPolicy(t *testing.T, ev *cfn.Evaluator, key map[string]any) []keyStatement {
	t.Helper()
	var values func(v any) []string
	values = func(v any) []string {
		switch x := v.(type) {
		case string:
			return []string{x}
		case []any:
			var out []string
			for _, y := range x {
				out = append(out, values(y)...)
			}
			return out
		case map[string]any:
			if g := cfn.AsSlice(x["Fn::GetAtt"]); len(g) == 2 && g[1] == "Arn" {
				return []string{roleARN(fmt.Sprint(g[0]))}
			}
			if sp := cfn.AsSlice(x["Fn::Split"]); len(sp) == 2 {
				s, err := ev.Eval(sp[1])
				if err != nil {
					t.Fatal(err)
				}
				return strings.Split(s, fmt.Sprint(sp[0]))
			}
			s, err := ev.Eval(x)
			if err != nil {
				t.Fatalf("key policy value %v: %v", x, err)
			}
			return []string{s}
		}
		t.Fatalf("key policy value %v (%T)", v, v)
		return nil
	}
	var out []keyStatement
	for _, s := range cfn.AsSlice(cfn.Path(key, "Properties", "KeyPolicy", "Statement")) {
		m := cfn.AsMap(s)
		st := keyStatement{sid: fmt.Sprint(m["Sid"]), effect: fmt.Sprint(m["Effect"]), actions: values(m["Action"]), conditions: map[string]map[string][]string{}}
		if m["Principal"] == "*" {
			st.principals = []string{"*"}
		} else {
			st.principals = values(cfn.Path(m, "Principal", "AWS"))
		}
		if r := fmt.Sprint(m["Resource"]); r != "*" {
			t.Fatalf("%s: Resource %s, want * (the key itself)", st.sid, r)
		}
		for op, kv := range cfn.AsMap(m["Condition"]) {
			st.conditions[op] = map[string][]string{}
			for k, v := range cfn.AsMap(kv) {
				st.conditions[op][k] = values(v)
			}
		}
		out = append(out, st)
	}
	return out
}

// kmsRequestTo is one request to the key: who, which action, and the request's condition keys.
type kmsRequestTo struct {
	principal string
	// iamAllows: the principal's IAM policies allow the request (AdministratorAccess does;
	// for the functions, the template's IAM statements are checked by other tests).
	iamAllows bool
	action    string
	context   map[string]string
}

// allowedByKeyPolicy decides as KMS does: an explicit Deny that applies wins; otherwise a
// statement that allows the principal by name allows, and one that allows the account (its
// root) allows if the principal's IAM policies do. Operators other than StringEquals,
// ArnEquals and ArnNotEquals fail the test, so a new one cannot pass unchecked.
func allowedByKeyPolicy(t *testing.T, stmts []keyStatement, r kmsRequestTo) bool {
	t.Helper()
	applies := func(s keyStatement) (byName, byAccount bool) {
		if !slices.ContainsFunc(s.actions, func(a string) bool { ok, _ := path.Match(a, r.action); return ok }) {
			return false, false
		}
		for op, kv := range s.conditions {
			for k, want := range kv {
				got, ok := r.context[k]
				if k == "aws:PrincipalArn" {
					got, ok = r.principal, true
				}
				switch op {
				case "StringEquals", "ArnEquals":
					if !ok || !slices.Contains(want, got) {
						return false, false
					}
				case "ArnNotEquals":
					if ok && slices.Contains(want, got) {
						return false, false
					}
				default:
					t.Fatalf("%s: condition operator %s is not understood by this test", s.sid, op)
				}
			}
		}
		for _, p := range s.principals {
			switch {
			case p == "*" || p == r.principal:
				byName = true
			case strings.HasSuffix(p, ":root"):
				byAccount = true
			}
		}
		return byName, byAccount
	}
	allowed := false
	for _, s := range stmts {
		byName, byAccount := applies(s)
		if s.effect == "Deny" && (byName || byAccount) {
			return false
		}
		if s.effect == "Allow" && (byName || (byAccount && r.iamAllows)) {
			allowed = true
		}
	}
	return allowed
}

// TestKeyPolicy_OnlyTheTokenFunctionUnwrapsAndAdministratorsCannotUseTheKey evaluates the
// data-key wrapping key's policy (and its replica's in a pair's secondary) as rendered from
// the transformed template, for the principals a bank's account holds: only the token
// function's role may Decrypt and only the rotation's role wrap new keys, each under the
// signing keys' encryption context; a role with AdministratorAccess is refused every use,
// and so is the named key administrator, who alone may change the policy or schedule the
// key's deletion; the functions can neither tag nor delete nor re-police the key.
func TestKeyPolicy_OnlyTheTokenFunctionUnwrapsAndAdministratorsCannotUseTheKey(t *testing.T) {
	out := samTransform(t)
	token, rotation := roleARN("TokenFunctionRole"), roleARN("RotateKeysFunctionRole")
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
			stmts := keyPolicy(t, ev, r.Resources[id])
			named := admins != ""
			for _, tc := range []struct {
				name string
				req  kmsRequestTo
				want bool
			}{
				{"token function unwraps", kmsRequestTo{token, true, "kms:Decrypt", ctx}, true},
				{"token function unwraps another context", kmsRequestTo{token, true, "kms:Decrypt", other}, false},
				{"token function wraps", kmsRequestTo{token, true, "kms:GenerateDataKeyPairWithoutPlaintext", ctx}, false},
				{"token function schedules deletion", kmsRequestTo{token, true, "kms:ScheduleKeyDeletion", nil}, false},
				{"rotation wraps", kmsRequestTo{rotation, true, "kms:GenerateDataKeyPairWithoutPlaintext", ctx}, true},
				{"rotation unwraps", kmsRequestTo{rotation, true, "kms:Decrypt", ctx}, false},
				{"rotation tags", kmsRequestTo{rotation, true, "kms:TagResource", nil}, false},
				{"rotation schedules deletion", kmsRequestTo{rotation, true, "kms:ScheduleKeyDeletion", nil}, false},
				{"rotation disables", kmsRequestTo{rotation, true, "kms:DisableKey", nil}, false},
				{"rotation rewrites the policy", kmsRequestTo{rotation, true, "kms:PutKeyPolicy", nil}, false},
				{"account administrator unwraps", kmsRequestTo{accountAdmin, true, "kms:Decrypt", ctx}, false},
				{"account administrator wraps", kmsRequestTo{accountAdmin, true, "kms:GenerateDataKeyPair", ctx}, false},
				{"account administrator encrypts", kmsRequestTo{accountAdmin, true, "kms:Encrypt", ctx}, false},
				{"account administrator grants", kmsRequestTo{accountAdmin, true, "kms:CreateGrant", nil}, false},
				{"account administrator rewrites the policy", kmsRequestTo{accountAdmin, true, "kms:PutKeyPolicy", nil}, !named},
				{"account administrator schedules deletion", kmsRequestTo{accountAdmin, true, "kms:ScheduleKeyDeletion", nil}, !named},
				{"key administrator unwraps", kmsRequestTo{keyAdmin, true, "kms:Decrypt", ctx}, false},
				{"key administrator re-encrypts", kmsRequestTo{keyAdmin, true, "kms:ReEncryptFrom", ctx}, false},
				{"key administrator rewrites the policy", kmsRequestTo{keyAdmin, true, "kms:PutKeyPolicy", nil}, true},
				{"key administrator schedules deletion", kmsRequestTo{keyAdmin, true, "kms:ScheduleKeyDeletion", nil}, true},
				{"a role without IAM permissions rewrites the policy", kmsRequestTo{"arn:aws:iam::123456789012:role/app", false, "kms:PutKeyPolicy", nil}, false},
			} {
				if got := allowedByKeyPolicy(t, stmts, tc.req); got != tc.want {
					t.Errorf("%s (region %q, KeyAdminRoleArns %q): %s: allowed %v, want %v", id, region, admins, tc.name, got, tc.want)
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
		ev := tpl.NewEvaluator(map[string]string{"BaseUrl": "https://auth.bank.example", "Environment": "production", "SigningMode": "data-key", "KeyAdminRoleArns": tc.admins})
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
