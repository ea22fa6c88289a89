package template_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/logout"
	"github.com/acmebank/authserver/test/template/cfn"
)

// durationParams are the parameters the functions parse as durations (shared/config's syntax:
// Go durations plus a day suffix).
var durationParams = []string{"AccessTokenTtl", "RefreshTokenTtl", "GrantTtl", "CodeTtl", "IdTokenTtl", "JwksMaxAge", "KeyCacheTtl", "RotationPeriod"}

// refusedParam reports whether CloudFormation refuses value for the parameter name (its
// AllowedPattern or AllowedValues), with the rest of params as given.
func refusedParam(tpl *cfn.Template, params map[string]string, name, value string) bool {
	p := map[string]string{}
	for k, v := range params {
		p[k] = v
	}
	p[name] = value
	return slices.ContainsFunc(tpl.NewEvaluator(p).CheckParameters(), func(s string) bool { return strings.HasPrefix(s, name+"=") })
}

// TestParameters_TyposAreRefusedBeforeAnythingIsCreated: a mistyped duration, schedule, URL,
// domain, ARN or date is refused by the parameter's AllowedPattern, which CloudFormation checks
// before it creates or changes anything; before, such a value deployed, and every function (or
// the rotation's schedule) then failed at start.
func TestParameters_TyposAreRefusedBeforeAnythingIsCreated(t *testing.T) {
	tpl := load(t)
	base := map[string]string{"BaseUrl": "https://auth.bank.example"}
	durations := struct{ good, bad []string }{
		good: []string{"1h", "30d", "90d", "2m", "15m", "90s", "1h30m", "2h0m30s", "5m30s", "365d"},
		bad:  []string{"", "1hr", "1 h", "30 d", "30D", "30days", "1y", "h", "0s", "0d", "-1h", "+1h", "1.5h", "500ms", " 1h", "1h ", "1d12h", "1m1h"},
	}
	for _, tc := range []struct {
		params    []string
		good, bad []string
	}{
		{slices.DeleteFunc(slices.Clone(durationParams), func(p string) bool { return p == "KeyCacheTtl" }), durations.good, durations.bad},
		{[]string{"KeyCacheTtl"}, nil, durations.bad},
		{[]string{"KeyCacheTtl"}, []string{"1s", "30s", "900s", "1m", "5m", "14m59s", "15m"},
			[]string{"16m", "901s", "15m1s", "1h", "1d", "0s", "1m60s"}},
		{[]string{"RotationSchedule"}, []string{"rate(1 hour)", "rate(1 minute)", "rate(1 day)", "rate(30 minutes)", "rate(2 hours)", "rate(10 days)",
			"cron(0 * * * ? *)", "cron(15 10 ? * MON-FRI *)", "cron(0/30 8-17 * * ? *)"},
			[]string{"", "1h", "rate(1 hours)", "rate(5 minute)", "rate(0 minutes)", "rate(1hour)", "rate(1 h)", "rate(01 hour)",
				"cron(0 * * * *)", "cron(0 * * * ? * *)", "cron (0 * * * ? *)", "rate(1 hour) "}},
		{[]string{"BaseUrl", "Issuer"}, []string{"", "https://auth.bank.example", "https://auth.bank.example:8443"},
			[]string{"http://auth.bank.example", "https://auth.bank.example/", "auth.bank.example", "https://", "https://auth bank.example", "https://auth.bank.example?x"}},
		{[]string{"Issuer"}, []string{"https://auth.bank.example/v2/authentication/oauth2", "https://id.bank.example/oidc"},
			[]string{"https://auth.bank.example/v2/authentication/oauth2/", "https:///oidc"}},
		{[]string{"BackendUrl"}, []string{"https://api.bank.example", "https://10.0.0.5:8443"},
			[]string{"", "http://api.bank.example", "https://api.bank.example/", "https://api.bank.example/v2", "api.bank.example", "https://api.bank.example "}},
		{[]string{"CustomDomainName", "PublicDomainName"}, []string{"", "auth.bank.example", "connect.bank.example", "a-1.b.example"},
			[]string{"https://auth.bank.example", "auth.bank.example/", "auth", "Auth.Bank.Example", "-a.bank.example", "auth..bank.example", "auth.bank.example."}},
		{[]string{"CertificateArn", "PublicCertificateArn"}, []string{"", testCert, "arn:aws-us-gov:acm:us-gov-west-1:123456789012:certificate/0d7b0c0e-1111-2222-3333-444455556666"},
			[]string{"0d7b0c0e-1111-2222-3333-444455556666", "arn:aws:acm:eu-west-1:12345678901:certificate/0d7b0c0e-1111-2222-3333-444455556666",
				"arn:aws:iam::123456789012:server-certificate/x"}},
		{[]string{"PrimaryWrapKeyArn"}, []string{"", "arn:aws:kms:eu-west-1:123456789012:key/mrk-1234abcd12ab34cd56ef1234567890ab"},
			[]string{"arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab", "mrk-1234abcd12ab34cd56ef1234567890ab",
				"arn:aws:kms:eu-west-1:123456789012:alias/wrap"}},
		{[]string{"BackendListenerArn"}, []string{"", testListener,
			"arn:aws:elasticloadbalancing:eu-west-1:123456789012:listener/net/bank-nlb/50dc6c495c0c9188/f2f7dc8efc522ab2",
			"arn:aws:servicediscovery:eu-west-1:123456789012:service/srv-e4anhexample0004"},
			[]string{"arn:aws:elasticloadbalancing:eu-west-1:123456789012:loadbalancer/app/bank-api-internal/50dc6c495c0c9188",
				"arn:aws:elasticloadbalancing:eu-west-1:123456789012:listener-rule/app/bank/50dc6c495c0c9188/f2f7dc8efc522ab2/9683b2d02a6cabee",
				"https://api.bank.example", "arn:aws:servicediscovery:eu-west-1:123456789012:namespace/ns-e4anhexample0004"}},
		{[]string{"BackendVpcSubnetIds"}, []string{"", "subnet-0a1b2c3d", testSubnets},
			[]string{"subnet-0a1b2c3d,", "subnet-0a1b2c3d, subnet-0f1e2d3c", "sg-0123456789abcdef0", "subnet-XYZ"}},
		{[]string{"BackendVpcSecurityGroupIds"}, []string{"", testSecurityGroups, "sg-0a1b2c3d,sg-0123456789abcdef0"},
			[]string{"sg-0123456789abcdef0,", "subnet-0a1b2c3d", "sg-"}},
		{[]string{"TableKmsKeyArn", "PeerTableKmsKeyArn", "LogsKmsKeyArn", "FunctionsKmsKeyArn"}, []string{"", testTableKey, testFunctionsKey,
			"arn:aws-us-gov:kms:us-gov-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"},
			[]string{"1234abcd-12ab-34cd-56ef-1234567890ab", "alias/authserver", "arn:aws:kms:eu-west-1:123456789012:alias/authserver",
				"arn:aws:kms:eu-west-1:123456789012:key/1234ABCD-12AB-34CD-56EF-1234567890AB", "arn:aws:kms:eu-west-1:12345678901:key/1234abcd-12ab-34cd-56ef-1234567890ab",
				"arn:aws:s3:::bucket", testTableKey + " "}},
		{[]string{"HostedZoneId"}, []string{"", "Z0123456789ABCDEFGHIJ"}, []string{"/hostedzone/Z0123456789ABCDEFGHIJ", "z0123", "Z 123"}},
		{[]string{"TruststoreUri"}, []string{"", "s3://truststore/ca.pem", "s3://bank-trust.store/certs/ca.pem"},
			[]string{"s3://truststore", "s3://truststore/", "https://truststore.s3.amazonaws.com/ca.pem", "s3://Trust/ca.pem"}},
		{[]string{"DeprecationSunset"}, []string{"", "Thu, 31 Dec 2026 23:59:59 GMT"},
			[]string{"2026-12-31", "Thu, 31 Dec 2026 23:59:59 UTC", "Thursday, 31-Dec-26 23:59:59 GMT", "@1798761599"}},
		{[]string{"IntrospectionClients"}, []string{"", "rs1", "rs1,rs2"}, []string{"rs1, rs2", "rs1,", ",rs1", "rs1,,rs2"}},
	} {
		for _, name := range tc.params {
			if _, ok := tpl.Parameters[name]; !ok {
				t.Fatalf("no parameter %s", name)
			}
			for _, v := range tc.good {
				if refusedParam(tpl, base, name, v) {
					t.Errorf("%s=%q is refused, want accepted", name, v)
				}
			}
			for _, v := range tc.bad {
				if !refusedParam(tpl, base, name, v) {
					t.Errorf("%s=%q is accepted, want refused at deploy", name, v)
				}
			}
		}
	}
}

