package template_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/acmebank/authserver/test/template/cfn"
)

// Customer-managed keys as a bank gives them (test ARNs of the right shape).
const (
	testTableKey     = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	testPeerTableKey = "arn:aws:kms:eu-central-1:123456789012:key/5678abcd-12ab-34cd-56ef-1234567890ab"
	testLogsKey      = "arn:aws:kms:eu-west-1:123456789012:key/9abcabcd-12ab-34cd-56ef-1234567890ab"
	testFunctionsKey = "arn:aws:kms:eu-west-1:123456789012:key/mrk-1234abcd12ab34cd56ef1234567890ab"
)

// customerKeys are the parameters of a deployment with every customer-managed key; pair adds
// the other replica's key, which a multi-region pair needs and one region refuses.
func customerKeys(pair bool) map[string]string {
	p := map[string]string{"BaseUrl": "https://auth.bank.example", "TableKmsKeyArn": testTableKey,
		"LogsKmsKeyArn": testLogsKey, "FunctionsKmsKeyArn": testFunctionsKey}
	if pair {
		p["PeerTableKmsKeyArn"] = testPeerTableKey
	}
	return p
}

// ofType are the rendered resources of type typ, by logical id.
func ofType(r *cfn.Rendered, typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, res := range r.Resources {
		if res["Type"] == typ {
			out[id] = res
		}
	}
	return out
}

// eval evaluates v under ev, "" for a property CloudFormation leaves out.
func eval(t *testing.T, ev *cfn.Evaluator, v any) string {
	t.Helper()
	if v == nil {
		return ""
	}
	s, err := ev.Eval(v)
	if err != nil {
		t.Fatalf("%s: %v: %v", describe(ev), v, err)
	}
	return s
}

// TestCustomerKeys_TableIsEncryptedUnderTheBanksKeyWhenOneIsSet reads the transformed template
// for every deployment: with TableKmsKeyArn the single-region table is encrypted with KMS
// under that key, and the global table with KMS under that key in PrimaryRegion's replica and
// PeerTableKmsKeyArn in SecondaryRegion's; without it, SSEEnabled alone (the AWS-managed key
// aws/dynamodb) and no replica names a key.
func TestCustomerKeys_TableIsEncryptedUnderTheBanksKeyWhenOneIsSet(t *testing.T) {
	out := samTransform(t)
	seen := map[string]bool{}
	for _, ev := range deployments(out) {
		r, err := ev.Render()
		if err != nil {
			t.Fatalf("%s: %v", describe(ev), err)
		}
		p := ev.Params()
		keyed := p["TableKmsKeyArn"] != ""
		if table, ok := r.Resources["Table"]; ok {
			seen["Table"+map[bool]string{true: " with key", false: ""}[keyed]] = true
			sse := cfn.AsMap(cfn.Path(table, "Properties", "SSESpecification"))
			got := [3]string{eval(t, ev, sse["SSEEnabled"]), eval(t, ev, sse["SSEType"]), eval(t, ev, sse["KMSMasterKeyId"])}
			want := [3]string{"true", "", ""}
			if keyed {
				want = [3]string{"true", "KMS", p["TableKmsKeyArn"]}
			}
			if got != want {
				t.Errorf("%s: Table SSESpecification (SSEEnabled, SSEType, KMSMasterKeyId) = %q, want %q", describe(ev), got, want)
			}
		}
		global, ok := r.Resources["GlobalTable"]
		if !ok {
			continue
		}
		seen["GlobalTable"+map[bool]string{true: " with key", false: ""}[keyed]] = true
		sse := cfn.AsMap(cfn.Path(global, "Properties", "SSESpecification"))
		if eval(t, ev, sse["SSEEnabled"]) != "true" || eval(t, ev, sse["SSEType"]) != map[bool]string{true: "KMS", false: ""}[keyed] {
			t.Errorf("%s: GlobalTable SSESpecification = %v", describe(ev), sse)
		}
		wantKey := map[string]string{p["PrimaryRegion"]: p["TableKmsKeyArn"], p["SecondaryRegion"]: p["PeerTableKmsKeyArn"]}
		replicas := cfn.AsSlice(cfn.Path(global, "Properties", "Replicas"))
		if len(replicas) != 2 {
			t.Fatalf("%s: %d replicas", describe(ev), len(replicas))
		}
		for _, rep := range replicas {
			region := eval(t, ev, cfn.AsMap(rep)["Region"])
			got := eval(t, ev, cfn.Path(rep, "SSESpecification", "KMSMasterKeyId"))
			if want := map[bool]string{true: wantKey[region], false: ""}[keyed]; got != want || (keyed && got == "") {
				t.Errorf("%s: replica %s KMSMasterKeyId = %q, want %q", describe(ev), region, got, want)
			}
		}
	}
	for _, want := range []string{"Table", "Table with key", "GlobalTable", "GlobalTable with key"} {
		if !seen[want] {
			t.Errorf("no deployment checked has a %s", want)
		}
	}
}

