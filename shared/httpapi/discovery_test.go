package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
)

func discovery(t *testing.T, mtls string) map[string]any {
	t.Helper()
	w := httptest.NewRecorder()
	NewDiscoveryHandler(Provider{BaseURL: "https://auth.bank.example", MTLSBaseURL: mtls, Issuer: "https://auth.bank.example" + PathPrefix, Locales: []string{"en", "fr"}}).
		ServeHTTP(w, httptest.NewRequest(http.MethodGet, PathDiscovery, nil))
	var doc map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil || w.Code != 200 {
		t.Fatalf("%d %v", w.Code, err)
	}
	return doc
}

// TestDiscovery_MTLSAliases: the connect host is announced for the endpoints clients
// authenticate at (RFC 8705 5), and only when there is one.
func TestDiscovery_MTLSAliases(t *testing.T) {
	if _, ok := discovery(t, "")["mtls_endpoint_aliases"]; ok {
		t.Fatal("aliases announced without a connect host")
	}
	doc := discovery(t, "https://connect.bank.example")
	aliases, _ := doc["mtls_endpoint_aliases"].(map[string]any)
	if aliases["token_endpoint"] != "https://connect.bank.example"+PathToken ||
		aliases["revocation_endpoint"] != "https://connect.bank.example"+PathRevoke ||
		doc["token_endpoint"] != "https://auth.bank.example"+PathToken || doc["tls_client_certificate_bound_access_tokens"] != true {
		t.Fatalf("%v", doc)
	}
}

// TestDiscovery_AnnouncesCertificateBoundTokensOnlyWithAConnectHost: without AUTH_MTLS_BASE_URL
// no client can present a certificate, so tls_client_certificate_bound_access_tokens is absent
// (RFC 8414 2: absent is false); with it, true.
func TestDiscovery_AnnouncesCertificateBoundTokensOnlyWithAConnectHost(t *testing.T) {
	if v, ok := discovery(t, "")["tls_client_certificate_bound_access_tokens"]; ok {
		t.Fatalf("certificate-bound tokens announced without mutual TLS: %v", v)
	}
	if v := discovery(t, "https://connect.bank.example")["tls_client_certificate_bound_access_tokens"]; v != true {
		t.Fatalf("with a connect host: %v, want true", v)
	}
}

// TestDiscovery_DoesNotAnnouncePromptNone: silent authentication is not supported yet, so
// prompt_values_supported leaves out "none" and keeps the values that work.
func TestDiscovery_DoesNotAnnouncePromptNone(t *testing.T) {
	got := discovery(t, "")["prompt_values_supported"]
	if !reflect.DeepEqual(got, []any{"login", "consent", "select_account"}) {
		t.Fatalf("prompt_values_supported %v, want login, consent, select_account", got)
	}
}

// TestDiscovery_IDTokenAlgsAreTheConfiguredOnes: id_token_signing_alg_values_supported lists
// the algorithms the deployment keeps keys for, all three by default.
func TestDiscovery_IDTokenAlgsAreTheConfiguredOnes(t *testing.T) {
	algs := func(h *DiscoveryHandler) any {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, PathDiscovery, nil))
		var doc map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
			t.Fatal(err)
		}
		return doc["id_token_signing_alg_values_supported"]
	}
	base, iss := "https://auth.bank.example", "https://auth.bank.example"+PathPrefix
	if got := algs(NewDiscoveryHandler(Provider{BaseURL: base, Issuer: iss})); !reflect.DeepEqual(got, []any{"RS256", "PS256", "ES256"}) {
		t.Fatalf("default: %v", got)
	}
	if got := algs(NewDiscoveryHandler(Provider{BaseURL: base, Issuer: iss, IDTokenAlgs: []string{"PS256", "ES256"}})); !reflect.DeepEqual(got, []any{"PS256", "ES256"}) {
		t.Fatalf("configured PS256,ES256: %v", got)
	}
}

// TestDiscovery_AdvertisesCIBA: the backchannel authentication endpoint (also on the connect
// host), poll and ping, the signed request algs (PS256, ES256) and no user_code (CIBA Core 4).
func TestDiscovery_AdvertisesCIBA(t *testing.T) {
	doc := discovery(t, "https://connect.bank.example")
	aliases, _ := doc["mtls_endpoint_aliases"].(map[string]any)
	want := map[string]any{
		"backchannel_authentication_endpoint":                             "https://auth.bank.example" + PathBackchannel,
		"backchannel_token_delivery_modes_supported":                      []any{"poll", "ping"},
		"backchannel_authentication_request_signing_alg_values_supported": []any{"PS256", "ES256"},
		"backchannel_user_code_parameter_supported":                       false,
	}
	for k, v := range want {
		if !reflect.DeepEqual(doc[k], v) {
			t.Errorf("%s = %v, want %v", k, doc[k], v)
		}
	}
	if aliases["backchannel_authentication_endpoint"] != "https://connect.bank.example"+PathBackchannel {
		t.Errorf("mtls alias %v", aliases["backchannel_authentication_endpoint"])
	}
}