// durationCorpus are strings around the duration syntax: numbers (zero, leading zeros,
// signs, fractions, large) with every unit Go knows and some it does not, and combinations.
func durationCorpus() []string {
	var out []string
	for _, n := range []string{"", "0", "1", "01", "9", "15", "90", "900", "901", "1.5", "-1", "+1", "99999", "999999", "9999999", "99999999"} {
		for _, u := range []string{"", "d", "h", "m", "s", "ms", "us", "ns", "D", "H", " h", "hr", "min", "days", "w", "y"} {
			out = append(out, n+u)
		}
	}
	return append(out, "1h30m", "2h0m30s", "1h1s", "14m59s", "15m1s", "1m60s", "1m0s", "1d12h", "1h1d", "1m1h", "1h 30m", " 1h", "1h ", "1h\n")
}

// TestParameters_EveryDurationTheTemplateAcceptsLoadsInEveryFunction is the oracle for the
// duration patterns: every value of the corpus a duration parameter's AllowedPattern accepts
// is accepted by the functions' configuration (shared/config, the code that reads it) in the
// environment the transformed template gives the token function, so a value CloudFormation
// lets through never stops the functions at start.
func TestParameters_EveryDurationTheTemplateAcceptsLoadsInEveryFunction(t *testing.T) {
	out := samTransform(t)
	base := map[string]string{"BaseUrl": "https://auth.bank.example"}
	// Every parameter a function's duration setting takes is one of durationParams.
	for k, v := range out.Env(out.Resources["TokenFunction"]) {
		refs := cfn.References(v)
		_, isParam := out.Parameters[strings.Join(refs, "")]
		if len(refs) == 1 && isParam && (strings.HasSuffix(k, "_TTL") || strings.HasSuffix(k, "_MAX_AGE") || strings.HasSuffix(k, "_PERIOD")) &&
			!slices.Contains(durationParams, refs[0]) {
			t.Errorf("%s takes the duration parameter %s, which durationParams does not list", k, refs[0])
		}
	}
	accepted := 0
	for _, name := range durationParams {
		for _, v := range durationCorpus() {
			if refusedParam(out, base, name, v) {
				continue
			}
			accepted++
			p := map[string]string{"BaseUrl": "https://auth.bank.example", name: v}
			ev := out.NewEvaluator(p)
			vals := map[string]string{}
			for k, raw := range out.Env(out.Resources["TokenFunction"]) {
				s, err := ev.Eval(raw)
				if err != nil {
					continue // values that are not parameters (the table's name, secrets) are not durations
				}
				vals[k] = s
			}
			if _, err := config.FromLookup(func(k string) (string, bool) { s, ok := vals[k]; return s, ok }); err != nil {
				t.Errorf("%s=%q passes the template's pattern, but the functions refuse it at start: %v", name, v, err)
			}
		}
	}
	t.Logf("%d of %d (parameter, corpus value) pairs accepted by a pattern, every one loaded", accepted, len(durationParams)*len(durationCorpus()))
	if accepted == 0 {
		t.Fatal("the patterns accepted no value of the corpus")
	}
}

