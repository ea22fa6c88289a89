package template_test

import (
	"slices"
	"strings"
	"testing"
)

// TestIAM_GrantsFunctionReadsTokensAndGrantsAndRevokesOnlyGrants: the grant management
// function reads the token presented and the grant it names, records DPoP proofs' jtis, and
// revokes a grant (the grant's item updated, or a tombstone put, and its tokens deleted); for
// the query's consent receipt it reads the client, the key registry and the pairwise salt,
// and may put the salt (its first use) and no other KEYS# item; each action is limited to
// those item kinds, and it has no other DynamoDB action (no Query, no Scan), in this region
// and at the home region.
func TestIAM_GrantsFunctionReadsTokensAndGrantsAndRevokesOnlyGrants(t *testing.T) {
	tpl := load(t)
	allowed := map[string][]string{
		"dynamodb:GetItem":    {"GRANT#*", "TOKEN#*", "CLIENT#*", "KEYS#registry", "KEYS#pairwise-salt"},
		"dynamodb:PutItem":    {"GRANT#*", "REPLAY#*", "KEYS#pairwise-salt"},
		"dynamodb:UpdateItem": {"GRANT#*"},
		"dynamodb:DeleteItem": {"TOKEN#*"},
	}
	for _, region := range oneAndTwoRegions {
		t.Run(region.name, func(t *testing.T) {
			ev := tpl.NewEvaluator(region.params)
			stmts, err := tpl.StatementsIn(ev, tpl.Resources["GrantsFunction"])
			if err != nil {
				t.Fatal(err)
			}
			seen, granted := map[string]bool{}, map[string]bool{}
			for _, s := range stmts {
				for _, a := range s.Actions {
					if !strings.HasPrefix(a, "dynamodb:") {
						continue
					}
					want, ok := allowed[a]
					if !ok {
						t.Errorf("%s: the grants function may %s", s.Sid, a)
						continue
					}
					for _, k := range s.LeadingKeys() {
						if !slices.Contains(want, k) {
							t.Errorf("%s: %s on %s, want only %v", s.Sid, a, k, want)
						}
						granted[a+" "+k] = true
					}
					if len(s.LeadingKeys()) == 0 {
						t.Errorf("%s: %s on every item, want only %v", s.Sid, a, want)
					}
					seen[a] = true
				}
			}
			for a := range allowed {
				if !seen[a] {
					t.Errorf("the grants function may not %s: a query or a revocation needs it", a)
				}
			}
			// A query's consent receipt (shared/receipt) reads these, and stores the salt once.
			for _, need := range []string{"dynamodb:GetItem CLIENT#*", "dynamodb:GetItem KEYS#registry",
				"dynamodb:GetItem KEYS#pairwise-salt", "dynamodb:PutItem KEYS#pairwise-salt"} {
				if !granted[need] {
					t.Errorf("the grants function may not %s: a consent receipt needs it", need)
				}
			}
		})
	}
}

// TestIAM_ParAndAuthorizeReadTheGrantAMergeOrReplaceNames: a Grant Management merge or
// replace is checked against the grant it names at the request (PAR, or authorize) and at the
// decision (authorize): both functions read GRANT# items. The pushed request's function writes
// none; the authorize function's writes are the customer's withdrawal
// (TestIAM_AuthorizeQueriesOnlyTheUsersGrantsAndWithdrawsGrants).
func TestIAM_ParAndAuthorizeReadTheGrantAMergeOrReplaceNames(t *testing.T) {
	tpl := load(t)
	ev := tpl.NewEvaluator(map[string]string{"BaseUrl": "https://a.example"})
	for _, fn := range []string{"ParFunction", "AuthorizeFunction"} {
		stmts, err := tpl.StatementsIn(ev, tpl.Resources[fn])
		if err != nil {
			t.Fatal(err)
		}
		reads := false
		for _, s := range stmts {
			for _, a := range s.Actions {
				if !slices.Contains(s.LeadingKeys(), "GRANT#*") {
					continue
				}
				if a == "dynamodb:GetItem" {
					reads = true
				} else if strings.HasPrefix(a, "dynamodb:") && fn == "ParFunction" {
					t.Errorf("%s %s: %s on GRANT#*, want reads only", fn, s.Sid, a)
				}
			}
		}
		if !reads {
			t.Errorf("%s may not read GRANT# items: a merge or replace could not be checked", fn)
		}
	}
}