// TestCustomerKeys_EveryLogGroupAndFunctionUsesTheBanksKeyWhenOneIsSet: in the transformed
// template, every log group (the functions' and the access log) has KmsKeyId LogsKmsKeyArn,
// and every function KmsKeyArn FunctionsKmsKeyArn, when they are set, and none when not.
func TestCustomerKeys_EveryLogGroupAndFunctionUsesTheBanksKeyWhenOneIsSet(t *testing.T) {
	out := samTransform(t)
	seen := map[string]bool{}
	for _, ev := range deployments(out) {
		r, err := ev.Render()
		if err != nil {
			t.Fatalf("%s: %v", describe(ev), err)
		}
		p := ev.Params()
		for _, c := range []struct{ typ, prop, param string }{
			{"AWS::Logs::LogGroup", "KmsKeyId", "LogsKmsKeyArn"},
			{"AWS::Lambda::Function", "KmsKeyArn", "FunctionsKmsKeyArn"},
		} {
			resources := ofType(r, c.typ)
			if len(resources) < 9 {
				t.Fatalf("%s: %d %s, want one per function at least", describe(ev), len(resources), c.typ)
			}
			seen[c.param+"="+p[c.param]] = true
			for id, res := range resources {
				if got := eval(t, ev, cfn.Path(res, "Properties", c.prop)); got != p[c.param] {
					t.Errorf("%s: %s %s = %q, want %s %q", describe(ev), id, c.prop, got, c.param, p[c.param])
				}
			}
		}
	}
	for _, want := range []string{"LogsKmsKeyArn=", "LogsKmsKeyArn=" + testLogsKey, "FunctionsKmsKeyArn=", "FunctionsKmsKeyArn=" + testFunctionsKey} {
		if !seen[want] {
			t.Errorf("no deployment checked has %s", want)
		}
	}
}

