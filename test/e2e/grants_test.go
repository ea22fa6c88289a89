package e2e

import (
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/acmebank/authserver/shared/httpapi"
)

// TestGrants_DiscoveryAdvertisesExactlyTheGrantsTheTokenEndpointAccepts: every grant type the
// discovery document lists reaches its grant (a bogus code or refresh token is invalid_grant,
// not unsupported_grant_type), and grant types it does not list are unsupported_grant_type. A
// grant added to the token endpoint (tokenendpoint's grant table) is advertised with it.
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
