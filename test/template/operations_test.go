package template_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/acmebank/authserver/shared/boot"
	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/kmskey"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/test/template/cfn"
)

// The operations of the stack (docs/deploy.md section 4): alarms, the metric filters they
// read, the alarm topic, reserved concurrency, gradual deployments, the rotation's failure
// queue and the dashboard, all checked on the SAM transform's output, what CloudFormation
// creates.

// servingFunctions are the functions that answer requests: API routes and the authorizer.
// They are rolled out gradually through their alias; the rotation is not (the InitialKey
// custom resource and the schedule call the function itself).
var servingFunctions = []string{"AuthorizeFunction", "TokenFunction", "RevokeFunction", "ParFunction",
	"JwksFunction", "UserinfoFunction", "IntrospectFunction", "AuthorizerFunction"}

// alarmsOf returns the transformed template's alarms by logical id.
func alarmsOf(tpl *cfn.Template) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range tpl.Resources {
		if r["Type"] == "AWS::CloudWatch::Alarm" {
			out[id] = r
		}
	}
	return out
}

// baseName is a function's logical id without "Function": TokenFunction -> Token.
func baseName(fn string) string { return strings.TrimSuffix(fn, "Function") }

// dims are an alarm's (or a metric's) dimensions, name -> value as written.
func dims(v any) map[string]any {
	out := map[string]any{}
	for _, d := range cfn.AsSlice(v) {
		out[fmt.Sprint(cfn.AsMap(d)["Name"])] = cfn.AsMap(d)["Value"]
	}
	return out
}

// alarmMetrics are the metrics an alarm reads: its own, or each MetricStat of its metric math.
func alarmMetrics(alarm map[string]any) []map[string]any {
	p := cfn.AsMap(alarm["Properties"])
	if p["MetricName"] != nil {
		return []map[string]any{p}
	}
	var out []map[string]any
	for _, m := range cfn.AsSlice(p["Metrics"]) {
		if ms := cfn.AsMap(cfn.Path(m, "MetricStat", "Metric")); ms != nil {
			out = append(out, ms)
		}
	}
	return out
}

// findAlarm is the one alarm reading metric in namespace with the dimensions given (each
// dimension's value compared with want by cfn.Refs for a resource name, or as a string).
func findAlarm(t *testing.T, tpl *cfn.Template, namespace, metric string, want map[string]string) (string, map[string]any) {
	t.Helper()
	for id, a := range alarmsOf(tpl) {
		for _, m := range alarmMetrics(a) {
			if fmt.Sprint(m["Namespace"]) != namespace || m["MetricName"] != metric {
				continue
			}
			d, ok := dims(m["Dimensions"]), true
			for k, v := range want {
				ok = ok && (d[k] == v || cfn.Refs(d[k], v))
			}
			if ok && len(d) == len(want) {
				return id, a
			}
		}
	}
	t.Errorf("no alarm on %s %s with dimensions %v", namespace, metric, want)
	return "", nil
}

// TestOperations_EveryFunctionHasErrorsAndThrottlesAlarms: each function's Lambda Errors and
// Throttles (by function name, every version) raise an alarm, with thresholds the operator
// sets by parameter.
func TestOperations_EveryFunctionHasErrorsAndThrottlesAlarms(t *testing.T) {
	out := samTransform(t)
	for id := range load(t).GoFunctions() {
		for metric, param := range map[string]string{"Errors": "FunctionErrorsThreshold", "Throttles": "FunctionThrottlesThreshold"} {
			name, a := findAlarm(t, out, "AWS/Lambda", metric, map[string]string{"FunctionName": id})
			if a == nil {
				continue
			}
			if want := baseName(id) + metric + "Alarm"; name != want {
				t.Errorf("%s's %s alarm is %s, want %s (the name docs/deploy.md and the deployment use)", id, metric, name, want)
			}
			if !cfn.Refs(cfn.Path(a, "Properties", "Threshold"), param) {
				t.Errorf("%s: threshold %v, want the %s parameter", name, cfn.Path(a, "Properties", "Threshold"), param)
			}
		}
	}
}

