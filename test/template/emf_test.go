package template_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/metrics"
	"github.com/acmebank/authserver/shared/metrics/emftest"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/test/template/cfn"
)

// emitted is the metric the code writes for one event, read back from its EMF line: what the
// template's alarm and dashboard must name.
func emitted(t *testing.T, function string, emit func(*metrics.Recorder)) emftest.Metric {
	t.Helper()
	var buf bytes.Buffer
	emit(metrics.New(&buf, function, "sandbox"))
	ms, err := emftest.Metrics(buf.String())
	if err != nil || len(ms) != 1 {
		t.Fatalf("the recorder wrote %v (%v), want one metric: %s", ms, err, buf.String())
	}
	return ms[0]
}

// TestOperations_InvalidClientAlarmReadsTheMetricTheTokenFunctionEmits: InvalidClientRefusalsAlarm
// reads the namespace, metric name and exact dimension set of the EMF line the token function
// writes for an invalid_client answer (the name the token main gives boot.Metrics), so the
// alarm cannot watch a metric that never has data.
func TestOperations_InvalidClientAlarmReadsTheMetricTheTokenFunctionEmits(t *testing.T) {
	out := samTransform(t)
	alarm := cfn.AsMap(out.Resources["InvalidClientRefusalsAlarm"]["Properties"])
	if alarm == nil {
		t.Fatal("no InvalidClientRefusalsAlarm")
	}
	main, err := os.ReadFile(filepath.Join(rootDir(t), "functions", "token", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(main, []byte(`boot.Metrics(cfg, "token")`)) {
		t.Fatal(`functions/token/main.go does not record its metrics as boot.Metrics(cfg, "token")`)
	}
	want := emitted(t, "token", func(r *metrics.Recorder) { r.Refusal(context.Background(), oauth.ErrCodeInvalidClient) })
	for _, env := range []string{"sandbox", "production"} {
		ev := out.NewEvaluator(map[string]string{"Environment": env})
		got := map[string]string{}
		for name, v := range dims(alarm["Dimensions"]) {
			s, err := ev.Eval(v)
			if err != nil {
				t.Fatal(err)
			}
			got[name] = s
		}
		want.Dimensions[metrics.DimEnvironment] = env
		if alarm["Namespace"] != want.Namespace || alarm["MetricName"] != want.Name || !maps.Equal(got, want.Dimensions) {
			t.Errorf("Environment=%s: the alarm reads %v %v %v, the token function writes %s %s %v", env,
				alarm["Namespace"], alarm["MetricName"], got, want.Namespace, want.Name, want.Dimensions)
		}
	}
	if !cfn.Refs(alarm["Threshold"], "InvalidClientRefusalsThreshold") || alarm["Statistic"] != "Sum" {
		t.Errorf("the alarm's threshold %v / statistic %v, want the sum against InvalidClientRefusalsThreshold", alarm["Threshold"], alarm["Statistic"])
	}
}

// TestOperations_DashboardShowsTheEMFMetrics: the dashboard searches, for this stack's
// Environment, each metric the functions write (exchanges, refusals, sign-ins) under the exact
// dimension set their EMF lines declare (a SEARCH schema must list every dimension).
func TestOperations_DashboardShowsTheEMFMetrics(t *testing.T) {
	out := samTransform(t)
	ctx := context.Background()
	written := []emftest.Metric{
		emitted(t, "token", func(r *metrics.Recorder) { r.Exchange(ctx, "authorization_code") }),
		emitted(t, "token", func(r *metrics.Recorder) { r.Refusal(ctx, oauth.ErrCodeInvalidGrant) }),
		emitted(t, "authorize", func(r *metrics.Recorder) { r.SignIn(ctx, "password", true) }),
	}
	for _, env := range []string{"sandbox", "production"} {
		ev := out.NewEvaluator(map[string]string{"Environment": env})
		body := subJSON(t, ev, cfn.Path(out.Resources["Dashboard"], "Properties", "DashboardBody"))
		var parsed struct {
			Widgets []struct {
				Properties struct {
					Metrics [][]any `json:"metrics"`
				} `json:"properties"`
			} `json:"widgets"`
		}
		if err := json.Unmarshal([]byte(body), &parsed); err != nil {
			t.Fatalf("the dashboard body is not JSON: %v", err)
		}
		var expressions []string
		for _, w := range parsed.Widgets {
			for _, m := range w.Properties.Metrics {
				for _, p := range m {
					if e, ok := cfn.AsMap(p)["expression"].(string); ok {
						expressions = append(expressions, e)
					}
				}
			}
		}
		for _, m := range written {
			schema := slices.Sorted(maps.Keys(m.Dimensions))
			want := fmt.Sprintf(`SEARCH('{%s,%s} MetricName="%s" Environment="%s"', 'Sum', 60)`, m.Namespace, strings.Join(schema, ","), m.Name, env)
			if !slices.Contains(expressions, want) {
				t.Errorf("Environment=%s: the dashboard has no %s among %q", env, want, expressions)
			}
		}
	}
}

// cloudTrail is a deployment's CloudTrail log group (the parameter deployments() sets).
const cloudTrail = "aws-cloudtrail-logs-123456789012-bank"

var (
	excludedRole = regexp.MustCompile(`\(\$\.userIdentity\.sessionContext\.sessionIssuer\.arn != "([^"]+)"\)`)
	eventName    = regexp.MustCompile(`\(\$\.eventName = "(\w+)"\)`)
)

// TestCloudTrail_KmsUseByOthersIsWatchedWhereTheBankGivesItsTrail: on the SAM transform's
// output, for every deployment (CloudTrailLogGroupName empty and set, each signing mode,
// either region of a pair): with a trail the alarm and the filter of the signing mode exist,
// without one none; the filter reads the trail's log group and counts, in this account and
// region, KMS Decrypt of this region's wrapping key (the key the unwrap policy names, by its
// ARN, which holds the account and region) in
// data-key mode, KMS Sign in kms-sign mode, by any principal that is not one of the roles the
// template lets use the key (the unwrap policy's roles; AUTH_KMS_KEY_SIGNERS), users and the
// root included; its pattern fits CloudWatch's 1,024 characters with the longest role names.
// CloudWatch Logs' filter syntax runs only on AWS: the pattern's terms are checked here, not
// its matching of real CloudTrail events.
func TestCloudTrail_KmsUseByOthersIsWatchedWhereTheBankGivesItsTrail(t *testing.T) {
	out := samTransform(t)
	seen := map[bool]bool{}
	for _, ev := range deployments(out) {
		trail := ev.Params()["CloudTrailLogGroupName"] != ""
		seen[trail] = true
		dataKeys, err := ev.Cond("UseDataKeys")
		if err != nil {
			t.Fatal(err)
		}
		name := describe(ev)
		for id, want := range map[string]bool{"KmsUseByOthersAlarm": trail,
			"KmsDecryptByOthersMetricFilter": trail && dataKeys, "KmsSignByOthersMetricFilter": trail && !dataKeys} {
			if got, err := ev.Creates(id); err != nil || got != want {
				t.Errorf("%s: creates %s %v (%v), want %v", name, id, got, err, want)
			}
		}
		if !trail {
			continue
		}
		id, event, roles := "KmsSignByOthersMetricFilter", "Sign", signerRoles(t, ev, out)
		if dataKeys {
			id, event, roles = "KmsDecryptByOthersMetricFilter", "Decrypt", unwrapRoles(t, ev, out)
		}
		p := cfn.AsMap(out.Resources[id]["Properties"])
		if g, err := ev.Eval(p["LogGroupName"]); err != nil || g != cloudTrail {
			t.Errorf("%s: %s reads %q (%v), want the trail's %q", name, id, g, err, cloudTrail)
		}
		pattern, err := ev.Eval(p["FilterPattern"])
		if err != nil {
			t.Fatal(err)
		}
		tr := cfn.AsMap(cfn.AsSlice(p["MetricTransformations"])[0])
		alarm := cfn.AsMap(out.Resources["KmsUseByOthersAlarm"]["Properties"])
		if tr["MetricName"] != alarm["MetricName"] || fmt.Sprint(tr["MetricNamespace"]) != fmt.Sprint(alarm["Namespace"]) {
			t.Errorf("%s: %s publishes %v, the alarm reads %v", name, id, tr["MetricName"], alarm["MetricName"])
		}
		params := ev.Params()
		terms := []string{`($.eventSource = "kms.amazonaws.com")`, `($.userIdentity.type != "AssumedRole")`}
		if !dataKeys { // the Decrypt filter names the key by its ARN, account and region in it (below)
			terms = append(terms, fmt.Sprintf(`($.recipientAccountId = "%s")`, params["AWS::AccountId"]), fmt.Sprintf(`($.awsRegion = "%s")`, params["AWS::Region"]))
		}
		for _, term := range terms {
			if !strings.Contains(pattern, term) {
				t.Errorf("%s: %s lacks %s: %s", name, id, term, pattern)
			}
		}
		var events []string
		for _, m := range eventName.FindAllStringSubmatch(pattern, -1) {
			events = append(events, m[1])
		}
		if !slices.Equal(events, []string{event}) {
			t.Errorf("%s: %s counts the events %v, want %s", name, id, events, event)
		}
		var excluded []string
		for _, m := range excludedRole.FindAllStringSubmatch(pattern, -1) {
			excluded = append(excluded, m[1])
		}
		slices.Sort(excluded)
		excluded = slices.Compact(excluded)
		if !slices.Equal(excluded, roles) {
			t.Errorf("%s: %s leaves out the roles %v, the template lets %v use the key", name, id, excluded, roles)
		}
		if dataKeys {
			key := unwrapKey(t, ev, out)
			if !strings.Contains(key, ":"+params["AWS::Region"]+":"+params["AWS::AccountId"]+":key/") {
				t.Errorf("%s: the wrapping key %s is not this account's and region's", name, key)
			}
			if !strings.Contains(pattern, fmt.Sprintf(`($.resources[0].ARN = "%s")`, key)) {
				t.Errorf("%s: %s does not name the wrapping key %s: %s", name, id, key, pattern)
			}
		}
		if !strings.HasPrefix(pattern, "{ ") || !strings.HasSuffix(pattern, " }") || strings.Count(pattern, "(") != strings.Count(pattern, ")") {
			t.Errorf("%s: %s is not one balanced JSON filter: %s", name, id, pattern)
		}
		// CloudFormation names a role <stack>-<LogicalId>-<suffix>, at most 64 characters.
		longest := len(pattern)
		for _, r := range roles {
			longest += len("arn:aws-us-gov:iam::123456789012:role/") + 64 - len(r)
		}
		if longest > 1024 {
			t.Errorf("%s: %s could be %d characters with the longest role names; CloudWatch takes 1,024", name, id, longest)
		}
	}
	if !seen[true] || !seen[false] {
		t.Errorf("the deployments give CloudTrailLogGroupName only %v", seen)
	}
}

// unwrapRoles are the ARNs of the roles TokenFunctionUnwrapPolicy, and with DPoP nonces
// NonceKeysUnwrapPolicy, give kms:Decrypt on the wrapping key, sorted, each once.
func unwrapRoles(t *testing.T, ev *cfn.Evaluator, out *cfn.Template) []string {
	t.Helper()
	var arns []string
	roles := cfn.AsSlice(cfn.Path(out.Resources["TokenFunctionUnwrapPolicy"], "Properties", "Roles"))
	if nonces, err := ev.Creates("NonceKeysUnwrapPolicy"); err != nil {
		t.Fatal(err)
	} else if nonces {
		roles = append(roles, cfn.AsSlice(cfn.Path(out.Resources["NonceKeysUnwrapPolicy"], "Properties", "Roles"))...)
	}
	for _, r := range roles {
		name, err := ev.Eval(r)
		if err != nil {
			t.Fatal(err)
		}
		arn, err := ev.Eval(map[string]any{"Fn::GetAtt": []any{strings.TrimPrefix(name, "ref-"), "Arn"}})
		if err != nil {
			t.Fatal(err)
		}
		arns = append(arns, arn)
	}
	slices.Sort(arns)
	return slices.Compact(arns)
}

// unwrapKey is the key ARN TokenFunctionUnwrapPolicy allows kms:Decrypt on.
func unwrapKey(t *testing.T, ev *cfn.Evaluator, out *cfn.Template) string {
	t.Helper()
	st := cfn.AsSlice(cfn.Path(out.Resources["TokenFunctionUnwrapPolicy"], "Properties", "PolicyDocument", "Statement"))
	key, err := ev.Eval(cfn.AsMap(st[0])["Resource"])
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// signerRoles are the roles the rotation names signers in every key's policy
// (AUTH_KMS_KEY_SIGNERS), sorted.
func signerRoles(t *testing.T, ev *cfn.Evaluator, out *cfn.Template) []string {
	t.Helper()
	v, err := ev.Eval(cfn.Path(out.Resources["RotateKeysFunction"], "Properties", "Environment", "Variables", "AUTH_KMS_KEY_SIGNERS"))
	if err != nil {
		t.Fatal(err)
	}
	roles := strings.Split(v, ",")
	slices.Sort(roles)
	return roles
}
