package template_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestIAM_BcDecisionFunctionReadsAndDecidesRequestsAndRecordsJTIsOnly: the function of the
// bank's app backend's callback (CIBA) reads a request and decides it (BC# items), reads the
// customer and the client, and records the decision token's jti; nothing else (no Scan, no
// Query, no KMS, no events:PutEvents, no delete), in this region, and at the home region only
// the read and the decision of a request; for each condition value of the template.
func TestIAM_BcDecisionFunctionReadsAndDecidesRequestsAndRecordsJTIsOnly(t *testing.T) {
	tpl := load(t)
	allowed := map[string][]string{
		"dynamodb:GetItem":    {"BC#*", "USER#*", "CLIENT#*"},
		"dynamodb:UpdateItem": {"BC#*"},
		"dynamodb:PutItem":    {"REPLAY#*"},
	}
	for _, region := range []struct {
		name   string
		params map[string]string
	}{
		{"single region", map[string]string{"BaseUrl": "https://a.example"}},
		{"single region, data-key signing", map[string]string{"BaseUrl": "https://a.example", "SigningMode": "kms-data-key"}},
		{"multi-region", map[string]string{"BaseUrl": "https://a.example", "PrimaryRegion": "eu-west-1", "SecondaryRegion": "eu-central-1",
			"GlobalTableName": "authserver-grants", "KmsDataKeyArn": "arn:aws:kms:eu-west-1:111122223333:key/mrk-1", "SigningMode": "kms-data-key"}},
	} {
		t.Run(region.name, func(t *testing.T) {
			ev := tpl.NewEvaluator(region.params)
			stmts, err := tpl.StatementsIn(ev, tpl.Resources["BcDecisionFunction"])
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for _, s := range stmts {
				for _, a := range s.Actions {
					want, ok := allowed[a]
					if !ok {
						t.Errorf("%s: the bcdecision function may %s", s.Sid, a)
						continue
					}
					if len(s.LeadingKeys()) == 0 {
						t.Errorf("%s: %s on every item, want only %v", s.Sid, a, want)
					}
					for _, k := range s.LeadingKeys() {
						if !slices.Contains(want, k) {
							t.Errorf("%s: %s on %s, want only %v", s.Sid, a, k, want)
						}
					}
					if strings.Contains(fmt.Sprint(s.Resources), "eu-central-1") && (a == "dynamodb:PutItem" || !slices.Equal(s.LeadingKeys(), []string{"BC#*"})) {
						t.Errorf("%s: %s on %v at the home region, want only the read and the decision of BC# items", s.Sid, a, s.LeadingKeys())
					}
					seen[a] = true
				}
			}
			for a := range allowed {
				if !seen[a] {
					t.Errorf("the bcdecision function may not %s: a decision needs it", a)
				}
			}
		})
	}
}

// TestCIBA_EventBusIsTheStacksAndTheCallbackGetsTheAppBackend: the stack has its own CIBA
// bus (the one events:PutEvents may name), and the bcdecision function gets the app backend's
// issuer and keys from the template's parameters.
func TestCIBA_EventBusIsTheStacksAndTheCallbackGetsTheAppBackend(t *testing.T) {
	tpl := load(t)
	if bus := tpl.Resources["CibaEventBus"]; bus == nil || bus["Type"] != "AWS::Events::EventBus" {
		t.Fatalf("CibaEventBus: %v, want an AWS::Events::EventBus", bus)
	}
	env := fmt.Sprint(tpl.Resources["BcDecisionFunction"]["Properties"])
	for _, p := range []string{"AUTH_CIBA_APP_ISSUER:map[Ref:CibaAppIssuer]", "AUTH_CIBA_APP_JWKS:map[Ref:CibaAppJwks]"} {
		if !strings.Contains(env, p) {
			t.Errorf("BcDecisionFunction's environment lacks %s", p)
		}
	}
}

// TestIAM_OnlyTheBackchannelFunctionPublishesCIBAEventsAndOnlyOnTheStacksBus: events:PutEvents
// is the backchannel function's alone, on exactly the stack's CIBA bus (no wildcard, no other
// bus), for each condition value; the function is given that bus.
func TestIAM_OnlyTheBackchannelFunctionPublishesCIBAEventsAndOnlyOnTheStacksBus(t *testing.T) {
	tpl := load(t)
	for _, params := range []map[string]string{
		{"BaseUrl": "https://a.example"},
		{"BaseUrl": "https://a.example", "PrimaryRegion": "eu-west-1", "SecondaryRegion": "eu-central-1",
			"GlobalTableName": "authserver-grants", "KmsDataKeyArn": "arn:aws:kms:eu-west-1:111122223333:key/mrk-1", "SigningMode": "kms-data-key"},
	} {
		ev := tpl.NewEvaluator(params)
		published := false
		for id := range functionNames {
			stmts, err := tpl.StatementsIn(ev, tpl.Resources[id])
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range stmts {
				for _, a := range s.Actions {
					if !strings.HasPrefix(a, "events:") {
						continue
					}
					if id != "BackchannelFunction" || a != "events:PutEvents" {
						t.Errorf("%s: %s may %s", id, s.Sid, a)
						continue
					}
					if got := fmt.Sprint(s.Resources); got != "[map[Fn::GetAtt:[CibaEventBus Arn]]]" {
						t.Errorf("%s: %s on %v, want the stack's CIBA bus alone", id, a, s.Resources)
					}
					published = true
				}
			}
		}
		if !published {
			t.Errorf("%v: the backchannel function may not publish its events", params)
		}
	}
	env := fmt.Sprint(tpl.Resources["BackchannelFunction"]["Properties"])
	if !strings.Contains(env, "AUTH_CIBA_EVENT_BUS:map[Fn::GetAtt:[CibaEventBus Arn]]") {
		t.Errorf("the backchannel function is not given the stack's bus: %s", env)
	}
}