// TestOperations_LatencyAlarmsReadTheTokenAndAuthorizeRoutes: p99 of API Gateway's Latency on
// the token route and on both authorize routes, whose route metrics are turned on (HTTP APIs
// publish per-route metrics only then).
func TestOperations_LatencyAlarmsReadTheTokenAndAuthorizeRoutes(t *testing.T) {
	out := samTransform(t)
	routeSettings := cfn.AsMap(cfn.Path(out.Resources["HttpApiApiGatewayDefaultStage"], "Properties", "RouteSettings"))
	for route, param := range map[string]string{
		"POST /v2/authentication/oauth2/token":     "TokenLatencyP99Ms",
		"GET /v2/authentication/oauth2/authorize":  "AuthorizeLatencyP99Ms",
		"POST /v2/authentication/oauth2/authorize": "AuthorizeLatencyP99Ms",
	} {
		method, path, _ := strings.Cut(route, " ")
		name, a := findAlarm(t, out, "AWS/ApiGateway", "Latency", map[string]string{"ApiId": "HttpApi", "Stage": "$default", "Method": method, "Resource": path})
		if a == nil {
			continue
		}
		p := cfn.AsMap(a["Properties"])
		if p["ExtendedStatistic"] != "p99" || !cfn.Refs(p["Threshold"], param) {
			t.Errorf("%s: %v over %v, want p99 over the %s parameter", name, p["ExtendedStatistic"], p["Threshold"], param)
		}
		if cfn.AsMap(routeSettings[route])["DetailedMetricsEnabled"] != true {
			t.Errorf("route %s: detailed metrics off, so %s would never have data", route, name)
		}
	}
}

// TestOperations_TableThrottlingRaisesAnAlarmInEitherTableMode: the table's throttled reads
// and writes, on the stack's table or, multi-region, on the global table's replica here.
func TestOperations_TableThrottlingRaisesAnAlarmInEitherTableMode(t *testing.T) {
	out := samTransform(t)
	for _, metric := range []string{"ReadThrottleEvents", "WriteThrottleEvents"} {
		name, a := findAlarm(t, out, "AWS/DynamoDB", metric, map[string]string{"TableName": "Table"})
		if a == nil {
			continue
		}
		var table any
		for _, m := range alarmMetrics(a) {
			if m["MetricName"] == metric {
				table = dims(m["Dimensions"])["TableName"]
			}
		}
		for single, want := range map[bool]string{true: "ref-Table", false: "authserver-grants"} {
			ev := out.NewEvaluator(map[string]string{"GlobalTableName": "authserver-grants"}).WithConditions(map[string]bool{"IsSingleRegion": single})
			if got, err := ev.Eval(table); err != nil || got != want {
				t.Errorf("%s with IsSingleRegion=%v: TableName %q (%v), want %q", name, single, got, err, want)
			}
		}
	}
}

