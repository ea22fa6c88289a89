package oauth

import (
	"encoding/json"
	"testing"
)

// TestMerge_UnionOfScopesAndDetailsKeepsEachOnce: a merge's grant holds the old grant's scopes
// and details, then the request's that it lacks (a scope in either spelling, a detail equal
// as compacted JSON, counted once).
func TestMerge_UnionOfScopesAndDetailsKeepsEachOnce(t *testing.T) {
	if got := mergeScopes(Scopes{"openid", "bank:transfers:write"}, Scopes{"email", "bank:transfers.write", "openid"}).String(); got != "openid bank:transfers:write email" {
		t.Errorf("merged scopes %q", got)
	}
	a := json.RawMessage(`[{"type":"account_information","permissions":["balances"]}]`)
	b := json.RawMessage(`[{ "type": "account_information", "permissions": ["balances"] },{"type":"account_information","permissions":["transactions"]}]`)
	got, err := mergeDetails(a, b)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"type":"account_information","permissions":["balances"]},{"type":"account_information","permissions":["transactions"]}]`
	if string(got) != want {
		t.Errorf("merged details %s, want %s", got, want)
	}
	if got, _ := mergeDetails(nil, b); string(got) != string(b) {
		t.Errorf("merge into none: %s", got)
	}
}