// TestParameters_SamconfigEnvironmentsPassTheChecks: the parameter overrides samconfig.toml
// deploys each environment with pass the template's parameter checks and Rules (read with
// Python's tomllib, the parser of the machine's Python).
func TestParameters_SamconfigEnvironmentsPassTheChecks(t *testing.T) {
	tool(t, "python3 tomllib", "python3", "-c", "import tomllib")
	tpl := load(t)
	cmd := exec.Command("python3", "-c", "import json, sys, tomllib; json.dump(tomllib.load(open(sys.argv[1], 'rb')), sys.stdout)",
		filepath.Join(rootDir(t), "samconfig.toml"))
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("samconfig.toml: %v", err)
	}
	var envs map[string]any
	if err := json.Unmarshal(b, &envs); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for env, cmds := range envs {
		overrides := cfn.Strs(cfn.Path(cmds, "deploy", "parameters", "parameter_overrides"))
		if len(overrides) == 0 {
			continue
		}
		params := map[string]string{}
		for _, o := range overrides {
			k, v, ok := strings.Cut(o, "=")
			if _, known := tpl.Parameters[k]; !ok || !known {
				t.Errorf("%s: override %q names no parameter of the template", env, o)
			}
			params[k] = v
		}
		ev := tpl.NewEvaluator(params)
		if bad := ev.CheckParameters(); len(bad) > 0 {
			t.Errorf("%s: refused: %v", env, bad)
		}
		if failed, err := ev.FailedRules(); err != nil || len(failed) > 0 {
			t.Errorf("%s: rules fail: %v %v", env, failed, err)
		}
		checked++
	}
	if checked < 2 {
		t.Errorf("checked %d environments of samconfig.toml, want sandbox and production", checked)
	}
}