// TestOperations_AlarmsNotifyTheTopic: every alarm notifies the stack's topic, or the existing
// topic given (then the stack creates none), on alarm and on recovery; the email subscription
// exists only with an address; only CloudWatch alarms of this account may publish.
func TestOperations_AlarmsNotifyTheTopic(t *testing.T) {
	out := samTransform(t)
	existing := "arn:aws:sns:eu-west-1:123456789012:bank-oncall"
	for _, tc := range []struct {
		params              map[string]string
		topic               string
		creates, subscribes bool
	}{
		{map[string]string{}, "ref-AlarmTopic", true, false},
		{map[string]string{"AlarmEmail": "oncall@bank.example"}, "ref-AlarmTopic", true, true},
		{map[string]string{"AlarmTopicArn": existing}, existing, false, false},
		{map[string]string{"AlarmTopicArn": existing, "AlarmEmail": "oncall@bank.example"}, existing, false, true},
	} {
		ev := out.NewEvaluator(tc.params)
		if bad := ev.CheckParameters(); len(bad) > 0 {
			t.Fatalf("%v refused: %v", tc.params, bad)
		}
		created := func(id string) bool {
			yes, err := ev.Creates(id)
			if err != nil {
				t.Fatal(err)
			}
			return yes
		}
		if created("AlarmTopic") != tc.creates || created("AlarmTopicPolicy") != tc.creates {
			t.Errorf("%v: AlarmTopic created = %v, want %v", tc.params, created("AlarmTopic"), tc.creates)
		}
		if created("AlarmEmailSubscription") != tc.subscribes {
			t.Errorf("%v: email subscription created = %v, want %v", tc.params, created("AlarmEmailSubscription"), tc.subscribes)
		} else if tc.subscribes {
			if got, _ := ev.Eval(cfn.Path(out.Resources["AlarmEmailSubscription"], "Properties", "TopicArn")); got != tc.topic {
				t.Errorf("%v: the email subscribes to %q, want %q", tc.params, got, tc.topic)
			}
		}
		for id, a := range alarmsOf(out) {
			for _, key := range []string{"AlarmActions", "OKActions"} {
				actions := cfn.AsSlice(cfn.Path(a, "Properties", key))
				if len(actions) != 1 {
					t.Errorf("%s: %s = %v, want the alarm topic", id, key, actions)
					continue
				}
				if got, err := ev.Eval(actions[0]); err != nil || got != tc.topic {
					t.Errorf("%v: %s notifies %q (%v), want %q", tc.params, id, got, err, tc.topic)
				}
			}
		}
	}
	for _, bad := range []map[string]string{{"AlarmEmail": "not-an-address"}, {"AlarmTopicArn": "oncall"}} {
		if len(out.NewEvaluator(bad).CheckParameters()) == 0 {
			t.Errorf("%v accepted", bad)
		}
	}
	stmts := cfn.AsSlice(cfn.Path(out.Resources["AlarmTopicPolicy"], "Properties", "PolicyDocument", "Statement"))
	if len(stmts) != 1 || cfn.Path(stmts[0], "Principal", "Service") != "cloudwatch.amazonaws.com" ||
		cfn.AsMap(stmts[0])["Action"] != "sns:Publish" || cfn.Path(stmts[0], "Condition", "ArnLike", "aws:SourceArn") == nil {
		t.Errorf("AlarmTopicPolicy statements %v, want sns:Publish for this account's CloudWatch alarms only", stmts)
	}
}

