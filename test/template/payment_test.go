package template_test

import (
	"slices"
	"strings"
	"testing"
)

// oneAndTwoRegions are the parameters of a stack in one region and of one in two (the
// primary's, in data-key mode), for the tests of a function's policy in both.
var oneAndTwoRegions = []struct {
	name   string
	params map[string]string
}{
	{"single region", map[string]string{"BaseUrl": "https://a.example"}},
	{"multi-region", map[string]string{"BaseUrl": "https://a.example", "PrimaryRegion": "eu-west-1", "SecondaryRegion": "eu-central-1",
		"GlobalTableName": "authserver-grants", "KmsDataKeyArn": "arn:aws:kms:eu-west-1:111122223333:key/mrk-1", "SigningMode": "kms-data-key"}},
}

// TestIAM_AuthorizerWritesOnlyGrantsItConsumesAndOneTimeValues: the authorizer reads tokens,
// records one-time values and, for a payment grant's token, updates the grant's item once
// (oauth.GrantStore.ConsumeGrant); each action is limited to its item kind, in this region and
// at the home region, and it has no other DynamoDB action.
func TestIAM_AuthorizerWritesOnlyGrantsItConsumesAndOneTimeValues(t *testing.T) {
	tpl := load(t)
	for _, region := range oneAndTwoRegions {
		t.Run(region.name, func(t *testing.T) {
			ev := tpl.NewEvaluator(region.params)
			stmts, err := tpl.StatementsIn(ev, tpl.Resources["AuthorizerFunction"])
			if err != nil {
				t.Fatal(err)
			}
			allowed := map[string]string{"dynamodb:GetItem": "TOKEN#*", "dynamodb:PutItem": "REPLAY#*", "dynamodb:UpdateItem": "GRANT#*"}
			seen := map[string]bool{}
			for _, s := range stmts {
				for _, a := range s.Actions {
					if !strings.HasPrefix(a, "dynamodb:") {
						continue
					}
					want, ok := allowed[a]
					if !ok {
						t.Errorf("%s: the authorizer may %s", s.Sid, a)
						continue
					}
					if keys := s.LeadingKeys(); !slices.Equal(keys, []string{want}) {
						t.Errorf("%s: %s on %v, want %s only", s.Sid, a, keys, want)
					}
					seen[a] = true
				}
			}
			if !seen["dynamodb:UpdateItem"] {
				t.Error("the authorizer may not consume a payment grant (no UpdateItem on GRANT#*)")
			}
		})
	}
}
