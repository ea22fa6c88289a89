package e2e

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/acmebank/authserver/shared/admin"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/tokenendpoint"
)

// TestGrants_DiscoveryAdvertisesExactlyTheGrantsTheTokenEndpointAccepts: every grant type the
// discovery document lists reaches its grant (a bogus code or refresh token is invalid_grant,
// not unsupported_grant_type), and grant types it does not list are unsupported_grant_type. A
// grant added to the token endpoint's registry (shared/tokenendpoint/registry.go) is advertised
// with it, and a client can be registered for it: the registry is the only list.
func TestGrants_DiscoveryAdvertisesExactlyTheGrantsTheTokenEndpointAccepts(t *testing.T) {
	e := newEnv(t)
	st, doc, _ := do(t, mustRequest(t, e.url(httpapi.PathDiscovery)))
	if st != http.StatusOK {
		t.Fatalf("discovery answered %d", st)
	}
	var advertised []string
	for _, g := range doc["grant_types_supported"].([]any) {
		advertised = append(advertised, g.(string))
	}
	if len(advertised) == 0 {
		t.Fatal("discovery advertises no grant type")
	}
	if !slices.Equal(advertised, tokenendpoint.GrantTypes()) {
		t.Errorf("discovery advertises %v, the registry holds %v", advertised, tokenendpoint.GrantTypes())
	}
	adm := admin.New(e.app.Store, cheapHasher, e.clock, e.app.Audit)
	for _, g := range advertised {
		if _, _, err := adm.CreateClient(context.Background(), admin.ClientSpec{Name: "For " + g, RedirectURIs: []string{redirectURI},
			Scopes: []string{"openid"}, GrantTypes: []string{g}}); err != nil {
			t.Errorf("a client cannot be registered for the advertised grant %s: %v", g, err)
		}
	}
	candidates := append(slices.Clone(advertised), "password", "client_credentials", "implicit",
		"urn:ietf:params:oauth:grant-type:device_code", "urn:openid:params:grant-type:ciba")
	for _, g := range candidates {
		st, body, _ := e.post(t, httpapi.PathToken, url.Values{"grant_type": {g}, "code": {"ac_bogus"},
			"refresh_token": {"rt_bogus"}, "redirect_uri": {redirectURI}}, true, false)
		unsupported := st == http.StatusBadRequest && body["error"] == "unsupported_grant_type"
		if listed := slices.Contains(advertised, g); listed == unsupported {
			t.Errorf("grant_type %s: advertised %v, but the token endpoint answered %d %v", g, listed, st, body)
		}
	}
}