// TestOperations_MetricFiltersCountWhatTheCodeLogs: each metric filter's pattern matches what
// the code writes, so its alarm can fire: the audit records of failed sign-ins, the token
// function's error when the registry has no current key, the text of a KMS call throttled
// (from the real KMS client, against a server that throttles every call), and the access
// log's fields.
func TestOperations_MetricFiltersCountWhatTheCodeLogs(t *testing.T) {
	out := samTransform(t)
	filters := map[string]map[string]any{}
	for id, r := range out.Resources {
		if r["Type"] == "AWS::Logs::MetricFilter" {
			filters[id] = cfn.AsMap(r["Properties"])
		}
	}
	pattern := func(id string) string {
		s, _ := filters[id]["FilterPattern"].(string)
		if s == "" {
			t.Fatalf("no metric filter %s", id)
		}
		return s
	}
	// Every filter's metric is read by an alarm.
	for id, f := range filters {
		tr := cfn.AsMap(cfn.AsSlice(f["MetricTransformations"])[0])
		read := false
		for _, a := range alarmsOf(out) {
			p := cfn.AsMap(a["Properties"])
			read = read || (p["MetricName"] == tr["MetricName"] && reflect.DeepEqual(p["Namespace"], tr["MetricNamespace"]))
		}
		if !read {
			t.Errorf("metric filter %s: no alarm reads %v", id, tr["MetricName"])
		}
	}

	// Failed sign-ins: the audit record's "log" and "event", as the audit logger writes them.
	var buf bytes.Buffer
	oauth.WriteAudit(context.Background(), boot.NewAuditLogger(&buf), "login_failed", &oauth.Grant{UID: "u1"})
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	login := pattern("LoginFailuresMetricFilter")
	if !strings.Contains(login, fmt.Sprintf(`$.log = "%s"`, line["log"])) || !strings.Contains(login, fmt.Sprintf(`$.event = "%s"`, line["event"])) {
		t.Errorf("LoginFailuresMetricFilter %s does not match the audit line %s", login, buf.String())
	}
	authn, err := os.ReadFile(filepath.Join(rootDir(t), "shared", "authn", "login.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`\$\.event = "(\w+)"`).FindAllStringSubmatch(login, -1) {
		if !bytes.Contains(authn, []byte(`auditLogin(ctx, "`+m[1]+`"`)) {
			t.Errorf("LoginFailuresMetricFilter counts %s, which shared/authn does not write", m[1])
		}
	}

	// No current key: the error the signer returns (and the token function logs as the cause).
	noKey := pattern("NoCurrentKeyMetricFilter")
	if term := strings.Trim(noKey, `"`); !strings.Contains(keys.ErrNoCurrentKey.Error(), term) {
		t.Errorf("NoCurrentKeyMetricFilter %s does not match %q", noKey, keys.ErrNoCurrentKey)
	}

	// KMS throttled: the real client, retries and all, against a KMS that throttles.
	kmsSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"__type":"ThrottlingException","message":"Rate exceeded"}`)
	}))
	defer kmsSrv.Close()
	client, err := kmskey.NewClient(context.Background(), kmsSrv.URL, awsconfig.WithRegion("eu-west-1"),
		awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("local", "local", "")))
	if err != nil {
		t.Fatal(err)
	}
	_, signErr := kmskey.New(client, kmskey.Options{}).Sign(context.Background(), "arn:aws:kms:eu-west-1:123456789012:key/k", keys.RS256, make([]byte, 32))
	if signErr == nil || !errors.Is(signErr, oauth.ErrTransient) {
		t.Fatalf("Sign against a throttling KMS: %v, want a transient error", signErr)
	}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Error("request failed", slog.Any("cause", signErr))
	for _, id := range []string{"KmsThrottledTokenMetricFilter", "KmsThrottledRotationMetricFilter"} {
		for _, term := range regexp.MustCompile(`"([^"]+)"`).FindAllStringSubmatch(pattern(id), -1) {
			if !strings.Contains(logged.String(), term[1]) {
				t.Errorf("%s: term %q is not in the logged error %s", id, term[1], logged.String())
			}
		}
	}
	for id, group := range map[string]string{"KmsThrottledTokenMetricFilter": "TokenLogGroup", "KmsThrottledRotationMetricFilter": "RotateKeysLogGroup",
		"NoCurrentKeyMetricFilter": "TokenLogGroup", "LoginFailuresMetricFilter": "AuthorizeLogGroup", "TokenThrottledMetricFilter": "AccessLogGroup"} {
		if !cfn.Refs(filters[id]["LogGroupName"], group) {
			t.Errorf("%s reads %v, want %s", id, filters[id]["LogGroupName"], group)
		}
	}

	// Token throttled: the access log's routeKey and status fields.
	format := fmt.Sprint(cfn.Path(load(t).Resources["HttpApi"], "Properties", "AccessLogSettings", "Format"))
	for _, m := range regexp.MustCompile(`\$\.(\w+) =`).FindAllStringSubmatch(pattern("TokenThrottledMetricFilter"), -1) {
		if !strings.Contains(format, `"`+m[1]+`":"$context.`) {
			t.Errorf("TokenThrottledMetricFilter reads %s, which the access log does not write", m[1])
		}
	}
}

