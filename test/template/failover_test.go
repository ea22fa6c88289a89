package template_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/test/template/cfn"
)

// withHostedZone are the custom-domain parameters of a stack that creates its DNS records.
func withHostedZone(params map[string]string) map[string]string {
	p := maps.Clone(params)
	maps.Copy(p, map[string]string{"PublicDomainName": "auth.bank.example", "PublicCertificateArn": testPublicCert,
		"CustomDomainName": "connect.bank.example", "CertificateArn": testCert, "TruststoreUri": "s3://truststore/ca.pem",
		"HostedZoneId": "Z0123456789ABCDEFGHIJ"})
	delete(p, "BaseUrl")
	return p
}

// render renders the transformed template for params, which the rules must accept.
func render(t *testing.T, out *cfn.Template, params map[string]string) (*cfn.Evaluator, *cfn.Rendered) {
	t.Helper()
	ev := out.NewEvaluator(params)
	if failed, err := ev.FailedRules(); err != nil || len(failed) > 0 || len(ev.CheckParameters()) > 0 {
		t.Fatalf("%v: refused: rules %v (%v), parameters %v", params, failed, err, ev.CheckParameters())
	}
	r, err := ev.Render()
	if err != nil {
		t.Fatal(err)
	}
	return ev, r
}

// TestRoute53_EachRegionAddsItsOwnLatencyRecordsWithItsHealthCheck: with a hosted zone, a
// multi-region stack's public and connect records are latency records named by its region
// (SetIdentifier, Region), so the second region's stack adds its own beside the first's instead
// of colliding, each answered only while its region's health check passes; that check calls
// GET /readyz, the health function's route, over HTTPS on the region's own health API host.
// A single region keeps plain alias records and creates no health check; without a hosted zone
// neither stack creates records or a check.
func TestRoute53_EachRegionAddsItsOwnLatencyRecordsWithItsHealthCheck(t *testing.T) {
	out := samTransform(t)
	records := []string{"PublicDomainRecord", "CustomDomainRecord"}
	identities := map[string]map[string]bool{} // record name -> set identifiers across the pair
	for _, tc := range []struct {
		name    string
		params  map[string]string
		latency bool
		zone    bool
	}{
		{"single region", withHostedZone(map[string]string{}), false, true},
		{"primary", withHostedZone(multiRegion("eu-west-1")), true, true},
		{"secondary", withHostedZone(multiRegion("eu-central-1")), true, true},
		{"primary, no hosted zone", func() map[string]string {
			p := withHostedZone(multiRegion("eu-west-1"))
			delete(p, "HostedZoneId")
			return p
		}(), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, r := render(t, out, tc.params)
			region := tc.params["AWS::Region"]
			check, hasCheck := r.Resources["RegionHealthCheck"]
			if hasCheck != tc.latency {
				t.Fatalf("RegionHealthCheck created = %v, want %v", hasCheck, tc.latency)
			}
			for _, id := range records {
				rec, ok := r.Resources[id]
				if ok != tc.zone {
					t.Fatalf("%s created = %v, want %v", id, ok, tc.zone)
				}
				if !ok {
					continue
				}
				p := cfn.AsMap(rec["Properties"])
				if !tc.latency {
					for _, k := range []string{"SetIdentifier", "Region", "HealthCheckId"} {
						if v, set := p[k]; set {
							t.Errorf("%s: %s = %v in a single region, want a plain alias record", id, k, v)
						}
					}
					continue
				}
				for _, k := range []string{"SetIdentifier", "Region"} {
					if v, err := ev.Eval(p[k]); err != nil || v != region {
						t.Errorf("%s: %s = %q (%v), want this region %s", id, k, v, err, region)
					}
				}
				if !cfn.Refs(p["HealthCheckId"], "RegionHealthCheck") {
					t.Errorf("%s: HealthCheckId %v, want this region's RegionHealthCheck", id, p["HealthCheckId"])
				}
				name, _ := ev.Eval(p["Name"])
				if identities[name] == nil {
					identities[name] = map[string]bool{}
				}
				identities[name][region] = true
			}
			if !hasCheck {
				return
			}
			cfg := cfn.AsMap(cfn.Path(check, "Properties", "HealthCheckConfig"))
			host, _ := json.Marshal(cfg["FullyQualifiedDomainName"])
			if want := `{"Fn::Sub":"${HealthApi}.execute-api.${AWS::Region}.${AWS::URLSuffix}"}`; string(host) != want {
				t.Errorf("the health check calls %s, want the region's health API host %s", host, want)
			}
			if cfg["Type"] != "HTTPS" || fmt.Sprint(cfg["Port"]) != "443" || cfg["EnableSNI"] != true ||
				fmt.Sprint(cfg["RequestInterval"]) != "30" || fmt.Sprint(cfg["FailureThreshold"]) != "3" {
				t.Errorf("the health check is %v on port %v (SNI %v, every %v s, %v failures), want HTTPS on 443 with SNI, every 30 s, 3 failures (docs/multiregion.md)",
					cfg["Type"], cfg["Port"], cfg["EnableSNI"], cfg["RequestInterval"], cfg["FailureThreshold"])
			}
			paths := cfn.AsMap(cfn.Path(r.Resources["HealthApi"], "Properties", "Body", "paths"))
			if _, ok := paths[fmt.Sprint(cfg["ResourcePath"])]; !ok || templateRoutes(t, load(t))["GET "+fmt.Sprint(cfg["ResourcePath"])] != "HealthFunction" {
				t.Errorf("the health check calls %v, which is not the health function's route on HealthApi (%v)", cfg["ResourcePath"], slices.Collect(maps.Keys(paths)))
			}
		})
	}
	for name, regions := range identities {
		if len(regions) != 2 {
			t.Errorf("the pair's records for %s are told apart by %v, want one per region", name, regions)
		}
	}
}

