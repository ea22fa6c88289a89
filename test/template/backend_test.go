package template_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/acmebank/authserver/test/template/cfn"
)

// The private integration's parameters as a bank sets them (test values of the right shape).
const (
	testListener       = "arn:aws:elasticloadbalancing:eu-west-1:123456789012:listener/app/bank-api-internal/50dc6c495c0c9188/f2f7dc8efc522ab2"
	testSubnets        = "subnet-0a1b2c3d4e5f60718,subnet-0f1e2d3c4b5a69788"
	testSecurityGroups = "sg-0123456789abcdef0"
)

// vpcLink are the parameters of a deployment whose protected routes go through the VPC link.
func vpcLink() map[string]string {
	return map[string]string{"BackendListenerArn": testListener, "BackendVpcSubnetIds": testSubnets, "BackendVpcSecurityGroupIds": testSecurityGroups}
}

// TestBackend_BankRoutesGoThroughTheVpcLinkWhenAListenerIsSet reads the transformed template
// for every deployment: with BackendListenerArn set, the stack creates the VPC link in the
// given subnets and security groups, and every protected route's integration is a VPC_LINK
// connection through it to the listener, over TLS verified against BackendUrl's host name;
// without it, no link and every route calls BackendUrl over the internet.
func TestBackend_BankRoutesGoThroughTheVpcLinkWhenAListenerIsSet(t *testing.T) {
	out := samTransform(t)
	seen := map[bool]int{}
	for _, ev := range deployments(out) {
		linked, err := ev.Cond("UsesBackendVpcLink")
		if err != nil {
			t.Fatal(err)
		}
		seen[linked]++
		r, err := ev.Render()
		if err != nil {
			t.Fatalf("%s: %v", describe(ev), err)
		}
		p := ev.Params()
		link, created := r.Resources["BackendVpcLink"]
		if created != linked {
			t.Errorf("%s: BackendVpcLink created %v, want %v", describe(ev), created, linked)
		}
		if created {
			if link["Type"] != "AWS::ApiGatewayV2::VpcLink" {
				t.Errorf("BackendVpcLink is a %v", link["Type"])
			}
			for prop, param := range map[string]string{"SubnetIds": "BackendVpcSubnetIds", "SecurityGroupIds": "BackendVpcSecurityGroupIds"} {
				got, err := ev.EvalList(cfn.Path(link, "Properties", prop))
				if want := strings.Split(p[param], ","); err != nil || !slices.Equal(got, want) {
					t.Errorf("%s: BackendVpcLink %s = %v (%v), want %v", describe(ev), prop, got, err, want)
				}
			}
		}
		host := strings.Split(strings.TrimPrefix(p["BackendUrl"], "https://"), ":")[0]
		paths := cfn.AsMap(cfn.Path(r.Resources["HttpApi"], "Properties", "Body", "paths"))
		for route, backendPath := range protectedRoutes {
			method, path, _ := strings.Cut(route, " ")
			integ := cfn.AsMap(cfn.Path(paths[path], strings.ToLower(method), "x-amazon-apigateway-integration"))
			uri, err := ev.Eval(integ["uri"])
			if err != nil {
				t.Fatalf("%s: %s uri: %v", describe(ev), route, err)
			}
			if linked {
				tls, _ := ev.Eval(cfn.Path(integ, "tlsConfig", "serverNameToVerify"))
				if integ["connectionType"] != "VPC_LINK" || !cfn.Refs(integ["connectionId"], "BackendVpcLink") || uri != p["BackendListenerArn"] || tls != host {
					t.Errorf("%s: %s: connection %v %v to %s, TLS name %q: want VPC_LINK through BackendVpcLink to %s, TLS name %q",
						describe(ev), route, integ["connectionType"], integ["connectionId"], uri, tls, p["BackendListenerArn"], host)
				}
				// The listener ARN carries no path: the path mapping alone says where it goes.
				if cfn.Path(integ, "requestParameters", "overwrite:path") != backendPath {
					t.Errorf("%s: %s: overwrite:path %v, want %s", describe(ev), route, cfn.Path(integ, "requestParameters", "overwrite:path"), backendPath)
				}
				continue
			}
			_, hasID := integ["connectionId"]
			_, hasTLS := integ["tlsConfig"]
			if integ["connectionType"] != "INTERNET" || hasID || hasTLS || !strings.HasPrefix(uri, p["BackendUrl"]+"/") {
				t.Errorf("%s: %s: connection %v (id %v, tlsConfig %v) to %s: want INTERNET to %s",
					describe(ev), route, integ["connectionType"], hasID, hasTLS, uri, p["BackendUrl"])
			}
		}
	}
	if seen[true] == 0 || seen[false] == 0 {
		t.Errorf("deployments with and without the VPC link: %v, want both", seen)
	}
}

// TestRules_VpcLinkSettingsAreAllOrNothing: any one or two of the listener, subnets and
// security groups alone is refused before anything is created; all three or none pass.
func TestRules_VpcLinkSettingsAreAllOrNothing(t *testing.T) {
	tpl := load(t)
	all := vpcLink()
	names := slices.Sorted(maps.Keys(all))
	for mask := 0; mask < 1<<len(names); mask++ {
		params := map[string]string{"BaseUrl": "https://auth.bank.example"}
		var set []string
		for i, k := range names {
			if mask&(1<<i) != 0 {
				params[k] = all[k]
				set = append(set, k)
			}
		}
		ev := tpl.NewEvaluator(params)
		if bad := ev.CheckParameters(); len(bad) > 0 {
			t.Fatalf("%v: %v", set, bad)
		}
		failed, err := ev.FailedRules()
		if err != nil {
			t.Fatal(err)
		}
		want := len(set) != 0 && len(set) != len(names)
		if refused := len(failed) > 0; refused != want {
			t.Errorf("VPC link settings %v: refused %v (%v), want %v", set, refused, failed, want)
		}
	}
}

// TestRules_ProductionReachesTheBackendThroughTheVpcLinkOnly: a production stack without the
// VPC link is refused (on the internet anyone could send the backend X-Auth-* headers); with
// it, it passes; a sandbox may call BackendUrl over the internet.
func TestRules_ProductionReachesTheBackendThroughTheVpcLinkOnly(t *testing.T) {
	tpl := load(t)
	production := map[string]string{"Environment": "production", "BaseUrl": "https://auth.bank.example",
		"CustomDomainName": "connect.bank.example", "PublicDomainName": "auth.bank.example", "CertificateArn": testCert,
		"TruststoreUri": "s3://truststore/ca.pem"}
	failed, err := tpl.NewEvaluator(production).FailedRules()
	if err != nil || !slices.ContainsFunc(failed, func(s string) bool { return strings.Contains(s, "BackendListenerArn") }) {
		t.Errorf("production without the VPC link: rules failed %v (%v), want the BackendListenerArn rule", failed, err)
	}
	maps.Copy(production, vpcLink())
	if failed, err := tpl.NewEvaluator(production).FailedRules(); err != nil || len(failed) > 0 {
		t.Errorf("production with the VPC link: rules failed %v (%v)", failed, err)
	}
	if failed, err := tpl.NewEvaluator(map[string]string{"Environment": "sandbox", "BaseUrl": "https://auth.bank.example"}).FailedRules(); err != nil || len(failed) > 0 {
		t.Errorf("a sandbox on the internet: rules failed %v (%v)", failed, err)
	}
}