// TestOperations_ScheduledRotationFailuresGoToAQueueWithAnAlarm: a failed asynchronous run of
// the rotation is retried twice, then lands in an encrypted SQS queue the rotation role may
// only send to; an alarm watches the queue.
func TestOperations_ScheduledRotationFailuresGoToAQueueWithAnAlarm(t *testing.T) {
	out := samTransform(t)
	cfg := cfn.AsMap(out.Resources["RotateKeysFunctionEventInvokeConfig"]["Properties"])
	if !cfn.Refs(cfg["FunctionName"], "RotateKeysFunction") || fmt.Sprint(cfg["MaximumRetryAttempts"]) != "2" ||
		!cfn.Refs(cfn.Path(cfg, "DestinationConfig", "OnFailure", "Destination"), "RotationFailureQueue") {
		t.Errorf("RotateKeysFunction's EventInvokeConfig = %v, want 2 retries then RotationFailureQueue", cfg)
	}
	q := cfn.AsMap(out.Resources["RotationFailureQueue"]["Properties"])
	if q["SqsManagedSseEnabled"] != true {
		t.Errorf("RotationFailureQueue is not encrypted: %v", q)
	}
	var sqs []any
	for _, p := range cfn.AsSlice(cfn.Path(out.Resources["RotateKeysFunctionRole"], "Properties", "Policies")) {
		for _, s := range cfn.AsSlice(cfn.Path(p, "PolicyDocument", "Statement")) {
			if strings.Contains(fmt.Sprint(cfn.AsMap(s)["Action"]), "sqs:") {
				sqs = append(sqs, s)
			}
		}
	}
	if len(sqs) != 1 || cfn.AsMap(sqs[0])["Action"] != "sqs:SendMessage" || !cfn.Refs(cfn.AsMap(sqs[0])["Resource"], "RotationFailureQueue") {
		t.Errorf("the rotation role's SQS statements %v, want sqs:SendMessage on RotationFailureQueue only", sqs)
	}
	for id, fn := range out.Resources {
		if id == "RotateKeysFunctionRole" || fn["Type"] != "AWS::IAM::Role" {
			continue
		}
		if cfn.Refs(fn, "RotationFailureQueue") {
			t.Errorf("%s may use the rotation's failure queue", id)
		}
	}
	if _, a := findAlarm(t, out, "AWS/SQS", "ApproximateNumberOfMessagesVisible", map[string]string{"QueueName": "RotationFailureQueue"}); a == nil {
		t.Error("no alarm on the rotation's failure queue")
	}
}

// TestOperations_ReservedConcurrencyPerFunction: with ReserveConcurrency on, every function
// has its own reservation (the parameter's), the rotation exactly 1, so the authorize
// function cannot take the token function's or the authorizer's; off, none has any (an
// account with a small concurrency quota). The total the parameter's description states is
// the sum of the defaults.
func TestOperations_ReservedConcurrencyPerFunction(t *testing.T) {
	out := samTransform(t)
	total := 0
	for on, cond := range map[bool]bool{true: true, false: false} {
		ev := out.NewEvaluator(nil).WithConditions(map[string]bool{"ReservesConcurrency": cond})
		for id := range load(t).GoFunctions() {
			v, err := ev.Eval(cfn.Path(out.Resources[id], "Properties", "ReservedConcurrentExecutions"))
			if !on {
				if !errors.Is(err, cfn.ErrNoValue) {
					t.Errorf("%s: ReservedConcurrentExecutions %q (%v) with ReserveConcurrency=Disabled, want none", id, v, err)
				}
				continue
			}
			want := "1"
			if id != "RotateKeysFunction" {
				param := baseName(id) + "Concurrency"
				if !cfn.Refs(cfn.Path(out.Resources[id], "Properties", "ReservedConcurrentExecutions"), param) {
					t.Errorf("%s: reserved concurrency does not follow %s", id, param)
				}
				want = fmt.Sprint(out.Parameters[param]["Default"])
			}
			if err != nil || v != want {
				t.Errorf("%s: ReservedConcurrentExecutions %q (%v), want %s", id, v, err, want)
			}
			n, _ := strconv.Atoi(v)
			total += n
		}
	}
	desc := fmt.Sprint(out.Parameters["ReserveConcurrency"]["Description"])
	if !strings.Contains(desc, fmt.Sprintf("total %d", total)) || !strings.Contains(desc, fmt.Sprintf("below %d", total+100)) {
		t.Errorf("ReserveConcurrency's description %q, want the defaults' total %d and the quota it needs %d", desc, total, total+100)
	}
}

