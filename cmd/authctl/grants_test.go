package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// TestGrants_ShowListsDetailsAndRevokeWithdrawsOne: an operator looking into a customer's
// grants sees, for each, the client, scopes, the types of its authorization details and the
// dates (list), and one grant whole with its details pretty-printed (show, text and JSON);
// revoke withdraws it (its token is gone) and show then says revoked. An unknown grant is exit
// code 3.
func TestGrants_ShowListsDetailsAndRevokeWithdrawsOne(t *testing.T) {
	tl := embeddedTool(t)
	tl.ok("", "clients", "create", "--id", "acme", "--name", "Acme", "--redirect-uri", "https://acme.example/cb", "--scope", "openid")
	tl.ok("correct-horse-battery", "users", "create", "alice", "--password-stdin")
	var u userView
	tl.okJSON(&u, "", "users", "show", "alice")

	details := `[{"type":"account_information","permissions":["balances"],"accounts":[{"iban":"FR7630006000011234567890189"}]}]`
	now := time.Now().UTC().Truncate(time.Second)
	g := oauth.Grant{ID: oauth.NewID(oauth.PrefixGrant), ClientID: "acme", UID: u.UID, Scopes: oauth.Scopes{"openid"},
		AuthorizationDetails: json.RawMessage(details), AuthTime: now, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	at := oauth.Token{Hash: oauth.HashToken(oauth.NewSecret("at_")), Kind: oauth.KindAccess, Scopes: g.Scopes, Grant: g, IssuedAt: now, ExpiresAt: now.Add(time.Hour)}
	st, err := embedded.Open(tl.env[config.EnvDataDir])
	if err != nil {
		t.Fatal(err)
	}
	err = st.IssueTokens(context.Background(), oauth.Issue{Grant: g, Access: at, FromCode: true, Tokens: []string{at.Hash}}, now)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}

	list := tl.ok("", "grants", "list", "--user", "alice")
	for _, want := range []string{"DETAILS", "LAST_USED", g.ID, "account_information", now.Format(time.RFC3339)} {
		if !strings.Contains(list, want) {
			t.Errorf("grants list does not show %q:\n%s", want, list)
		}
	}
	text := tl.ok("", "grants", "show", g.ID)
	for _, want := range []string{"acme", u.UID, "openid", "live", "AUTHORIZATION_DETAILS", "\n    \"type\": \"account_information\",", "FR7630006000011234567890189"} {
		if !strings.Contains(text, want) {
			t.Errorf("grants show does not show %q:\n%s", want, text)
		}
	}
	var v grantView
	tl.okJSON(&v, "", "grants", "show", g.ID)
	if v.ID != g.ID || !v.LastUsedAt.Equal(now) || v.Revoked {
		t.Errorf("grants show -o json: %+v", v)
	}
	var got, want any
	_ = json.Unmarshal(v.AuthorizationDetails, &got)
	_ = json.Unmarshal([]byte(details), &want)
	if gj, _ := json.Marshal(got); string(gj) != mustJSON(t, want) {
		t.Errorf("grants show -o json details %s, want %s", v.AuthorizationDetails, details)
	}

	tl.ok("", "grants", "revoke", g.ID)
	if text := tl.ok("", "grants", "show", g.ID); !strings.Contains(text, "revoked") {
		t.Errorf("grants show after revoke:\n%s", text)
	}
	st, err = embedded.Open(tl.env[config.EnvDataDir])
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.GetToken(context.Background(), at.Hash, time.Now())
	st.Close()
	if err == nil {
		t.Error("the revoked grant's access token is still stored")
	}
	if _, errOut, code := tl.run("", "grants", "show", oauth.NewID(oauth.PrefixGrant)); code != exitNotFound || !strings.Contains(errOut, "not found") {
		t.Errorf("grants show of an unknown grant: exit %d, %s", code, errOut)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
