package template_test

import (
	"slices"
	"strings"
	"testing"
)

// TestIAM_AuthorizeQueriesOnlyTheUsersGrantsAndWithdrawsGrants: the authorize function (the
// Connected apps page, remembered consent) may Query the table's GSI1 only, on the USER#
// partitions only (the users' grants, not the operators' USERS and CLIENTS listings), no other
// index, and no Scan; it reads and revokes GRANT# and TOKEN# items. In one region and in two.
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
			withdraws := map[string]bool{}
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
						if slices.Contains(keys, "GRANT#*") && slices.Contains(keys, "TOKEN#*") {
							withdraws[a] = true
						}
					}
				}
			}
			if queries != 1 {
				t.Errorf("%d statements let the authorize function Query, want 1 (the users' grants)", queries)
			}
			for _, a := range []string{"dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"} {
				if !withdraws[a] {
					t.Errorf("the authorize function may not %s GRANT# and TOKEN# items: a withdrawal would be AccessDenied", a)
				}
			}
		})
	}
}