// TestOperations_ServingFunctionsRollOutThroughTheirAlias: each request-serving function is
// published as alias live, every route and the authorizer invoke that alias (and API Gateway
// may invoke only it), and CodeDeploy shifts it by DeploymentStrategy with the function's
// errors alarm as the rollback trigger.
func TestOperations_ServingFunctionsRollOutThroughTheirAlias(t *testing.T) {
	out := samTransform(t)
	body := cfn.AsMap(cfn.Path(out.Resources["HttpApi"], "Properties", "Body"))
	uris := map[string]string{} // "METHOD /path" -> integration uri, as JSON
	for path, ops := range cfn.AsMap(body["paths"]) {
		for method, op := range cfn.AsMap(ops) {
			uri, _ := json.Marshal(cfn.Path(op, "x-amazon-apigateway-integration", "uri"))
			uris[strings.ToUpper(method)+" "+path] = string(uri)
		}
	}
	for route, fn := range lambdaRoutes {
		if !strings.Contains(uris[route], "${"+fn+"Aliaslive}") {
			t.Errorf("route %s invokes %s, want %s's alias live", route, uris[route], fn)
		}
	}
	auth, _ := json.Marshal(cfn.Path(body, "components", "securitySchemes", "BearerAuthorizer", "x-amazon-apigateway-authorizer", "authorizerUri"))
	if !strings.Contains(string(auth), `"Ref":"AuthorizerFunctionAliaslive"`) {
		t.Errorf("the authorizer's uri %s, want AuthorizerFunction's alias live", auth)
	}
	for id, r := range out.Resources {
		if r["Type"] == "AWS::Lambda::Permission" && cfn.Path(r, "Properties", "Principal") == "apigateway.amazonaws.com" {
			name := cfn.AsMap(cfn.Path(r, "Properties", "FunctionName"))["Ref"]
			if s, _ := name.(string); !strings.HasSuffix(s, "Aliaslive") {
				t.Errorf("%s lets API Gateway invoke %v, not an alias", id, name)
			}
		}
	}
	strategies := cfn.AsSlice(out.Parameters["DeploymentStrategy"]["AllowedValues"])
	for _, fn := range servingFunctions {
		alias := out.Resources[fn+"Aliaslive"]
		if alias["Type"] != "AWS::Lambda::Alias" || !cfn.Refs(cfn.Path(alias, "UpdatePolicy", "CodeDeployLambdaAliasUpdate"), fn+"DeploymentGroup") {
			t.Errorf("%s: alias live %v, want one CodeDeploy updates", fn, alias)
			continue
		}
		g := cfn.AsMap(out.Resources[fn+"DeploymentGroup"]["Properties"])
		var alarms []string
		for _, a := range cfn.AsSlice(cfn.Path(g, "AlarmConfiguration", "Alarms")) {
			alarms = append(alarms, fmt.Sprint(cfn.AsMap(cfn.AsMap(a)["Name"])["Ref"]))
		}
		if !slices.Equal(alarms, []string{baseName(fn) + "ErrorsAlarm"}) || cfn.Path(g, "AlarmConfiguration", "Enabled") != true {
			t.Errorf("%s: deployment alarms %v, want its errors alarm", fn, alarms)
		}
		if !slices.Contains(cfn.Strs(cfn.Path(g, "AutoRollbackConfiguration", "Events")), "DEPLOYMENT_STOP_ON_ALARM") {
			t.Errorf("%s: no rollback on alarm: %v", fn, cfn.Path(g, "AutoRollbackConfiguration"))
		}
		// The transform resolved the parameter to its default (no values given): the config
		// name must be one CodeDeploy has for every allowed value.
		cfg := cfn.AsSlice(cfn.Path(g, "DeploymentConfigName", "Fn::Sub"))
		if len(cfg) != 2 || cfg[0] != "CodeDeployDefault.Lambda${ConfigName}" || !slices.Contains(strategies, cfn.AsMap(cfg[1])["ConfigName"]) {
			t.Errorf("%s: DeploymentConfigName %v, want CodeDeployDefault.Lambda<DeploymentStrategy>", fn, cfg)
		}
	}
	if _, ok := out.Resources["RotateKeysFunctionAliaslive"]; ok {
		t.Error("the rotation has an alias: the InitialKey custom resource and the schedule would run $LATEST beside it")
	}
}

