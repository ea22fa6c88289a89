package template_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/acmebank/authserver/test/template/cfn"
)

// TestHealth_TheHealthAPIServesOneThrottledRouteToTheHealthFunction: the health API (the
// region's own execute-api host, which Route 53 calls) serves GET /readyz and nothing else, so
// it opens no way around the connect host's mutual TLS; the route is throttled at 10 requests
// a second, burst 20, before any Lambda runs; it invokes the health function's alias; and the
// health function may only write and read its own item (HEALTH#ready#...).
func TestHealth_TheHealthAPIServesOneThrottledRouteToTheHealthFunction(t *testing.T) {
	out := samTransform(t)
	paths := cfn.AsMap(cfn.Path(out.Resources["HealthApi"], "Properties", "Body", "paths"))
	var routes []string
	for p, ops := range paths {
		for m, op := range cfn.AsMap(ops) {
			routes = append(routes, m+" "+p)
			if uri := cfn.Path(op, "x-amazon-apigateway-integration", "uri"); !slices.Contains(cfn.References(uri), "HealthFunctionAliaslive") {
				t.Errorf("%s %s invokes %v, want HealthFunction's alias live", m, p, uri)
			}
		}
	}
	if !slices.Equal(routes, []string{"get /readyz"}) {
		t.Errorf("the health API serves %v, want GET /readyz only", routes)
	}
	stage := cfn.AsMap(cfn.Path(out.Resources["HealthApiApiGatewayDefaultStage"], "Properties", "DefaultRouteSettings"))
	if fmt.Sprint(stage["ThrottlingRateLimit"]) != "10" || fmt.Sprint(stage["ThrottlingBurstLimit"]) != "20" {
		t.Errorf("the health API's throttle is %v, want 10 a second, burst 20", stage)
	}
	tpl := load(t)
	stmts, err := tpl.Statements(tpl.Resources["HealthFunction"])
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stmts {
		got := slices.Sorted(slices.Values(s.Actions))
		if !slices.Equal(got, []string{"dynamodb:GetItem", "dynamodb:PutItem"}) || !slices.Equal(s.LeadingKeys(), []string{"HEALTH#ready#*"}) {
			t.Errorf("%s allows %v on %v, want GetItem and PutItem on HEALTH#ready#* only", s.Sid, got, s.LeadingKeys())
		}
	}
	if len(stmts) != 1 {
		t.Errorf("the health function has %d policy statements, want its one item's", len(stmts))
	}
}

// TestAccessLogs_EveryHTTPAPIStageWritesTheAccessLog: every stage of every HTTP API of the
// transformed template (the bank and OAuth API and the health API) writes its access log to
// the stack's access log group, so no route is served unlogged.
func TestAccessLogs_EveryHTTPAPIStageWritesTheAccessLog(t *testing.T) {
	out := samTransform(t)
	ev := out.NewEvaluator(nil)
	stages := 0
	for name, r := range out.Resources {
		if r["Type"] != "AWS::ApiGatewayV2::Stage" {
			continue
		}
		stages++
		dest := cfn.Path(r["Properties"], "AccessLogSettings", "DestinationArn")
		if !slices.Contains(cfn.References(dest), "AccessLogGroup") {
			t.Errorf("the stage %s writes its access log to %v, want AccessLogGroup", name, dest)
		}
		if format, err := ev.Eval(cfn.Path(r["Properties"], "AccessLogSettings", "Format")); err != nil || !strings.Contains(format, "$context.domainName") {
			t.Errorf("the stage %s's access log format does not name the host ($context.domainName)", name)
		}
	}
	if stages < 2 {
		t.Errorf("the transformed template has %d HTTP API stages, want the API's and the health API's", stages)
	}
}