// TestParameters_HostedZoneWithoutADomainIsRefused: HostedZoneId alone creates nothing, so a
// rule refuses it.
func TestParameters_HostedZoneWithoutADomainIsRefused(t *testing.T) {
	tpl := load(t)
	failed, err := tpl.NewEvaluator(map[string]string{"BaseUrl": "https://auth.bank.example", "HostedZoneId": "Z0123456789ABCDEFGHIJ"}).FailedRules()
	if err != nil || !slices.ContainsFunc(failed, func(s string) bool { return strings.HasPrefix(s, "HostedZoneId") }) {
		t.Errorf("HostedZoneId without a domain: rules failed %v (%v), want the HostedZoneId rule", failed, err)
	}
	failed, err = tpl.NewEvaluator(map[string]string{"PublicDomainName": "auth.bank.example", "PublicCertificateArn": testPublicCert,
		"HostedZoneId": "Z0123456789ABCDEFGHIJ"}).FailedRules()
	if err != nil || len(failed) > 0 {
		t.Errorf("HostedZoneId with PublicDomainName: rules failed %v (%v)", failed, err)
	}
}

// TestInitialKey_StackFailsWithinFiveMinutesWhenTheRotationDoesNotAnswer: the custom
// resource's ServiceTimeout (in the transformed template) is at least the rotation function's
// timeout and at most 300 s, not CloudFormation's default hour.
func TestInitialKey_StackFailsWithinFiveMinutesWhenTheRotationDoesNotAnswer(t *testing.T) {
	out := samTransform(t)
	seconds := func(v any) float64 { f, _ := strconv.ParseFloat(fmt.Sprint(v), 64); return f }
	timeout := seconds(cfn.Path(out.Resources["InitialKey"], "Properties", "ServiceTimeout"))
	fnTimeout := seconds(cfn.Path(out.Resources["RotateKeysFunction"], "Properties", "Timeout"))
	if fnTimeout == 0 || timeout < fnTimeout || timeout > 300 {
		t.Errorf("InitialKey's ServiceTimeout = %v s (RotateKeysFunction's Timeout %v s), want between the function's timeout and 300 s",
			cfn.Path(out.Resources["InitialKey"], "Properties", "ServiceTimeout"), fnTimeout)
	}
}