// subJSON evaluates a Fn::Sub of the list form whose template holds ${Resource.Attribute}
// references, which the evaluator leaves alone: they become "getatt-Resource.Attribute".
func subJSON(t *testing.T, ev *cfn.Evaluator, sub any) string {
	t.Helper()
	a := cfn.AsSlice(cfn.AsMap(sub)["Fn::Sub"])
	if len(a) != 2 {
		t.Fatalf("not a Fn::Sub [template, vars]: %v", sub)
	}
	s := regexp.MustCompile(`\$\{(\w+)\.(\w+)\}`).ReplaceAllString(a[0].(string), "getatt-$1.$2")
	v, err := ev.Eval(map[string]any{"Fn::Sub": []any{s, a[1]}})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestOperations_DashboardShowsTheMainMetrics: the dashboard is valid JSON once CloudFormation
// has substituted it, in either table mode, and shows every function's invocations, errors,
// throttles, concurrency and duration, the token and authorize routes' latency, the table,
// the metric filters' metrics and the rotation's failure queue.
func TestOperations_DashboardShowsTheMainMetrics(t *testing.T) {
	out := samTransform(t)
	var customMetrics []string
	for _, r := range out.Resources {
		if r["Type"] == "AWS::Logs::MetricFilter" {
			customMetrics = append(customMetrics, fmt.Sprint(cfn.Path(cfn.AsSlice(cfn.Path(r, "Properties", "MetricTransformations"))[0], "MetricName")))
		}
	}
	// Dashboards are global to the account: the two stacks of a region pair, which may share
	// a name, need two.
	names := map[string]bool{}
	for _, region := range []string{"eu-west-1", "eu-central-1"} {
		name, err := out.NewEvaluator(multiRegion(region)).Eval(cfn.Path(out.Resources["Dashboard"], "Properties", "DashboardName"))
		if err != nil {
			t.Fatal(err)
		}
		names[name] = true
	}
	if len(names) != 2 {
		t.Errorf("the stacks of both regions name their dashboard %v", names)
	}
	for single, table := range map[bool]string{true: "ref-Table", false: "authserver-grants"} {
		ev := out.NewEvaluator(map[string]string{"GlobalTableName": "authserver-grants"}).WithConditions(map[string]bool{"IsSingleRegion": single})
		var body struct {
			Widgets []struct {
				Properties struct {
					Metrics [][]any `json:"metrics"`
				} `json:"properties"`
			} `json:"widgets"`
		}
		if err := json.Unmarshal([]byte(subJSON(t, ev, cfn.Path(out.Resources["Dashboard"], "Properties", "DashboardBody"))), &body); err != nil {
			t.Fatalf("IsSingleRegion=%v: the dashboard body is not JSON: %v", single, err)
		}
		shown := map[string]bool{} // "namespace metric dim=value ..."
		for _, w := range body.Widgets {
			for _, m := range w.Properties.Metrics {
				var parts []string
				for _, p := range m {
					if s, ok := p.(string); ok {
						parts = append(parts, s)
					}
				}
				shown[strings.Join(parts, " ")] = true
			}
		}
		var want []string
		for id := range load(t).GoFunctions() {
			for _, m := range []string{"Invocations", "Errors", "Throttles", "ConcurrentExecutions", "Duration"} {
				want = append(want, "AWS/Lambda "+m+" FunctionName ref-"+id)
			}
		}
		for _, r := range []string{"POST /v2/authentication/oauth2/token", "GET /v2/authentication/oauth2/authorize", "POST /v2/authentication/oauth2/authorize"} {
			method, path, _ := strings.Cut(r, " ")
			want = append(want, "AWS/ApiGateway Latency ApiId ref-HttpApi Stage $default Method "+method+" Resource "+path)
		}
		for _, m := range []string{"ReadThrottleEvents", "WriteThrottleEvents", "ConsumedWriteCapacityUnits"} {
			want = append(want, "AWS/DynamoDB "+m+" TableName "+table)
		}
		for _, m := range customMetrics {
			want = append(want, "authserver/authserver-test "+m)
		}
		want = append(want, "AWS/SQS ApproximateNumberOfMessagesVisible QueueName getatt-RotationFailureQueue.QueueName")
		for _, w := range want {
			if !shown[w] {
				t.Errorf("IsSingleRegion=%v: the dashboard does not show %s", single, w)
			}
		}
	}
}

// TestOperations_DeployDocListsExactlyTheTemplatesAlarms: the alarms docs/deploy.md section 4
// names are the template's alarms, no more and no fewer.
func TestOperations_DeployDocListsExactlyTheTemplatesAlarms(t *testing.T) {
	out := samTransform(t)
	doc := readDoc(t, "deploy.md")
	start, end := strings.Index(doc, "## 4. Observe"), strings.Index(doc, "## 5. ")
	if start < 0 || end < start {
		t.Fatal("docs/deploy.md has no section 4 (Observe) before section 5")
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`(\\w+Alarm)`").FindAllStringSubmatch(doc[start:end], -1) {
		if !strings.HasPrefix(m[1], "Test") { // a test's name, such as …WithAnAlarm
			documented[m[1]] = true
		}
	}
	inTemplate := alarmsOf(out)
	if len(inTemplate) == 0 {
		t.Fatal("the template has no alarms")
	}
	var missing, extra []string
	for id := range inTemplate {
		if !documented[id] {
			missing = append(missing, id)
		}
	}
	for id := range documented {
		if _, ok := inTemplate[id]; !ok {
			extra = append(extra, id)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 {
		t.Errorf("alarms of the template docs/deploy.md does not list: %v", missing)
	}
	if len(extra) > 0 {
		t.Errorf("alarms docs/deploy.md lists that the template does not have: %v", extra)
	}
}

// operationsParameters are the parameters of the operations block, whose defaults the
// parameters table of docs/deploy.md states.
var operationsParameters = []string{"AlarmTopicArn", "AlarmEmail", "FunctionErrorsThreshold", "FunctionThrottlesThreshold",
	"TokenLatencyP99Ms", "AuthorizeLatencyP99Ms", "Token5xxPercent", "TokenThrottledThreshold", "LoginFailuresThreshold",
	"DynamoDBThrottleThreshold", "KmsThrottleThreshold", "ReserveConcurrency", "DeploymentStrategy",
	"InvalidClientRefusalsThreshold", "CloudTrailLogGroupName"}

// TestOperations_DeployDocParameterDefaultsAreTheTemplates: each row of docs/deploy.md's
// parameters table that names operations parameters gives, in order, their template defaults
// ("(none)" for an empty one), and the concurrency defaults it lists are the template's.
func TestOperations_DeployDocParameterDefaultsAreTheTemplates(t *testing.T) {
	tpl := load(t)
	doc := readDoc(t, "deploy.md")
	seen := map[string]bool{}
	for _, line := range strings.Split(doc, "\n") {
		cells := strings.Split(line, " | ")
		if len(cells) < 3 || !strings.HasPrefix(line, "| `") {
			continue
		}
		var names []string
		for _, m := range regexp.MustCompile("`(\\w+)`").FindAllStringSubmatch(cells[0], -1) {
			names = append(names, m[1])
		}
		if len(names) == 0 || !slices.Contains(operationsParameters, names[0]) {
			continue
		}
		defaults := strings.Split(strings.ReplaceAll(cells[1], " / ", ", "), ", ")
		if cells[1] == "(none)" {
			defaults = slices.Repeat([]string{"(none)"}, len(names))
		}
		if len(defaults) != len(names) {
			t.Errorf("deploy.md: %d parameters %v but %d defaults %q", len(names), names, len(defaults), cells[1])
			continue
		}
		for i, name := range names {
			want := fmt.Sprint(tpl.Parameters[name]["Default"])
			if want == "" {
				want = "(none)"
			}
			if defaults[i] != want {
				t.Errorf("deploy.md: %s defaults to %q, the template to %q", name, defaults[i], want)
			}
			seen[name] = true
		}
		if names[0] == "ReserveConcurrency" {
			for _, m := range regexp.MustCompile("((?:`\\w+Concurrency`(?:, )?)+) (\\d+)").FindAllStringSubmatch(cells[2], -1) {
				for _, c := range regexp.MustCompile("`(\\w+)`").FindAllStringSubmatch(m[1], -1) {
					seen[c[1]] = true
					if got := fmt.Sprint(tpl.Parameters[c[1]]["Default"]); got != m[2] {
						t.Errorf("deploy.md: %s defaults to %s, the template to %s", c[1], m[2], got)
					}
				}
			}
		}
	}
	for name := range tpl.Parameters {
		if (slices.Contains(operationsParameters, name) || strings.HasSuffix(name, "Concurrency")) && !seen[name] {
			t.Errorf("docs/deploy.md's parameters table does not give %s's default", name)
		}
	}
}
