package template_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestIAM_RegisterFunctionManagesClientsAndTakesInitialAccessTokensOnly: the register
// function creates, reads, replaces and deletes clients, takes initial access tokens (a
// delete), and, to delete a client as authctl does, lists that client's grants (GSI2) and
// revokes them; each action limited to those item kinds, nothing else (no Scan, no KMS), in
// this region, and at the home region only the take of an initial access token.
func TestIAM_RegisterFunctionManagesClientsAndTakesInitialAccessTokensOnly(t *testing.T) {
	tpl := load(t)
	allowed := map[string][]string{
		"dynamodb:GetItem":    {"CLIENT#*", "GRANT#*", "IAT#*"},
		"dynamodb:PutItem":    {"CLIENT#*", "GRANT#*"},
		"dynamodb:UpdateItem": {"GRANT#*"},
		"dynamodb:DeleteItem": {"CLIENT#*", "IAT#*", "TOKEN#*"},
		"dynamodb:Query":      {"CLIENT#*"},
	}
	for _, region := range []struct {
		name   string
		params map[string]string
	}{
		{"single region", map[string]string{"BaseUrl": "https://a.example"}},
		{"multi-region", map[string]string{"BaseUrl": "https://a.example", "PrimaryRegion": "eu-west-1", "SecondaryRegion": "eu-central-1",
			"GlobalTableName": "authserver-grants", "KmsDataKeyArn": "arn:aws:kms:eu-west-1:111122223333:key/mrk-1", "SigningMode": "kms-data-key"}},
	} {
		t.Run(region.name, func(t *testing.T) {
			ev := tpl.NewEvaluator(region.params)
			stmts, err := tpl.StatementsIn(ev, tpl.Resources["RegisterFunction"])
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for _, s := range stmts {
				for _, a := range s.Actions {
					if !strings.HasPrefix(a, "dynamodb:") {
						t.Errorf("%s: the register function may %s", s.Sid, a)
						continue
					}
					want, ok := allowed[a]
					if !ok {
						t.Errorf("%s: the register function may %s", s.Sid, a)
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
					if js, _ := json.Marshal(s.Resources); a == "dynamodb:Query" && !strings.Contains(string(js), "/index/gsi2\"") {
						t.Errorf("%s: Query on %v, want the client listing index gsi2 only", s.Sid, s.Resources)
					}
					if strings.Contains(fmt.Sprint(s.Resources), "eu-central-1") && (a != "dynamodb:GetItem" && a != "dynamodb:DeleteItem" || !slices.Equal(s.LeadingKeys(), []string{"IAT#*"})) {
						t.Errorf("%s: %s on %v at the home region, want only the read and the take of IAT# items", s.Sid, a, s.LeadingKeys())
					}
					seen[a] = true
				}
			}
			for a := range allowed {
				if !seen[a] {
					t.Errorf("the register function may not %s: a registration or a delete needs it", a)
				}
			}
		})
	}
}