// TestRules_ProductionIsServedOnCustomDomainsOnly: a production stack without the connect host
// (mutual TLS) is refused before anything is created; with it, the rules that complete it
// (certificate, truststore, public domain) apply, and the execute-api endpoint is disabled in
// what the SAM transform makes of the API (AWS::ApiGatewayV2::Api).
func TestRules_ProductionIsServedOnCustomDomainsOnly(t *testing.T) {
	tpl := samTransform(t)
	complete := map[string]string{"Environment": "production", "BaseUrl": "https://auth.bank.example",
		"CustomDomainName": "connect.bank.example", "PublicDomainName": "auth.bank.example", "CertificateArn": testCert,
		"TruststoreUri": "s3://truststore/ca.pem"}
	maps.Copy(complete, vpcLink()) // production's other rule (backend_test.go)
	for _, tc := range []struct {
		name    string
		drop    []string
		refused bool
	}{
		{"complete", nil, false},
		{"no connect host", []string{"CustomDomainName"}, true},
		{"no custom domain at all", []string{"CustomDomainName", "PublicDomainName", "CertificateArn", "TruststoreUri"}, true},
		{"no truststore", []string{"TruststoreUri"}, true},
	} {
		params := maps.Clone(complete)
		for _, k := range tc.drop {
			delete(params, k)
		}
		ev := tpl.NewEvaluator(params)
		failed, err := ev.FailedRules()
		if err != nil {
			t.Fatal(err)
		}
		if refused := len(failed) > 0 || len(ev.CheckParameters()) > 0; refused != tc.refused {
			t.Errorf("%s: refused %v (%v), want %v", tc.name, refused, failed, tc.refused)
		}
		if !tc.refused {
			r, err := ev.Render()
			if err != nil {
				t.Fatal(err)
			}
			api := r.Resources["HttpApi"]
			if api["Type"] != "AWS::ApiGatewayV2::Api" {
				t.Fatalf("the transformed HttpApi is a %v", api["Type"])
			}
			// SAM writes it into the API's OpenAPI body: servers[0]'s endpoint configuration.
			servers := cfn.AsSlice(cfn.Path(api, "Properties", "Body", "servers"))
			if len(servers) != 1 || cfn.Path(servers[0], "x-amazon-apigateway-endpoint-configuration", "disableExecuteApiEndpoint") != true {
				t.Errorf("%s: the transformed API's endpoint configuration is %v, want disableExecuteApiEndpoint true", tc.name, servers)
			}
		}
	}
	// A sandbox needs none of it.
	if failed, _ := tpl.NewEvaluator(map[string]string{"Environment": "sandbox", "BaseUrl": "https://auth.sandbox.bank.example"}).FailedRules(); len(failed) > 0 {
		t.Errorf("a sandbox without custom domains is refused: %v", failed)
	}
}

// TestAuthorizeFunction_TimeoutCoversTheBackchannelLogoutBound: the back-channel logout
// deliveries run in the customer's logout request on the authorize function (shared/logout),
// within logout.Bound; the function's timeout (after the SAM transform, the Globals' when it
// sets none) leaves at least as long again for the store and the signature, so a client that
// does not answer never times the customer's logout out.
func TestAuthorizeFunction_TimeoutCoversTheBackchannelLogoutBound(t *testing.T) {
	out := samTransform(t)
	seconds := func(v any) float64 { f, _ := strconv.ParseFloat(fmt.Sprint(v), 64); return f }
	fnTimeout := seconds(cfn.Path(out.Resources["AuthorizeFunction"], "Properties", "Timeout"))
	if bound := logout.Bound.Seconds(); fnTimeout < 2*bound {
		t.Errorf("AuthorizeFunction's Timeout = %v s, want at least twice logout.Bound (%v s)", fnTimeout, bound)
	}
}