// kept are the resources whose replacement or removal loses what they hold: the table and
// its replicas, the wrapping key and its replica (every signing key is wrapped by it), the
// secrets, queues and log groups, and anything the template retains on deletion.
func kept(res map[string]any) bool {
	switch res["Type"] {
	case "AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable", "AWS::KMS::Key", "AWS::KMS::ReplicaKey",
		"AWS::SecretsManager::Secret", "AWS::SQS::Queue", "AWS::Logs::LogGroup":
		return true
	}
	return res["DeletionPolicy"] == "Retain"
}

// keptChanges lists what a stack update from before to after does to the kept resources:
// removed, added, or changed in any property (CloudFormation may replace it).
func keptChanges(before, after *cfn.Rendered) []string {
	var out []string
	for id, res := range before.Resources {
		if !kept(res) {
			continue
		}
		now, ok := after.Resources[id]
		if !ok {
			out = append(out, id+" removed")
			continue
		}
		a, _ := json.Marshal(res)
		b, _ := json.Marshal(now)
		if string(a) != string(b) {
			out = append(out, id+" changed")
		}
	}
	for id, res := range after.Resources {
		if _, ok := before.Resources[id]; !ok && kept(res) {
			out = append(out, id+" added")
		}
	}
	sort.Strings(out)
	return out
}

// rotates reports whether a rendered stack runs the rotation: AUTH_KEY_ROTATION=on, one
// enabled schedule on RotationSchedule, and InitialKey, which runs it at the update.
func rotates(t *testing.T, ev *cfn.Evaluator, r *cfn.Rendered) bool {
	t.Helper()
	on, err := ev.Eval(cfn.Path(r.Resources["RotateKeysFunction"], "Properties", "Environment", "Variables", config.EnvKeyRotation))
	if err != nil {
		t.Fatal(err)
	}
	enabled := 0
	for _, yes := range rotationSchedules(t, r) {
		if yes {
			enabled++
		}
	}
	_, initial := r.Resources["InitialKey"]
	if (on == "on") != (enabled == 1) || (on == "on") != initial {
		t.Fatalf("%s=%s with %d enabled schedules and InitialKey %v: the rotation is half on", config.EnvKeyRotation, on, enabled, initial)
	}
	return on == "on"
}

