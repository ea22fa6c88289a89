package template_test

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/test/template/cfn"
)

// multiRegion are the parameters of the two stacks of a two-region deployment, in region.
func multiRegion(region string) map[string]string {
	return map[string]string{"BaseUrl": "https://a.example", "AWS::Region": region, "PrimaryRegion": "eu-west-1",
		"SecondaryRegion": "eu-central-1", "GlobalTableName": "authserver-grants", "SigningMode": "data-key",
		"PrimaryWrapKeyArn": "arn:aws:kms:eu-west-1:123456789012:key/mrk-1234abcd12ab34cd56ef1234567890ab"}
}

// TestMultiRegion_GlobalTableMatchesTheTable: the global table has the single-region table's
// keys, indexes, TTL and encryption, plus the stream global tables replicate from, and a
// replica in each region.
func TestMultiRegion_GlobalTableMatchesTheTable(t *testing.T) {
	tpl := load(t)
	table, global := cfn.AsMap(tpl.Resources["Table"]["Properties"]), cfn.AsMap(tpl.Resources["GlobalTable"]["Properties"])
	// A global table names its customer-managed key per replica (customerkeys_test.go), not
	// in its SSESpecification.
	tableSSE := maps.Clone(cfn.AsMap(table["SSESpecification"]))
	delete(tableSSE, "KMSMasterKeyId")
	table = maps.Clone(table)
	table["SSESpecification"] = tableSSE
	for _, k := range []string{"AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes", "TimeToLiveSpecification", "SSESpecification", "BillingMode"} {
		a, _ := json.Marshal(table[k])
		b, _ := json.Marshal(global[k])
		if string(a) != string(b) {
			t.Errorf("GlobalTable %s = %s, want the Table's %s", k, b, a)
		}
	}
	if cfn.Path(global, "StreamSpecification", "StreamViewType") != "NEW_AND_OLD_IMAGES" {
		t.Error("a global table needs its stream (NEW_AND_OLD_IMAGES)")
	}
	ev := tpl.NewEvaluator(multiRegion("eu-west-1"))
	var regions []string
	for _, r := range cfn.AsSlice(global["Replicas"]) {
		v, err := ev.Eval(cfn.AsMap(r)["Region"])
		if err != nil {
			t.Fatal(err)
		}
		regions = append(regions, v)
		if cfn.Path(cfn.AsMap(r), "PointInTimeRecoverySpecification", "PointInTimeRecoveryEnabled") != true {
			t.Errorf("replica %s without point-in-time recovery", v)
		}
	}
	if !slices.Equal(regions, []string{"eu-west-1", "eu-central-1"}) {
		t.Errorf("replicas in %v", regions)
	}
}

// TestMultiRegion_EachStackHasItsPart: the primary stack creates the global table, the
// multi-Region wrapping key and the first key, and rotates; the secondary stack creates
// neither table nor registry writer, replicates the wrapping key, and does not rotate. In
// both, the functions name their home and their peer, and the token function may write the
// peer's replica (the home of the codes and tokens the peer issued) and nothing else there.
func TestMultiRegion_EachStackHasItsPart(t *testing.T) {
	tpl := load(t)
	for _, tc := range []struct {
		region, peer                      string
		global, wrapKey, replica, initial bool
	}{
		{"eu-west-1", "eu-central-1", true, true, false, true},
		{"eu-central-1", "eu-west-1", false, false, true, false},
	} {
		ev := tpl.NewEvaluator(multiRegion(tc.region))
		if failed, err := ev.FailedRules(); err != nil || len(failed) > 0 {
			t.Fatalf("%s: rules refuse the multi-region parameters: %v %v", tc.region, failed, err)
		}
		created := func(name string) bool {
			yes, err := ev.Creates(name)
			if err != nil {
				t.Fatal(err)
			}
			return yes
		}
		if created("Table") {
			t.Errorf("%s: the single-region table is created too", tc.region)
		}
		for name, want := range map[string]bool{"GlobalTable": tc.global, "SigningKeyWrapKey": tc.wrapKey,
			"SigningKeyWrapKeyReplica": tc.replica, "InitialKey": tc.initial} {
			if created(name) != want {
				t.Errorf("%s: %s created = %v, want %v", tc.region, name, created(name), want)
			}
		}
		env := tpl.Env(tpl.Resources["TokenFunction"])
		for k, want := range map[string]string{config.EnvHomeRegion: tc.region, config.EnvPeerRegions: tc.peer,
			config.EnvTable: "authserver-grants", config.EnvKeyBackend: "kms-data-key"} {
			if got, err := ev.Eval(env[k]); err != nil || got != want {
				t.Errorf("%s: %s = %q (%v), want %q", tc.region, k, got, err, want)
			}
		}
		rotation, err := ev.Eval(tpl.Env(tpl.Resources["RotateKeysFunction"])[config.EnvKeyRotation])
		if want := map[bool]string{true: "on", false: "off"}[tc.initial]; err != nil || rotation != want {
			t.Errorf("%s: %s = %q (%v), want %q", tc.region, config.EnvKeyRotation, rotation, err, want)
		}
		stmts, err := tpl.StatementsIn(ev, tpl.Resources["TokenFunction"])
		if err != nil {
			t.Fatal(err)
		}
		peerARN := "arn:aws:dynamodb:" + tc.peer + ":"
		found := false
		for _, s := range stmts {
			for _, r := range s.Resources {
				v, err := ev.Eval(r)
				if err != nil || !strings.HasPrefix(v, peerARN) {
					continue
				}
				found = true
				if !strings.HasSuffix(v, ":table/authserver-grants") || len(s.LeadingKeys()) == 0 {
					t.Errorf("%s: %s on %s, want the global table with leading keys", tc.region, s.Sid, v)
				}
				for _, k := range s.LeadingKeys() {
					// BC: a CIBA request is polled and consumed at its home (oauth.BackchannelStore).
					if !slices.Contains([]string{"CODE#*", "GRANT#*", "TOKEN#*", "BC#*"}, k) {
						t.Errorf("%s: %s reaches %s items in the peer's replica", tc.region, s.Sid, k)
					}
				}
			}
		}
		if !found {
			t.Errorf("%s: the token function may not write its peer's replica (%s…)", tc.region, peerARN)
		}
	}
}

// TestMultiRegion_RulesRefuseAnIncompleteDeployment: every missing or inconsistent parameter is
// refused before anything is created.
func TestMultiRegion_RulesRefuseAnIncompleteDeployment(t *testing.T) {
	tpl := load(t)
	for name, change := range map[string]map[string]string{
		"kms-sign signing":  {"SigningMode": "kms-sign"},
		"no table name":     {"GlobalTableName": ""},
		"no primary":        {"PrimaryRegion": ""},
		"same regions":      {"PrimaryRegion": "eu-central-1"},
		"a third region":    {"AWS::Region": "us-east-1"},
		"secondary, no key": {"AWS::Region": "eu-central-1", "PrimaryWrapKeyArn": ""},
	} {
		p := multiRegion("eu-west-1")
		for k, v := range change {
			p[k] = v
		}
		failed, err := tpl.NewEvaluator(p).FailedRules()
		if err != nil {
			t.Fatal(err)
		}
		if len(failed) == 0 {
			t.Errorf("%s: accepted", name)
		}
	}
}