// TestCustomerKeys_FunctionRolesMayUseTheKeysAndNothingMore: with a table or environment key,
// every function's role gets the policy FunctionsCustomerKeysPolicy: the table's keys (both
// replicas' in a pair) for DynamoDB's use on its behalf only (kms:ViaService), and kms:Decrypt
// on the environment's key; InitialKey (the first rotation run, which reads its environment and
// writes the table) waits for it. Without customer-managed keys there is no such policy.
func TestCustomerKeys_FunctionRolesMayUseTheKeysAndNothingMore(t *testing.T) {
	out := samTransform(t)
	seen := map[[2]bool]bool{}
	for _, ev := range deployments(out) {
		r, err := ev.Render()
		if err != nil {
			t.Fatalf("%s: %v", describe(ev), err)
		}
		p := ev.Params()
		tableKey, envKey := p["TableKmsKeyArn"] != "", p["FunctionsKmsKeyArn"] != ""
		seen[[2]bool{tableKey, envKey}] = true
		policy, ok := r.Resources["FunctionsCustomerKeysPolicy"]
		if ok != (tableKey || envKey) {
			t.Fatalf("%s: FunctionsCustomerKeysPolicy created %v, want %v", describe(ev), ok, tableKey || envKey)
		}
		if !ok {
			continue
		}
		var roles []string
		for _, role := range cfn.AsSlice(cfn.Path(policy, "Properties", "Roles")) {
			roles = append(roles, eval(t, ev, role))
		}
		for id, fn := range ofType(r, "AWS::Lambda::Function") {
			role := cfn.AsSlice(cfn.AsMap(cfn.Path(fn, "Properties", "Role"))["Fn::GetAtt"])
			if len(role) != 2 || !slices.Contains(roles, "ref-"+role[0].(string)) {
				t.Errorf("%s: %s's role %v does not get the keys policy (roles %v)", describe(ev), id, role, roles)
			}
		}
		statements := cfn.AsSlice(cfn.Path(policy, "Properties", "PolicyDocument", "Statement"))
		var table, env map[string]any
		for _, s := range statements {
			switch cfn.AsMap(s)["Sid"] {
			case "UseTheTableKeysThroughDynamoDB":
				table = cfn.AsMap(s)
			case "DecryptTheEnvironment":
				env = cfn.AsMap(s)
			default:
				t.Errorf("%s: unexpected statement %v", describe(ev), s)
			}
		}
		if (table != nil) != tableKey || (env != nil) != envKey {
			t.Errorf("%s: table statement %v, environment statement %v: want %v, %v", describe(ev), table != nil, env != nil, tableKey, envKey)
		}
		if table != nil {
			keys, err := ev.EvalList(table["Resource"])
			if err != nil {
				t.Fatal(err)
			}
			services, err := ev.EvalList(cfn.Path(table, "Condition", "StringEquals", "kms:ViaService"))
			if err != nil {
				t.Fatal(err)
			}
			wantKeys := []string{p["TableKmsKeyArn"]}
			wantServices := []string{"dynamodb." + p["AWS::Region"] + ".amazonaws.com"}
			if p["SecondaryRegion"] != "" {
				wantKeys = append(wantKeys, p["PeerTableKmsKeyArn"])
				wantServices = []string{"dynamodb." + p["PrimaryRegion"] + ".amazonaws.com", "dynamodb." + p["SecondaryRegion"] + ".amazonaws.com"}
			}
			if !slices.Equal(keys, wantKeys) || !slices.Equal(services, wantServices) {
				t.Errorf("%s: table keys %v through %v, want %v through %v", describe(ev), keys, services, wantKeys, wantServices)
			}
			for _, a := range cfn.Strs(table["Action"]) {
				if !strings.HasPrefix(a, "kms:") || a == "kms:*" || a == "kms:CreateGrant" {
					t.Errorf("%s: the functions may %s on the table key", describe(ev), a)
				}
			}
		}
		if env != nil {
			if got := eval(t, ev, env["Resource"]); got != p["FunctionsKmsKeyArn"] || !slices.Equal(cfn.Strs(env["Action"]), []string{"kms:Decrypt"}) {
				t.Errorf("%s: environment statement %v on %q, want kms:Decrypt on %q", describe(ev), env["Action"], got, p["FunctionsKmsKeyArn"])
			}
		}
		if initial, ok := r.Resources["InitialKey"]; ok && !cfn.Refs(initial, "FunctionsCustomerKeysPolicy") {
			t.Errorf("%s: InitialKey does not wait for FunctionsCustomerKeysPolicy", describe(ev))
		}
	}
	for _, want := range [][2]bool{{false, false}, {true, true}} {
		if !seen[want] {
			t.Errorf("no deployment checked with (table key, environment key) = %v", want)
		}
	}
}

// TestRules_TableKeysNameBothReplicasOfAPair: in a multi-region pair, the table's key needs
// the other replica's (a global table's replicas are all customer-managed or none is), in one
// region the peer's key is refused, and the peer's key alone is refused anywhere; the key
// parameters take key ARNs only.
func TestRules_TableKeysNameBothReplicasOfAPair(t *testing.T) {
	tpl := load(t)
	for _, tc := range []struct {
		name    string
		pair    bool
		params  map[string]string
		refused bool
	}{
		{"one region, no keys", false, nil, false},
		{"one region, table key", false, map[string]string{"TableKmsKeyArn": testTableKey}, false},
		{"one region, both keys", false, map[string]string{"TableKmsKeyArn": testTableKey, "PeerTableKmsKeyArn": testPeerTableKey}, true},
		{"one region, peer key alone", false, map[string]string{"PeerTableKmsKeyArn": testPeerTableKey}, true},
		{"pair, no keys", true, nil, false},
		{"pair, both keys", true, map[string]string{"TableKmsKeyArn": testTableKey, "PeerTableKmsKeyArn": testPeerTableKey}, false},
		{"pair, table key alone", true, map[string]string{"TableKmsKeyArn": testTableKey}, true},
		{"pair, peer key alone", true, map[string]string{"PeerTableKmsKeyArn": testPeerTableKey}, true},
	} {
		for _, region := range []string{"eu-west-1", "eu-central-1"} {
			params := map[string]string{"BaseUrl": "https://auth.bank.example", "AWS::Region": region}
			if tc.pair {
				params = multiRegion(region)
			} else if region != "eu-west-1" {
				continue
			}
			for k, v := range tc.params {
				params[k] = v
			}
			ev := tpl.NewEvaluator(params)
			if bad := ev.CheckParameters(); len(bad) > 0 {
				t.Fatalf("%s: %v", tc.name, bad)
			}
			failed, err := ev.FailedRules()
			if err != nil {
				t.Fatal(err)
			}
			if refused := len(failed) > 0; refused != tc.refused {
				t.Errorf("%s in %s: refused %v (%v), want %v", tc.name, region, refused, failed, tc.refused)
			}
		}
	}
}