// TestFailover_TheRunbooksSwitchMovesOnlyTheRotation: the parameter change the failover runbook
// (docs/multiregion.md) prescribes, RotationRegion=<SecondaryRegion>, makes the surviving
// secondary's stack run the rotation (schedule, InitialKey, AUTH_KEY_ROTATION=on) and stops it
// in the primary's stack when that region returns; in either stack, and back again, it leaves
// every resource that holds data exactly as it was: the global table, the wrapping key or its
// replica, the secrets, the queue and the log groups are neither replaced nor removed. The old
// advice, redeploying the secondary with the regions swapped, is shown failing that check.
func TestFailover_TheRunbooksSwitchMovesOnlyTheRotation(t *testing.T) {
	out := samTransform(t)
	switched := func(p map[string]string) map[string]string {
		p = maps.Clone(p)
		p["RotationRegion"] = "eu-central-1"
		return p
	}
	for _, tc := range []struct {
		name                        string
		before                      map[string]string
		rotatesBefore, rotatesAfter bool
	}{
		{"the surviving secondary takes the rotation", withHostedZone(multiRegion("eu-central-1")), false, true},
		{"the returning primary gives it up", withHostedZone(multiRegion("eu-west-1")), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evBefore, before := render(t, out, tc.before)
			evAfter, after := render(t, out, switched(tc.before))
			if got := rotates(t, evBefore, before); got != tc.rotatesBefore {
				t.Errorf("before the switch the stack rotates = %v, want %v", got, tc.rotatesBefore)
			}
			if got := rotates(t, evAfter, after); got != tc.rotatesAfter {
				t.Errorf("after the switch the stack rotates = %v, want %v", got, tc.rotatesAfter)
			}
			if c := keptChanges(before, after); len(c) > 0 {
				t.Errorf("the switch touches what holds data: %v", c)
			}
			if c := keptChanges(after, before); len(c) > 0 {
				t.Errorf("switching back touches what holds data: %v", c)
			}
			n := 0
			for _, res := range before.Resources {
				if kept(res) {
					n++
				}
			}
			t.Logf("%d resources that hold data kept as they were", n)
		})
	}
	// The check above is able to fail: the advice this runbook replaces would drop the replica
	// of the wrapping key and create a second global table and wrapping key.
	_, secondary := render(t, out, withHostedZone(multiRegion("eu-central-1")))
	swapped := withHostedZone(multiRegion("eu-central-1"))
	swapped["PrimaryRegion"], swapped["SecondaryRegion"], swapped["PrimaryWrapKeyArn"] = "eu-central-1", "eu-west-1", ""
	_, redeployed := render(t, out, swapped)
	c := keptChanges(secondary, redeployed)
	for _, want := range []string{"GlobalTable added", "SigningKeyWrapKey added", "SigningKeyWrapKeyReplica removed"} {
		if !slices.Contains(c, want) {
			t.Errorf("redeploying with the regions swapped: %v, want it to include %q", c, want)
		}
	}
	t.Logf("redeploying the secondary with the regions swapped would: %v", c)
}

// TestFailover_RotationRegionIsOneOfThePair: the switch is refused in a single region and
// towards a third region, before anything is created.
func TestFailover_RotationRegionIsOneOfThePair(t *testing.T) {
	tpl := load(t)
	for name, p := range map[string]map[string]string{
		"single region": {"BaseUrl": "https://auth.bank.example", "RotationRegion": "eu-west-1"},
		"third region":  func() map[string]string { p := multiRegion("eu-west-1"); p["RotationRegion"] = "us-east-1"; return p }(),
	} {
		failed, err := tpl.NewEvaluator(p).FailedRules()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(failed, func(f string) bool { return strings.Contains(f, "RotationRegion must be") }) {
			t.Errorf("%s: rules failed %v, want RotationRegionIsOneOfThePair's refusal", name, failed)
		}
	}
}
