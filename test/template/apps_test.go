package template_test

import (
	"slices"
	"strings"
	"testing"
)

// TestIAM_AuthorizeQueriesOnlyTheUsersGrantsAndWithdrawsGrants: the authorize function (the
// Connected apps page, remembered consent) may Query the table's GSI1 only, on the USER#
// partitions only (the users' grants, not the operators' USERS and CLIENTS listings), no other
// index, and no Scan; it reads and revokes GRANT# and TOKEN# items. For the page's consent
// receipts it reads the client, the key registry and the pairwise salt, and may put the salt
// (its first use) and no other KEYS# item. In one region and in two.
func TestIAM_AuthorizeQueriesOnlyTheUsersGrantsAndWithdrawsGrants(t *testing.T) {
	tpl := load(t)
	for _, region := range oneAndTwoRegions {
		t.Run(region.name, func(t *testing.T) {
			ev := tpl.NewEvaluator(region.params)
			stmts, err := tpl.StatementsIn(ev, tpl.Resources["AuthorizeFunction"])
			if err != nil {
				t.Fatal(err)
			}
			queries := 0
			withdraws, granted := map[string]bool{}, map[string]bool{}
			for _, s := range stmts {
				for _, a := range s.Actions {
					switch a {
					case "dynamodb:Scan":
						t.Errorf("%s: the authorize function may Scan", s.Sid)
					case "dynamodb:Query":
						queries++
						for _, r := range s.Resources {
							rs, err := ev.Eval(r)
							if err != nil {
								t.Fatalf("%s: %v", s.Sid, err)
							}
							if !strings.HasSuffix(rs, "/index/gsi1") {
								t.Errorf("%s: Query on %s, want the gsi1 index only", s.Sid, rs)
							}
						}
						if keys := s.LeadingKeys(); !slices.Equal(keys, []string{"USER#*"}) {
							t.Errorf("%s: Query on %v, want USER#* only", s.Sid, keys)
						}
					case "dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:PutItem":
						keys := s.LeadingKeys()
						for _, k := range keys {
							granted[a+" "+k] = true
							if strings.HasPrefix(k, "KEYS#") && k != "KEYS#registry" && k != "KEYS#pairwise-salt" || a != "dynamodb:GetItem" && k == "KEYS#registry" {
								t.Errorf("%s: %s on %s: the authorize function reads the key registry and the pairwise salt, and writes only the salt", s.Sid, a, k)
							}
						}
						if slices.Contains(keys, "GRANT#*") && slices.Contains(keys, "TOKEN#*") {
							withdraws[a] = true
						}
					}
				}
			}
			if queries != 1 {
				t.Errorf("%d statements let the authorize function Query, want 1 (the users' grants)", queries)
			}
			// The Connected apps page's consent receipt (shared/receipt) reads these, and stores
			// the salt once.
			for _, need := range []string{"dynamodb:GetItem CLIENT#*", "dynamodb:GetItem KEYS#registry",
				"dynamodb:GetItem KEYS#pairwise-salt", "dynamodb:PutItem KEYS#pairwise-salt"} {
				if !granted[need] {
					t.Errorf("the authorize function may not %s: a consent receipt needs it", need)
				}
			}
			for _, a := range []string{"dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"} {
				if !withdraws[a] {
					t.Errorf("the authorize function may not %s GRANT# and TOKEN# items: a withdrawal would be AccessDenied", a)
				}
			}
		})
	}
}
