package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func lookup(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestFromLookup_DefaultsAndDerivedIssuer(t *testing.T) {
	c, err := FromLookup(lookup(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Issuer != "http://127.0.0.1:8080/v2/authentication/oauth2" || c.Lifetimes.AccessToken != time.Hour || c.Store != "embedded" {
		t.Fatalf("%+v", c)
	}
	c, err = FromLookup(lookup(map[string]string{EnvBaseURL: "https://auth.bank.example/"}))
	if err != nil || c.Issuer != "https://auth.bank.example/v2/authentication/oauth2" || !c.Secure() {
		t.Fatalf("%v %+v", err, c)
	}
}

func TestFromLookup_Overrides(t *testing.T) {
	c, err := FromLookup(lookup(map[string]string{EnvAccessTTL: "15m", EnvGrantTTL: "30d", EnvRefreshTTL: "60d",
		EnvIssuer: "https://id.bank.example", EnvNoSync: "true", EnvLoginMaxFails: "3"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Lifetimes.AccessToken != 15*time.Minute || c.Lifetimes.Grant != 30*24*time.Hour || c.Issuer != "https://id.bank.example" ||
		!c.NoSync || c.LoginMaxFailures != 3 {
		t.Fatalf("%+v", c)
	}
	if c.Lifetimes.RefreshToken != c.Lifetimes.Grant {
		t.Fatalf("a refresh token outliving its grant was not capped: %v", c.Lifetimes.RefreshToken)
	}
}

func TestFromLookup_RefusesNonsense(t *testing.T) {
	for k, v := range map[string]string{EnvAccessTTL: "soon", EnvCodeTTL: "-1m", EnvStore: "redis", EnvKeyBackend: "vault",
		EnvBaseURL: "auth.example", EnvLoginMaxFails: "0", EnvNoSync: "perhaps", EnvKeyRotation: "bogus"} {
		if _, err := FromLookup(lookup(map[string]string{k: v})); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: err %v", k, v, err)
		}
	}
	if _, err := FromLookup(lookup(map[string]string{EnvStore: "dynamodb"})); err == nil {
		t.Error("dynamodb without a table was accepted")
	}
}

// TestFromLookup_SigningKeyPolicyPrincipalsGoTogether: a key policy with signers and no manager
// (or the reverse, or administrators alone) would lock a key or leave it half-named: refused;
// every principal must be an ARN.
func TestFromLookup_SigningKeyPolicyPrincipalsGoTogether(t *testing.T) {
	role := func(n string) string { return "arn:aws:iam::123456789012:role/" + n }
	for _, m := range []map[string]string{
		{EnvKMSKeySigners: role("token")},
		{EnvKMSKeyManager: role("rotation")},
		{EnvKMSKeyAdmins: role("admin")},
		{EnvKMSKeySigners: "token-role", EnvKMSKeyManager: role("rotation")},
		{EnvKMSKeySigners: role("token"), EnvKMSKeyManager: "rotation-role"},
	} {
		if _, err := FromLookup(lookup(m)); err == nil {
			t.Errorf("%v accepted", m)
		}
	}
	c, err := FromLookup(lookup(map[string]string{EnvKMSKeySigners: role("token") + ", " + role("token-b"), EnvKMSKeyManager: role("rotation"), EnvKMSKeyAdmins: role("admin")}))
	if err != nil || len(c.KMSKeySigners) != 2 || c.KMSKeySigners[1] != role("token-b") || c.KMSKeyAdmins[0] != role("admin") {
		t.Fatalf("%+v %v", c.KMSKeySigners, err)
	}
}

// A next key is published keys.DefaultMargin longer than AUTH_JWKS_MAX_AGE before it signs; the
// JWKS endpoint serves a registry up to AUTH_KEY_CACHE_TTL old. A cache lifetime beyond the
// margin would let a verifier hold a key set without the signing key: refused at load, with
// the settings named. Up to the margin, whatever the max-age, is accepted.
func TestFromLookup_RefusesAKeyThatCouldSignBeforeCachesSawIt(t *testing.T) {
	for _, tc := range []struct {
		cache, maxAge string
		ok            bool
	}{
		{"", "", true},
		{"1m", "1h", true},
		{"15m", "5m", true},
		{"15m", "24h", true},
		{"16m", "1h", false},
		{"2h", "1h", false},
		{"1d", "1m", false},
	} {
		env := map[string]string{}
		if tc.cache != "" {
			env[EnvKeyCacheTTL] = tc.cache
		}
		if tc.maxAge != "" {
			env[EnvJWKSMaxAge] = tc.maxAge
		}
		c, err := FromLookup(lookup(env))
		if tc.ok {
			if err != nil {
				t.Errorf("%v: refused: %v", env, err)
			} else if p := c.KeyPolicy(); p.CacheTTL != c.KeyCacheTTL || p.JWKSCacheTTL != c.JWKSMaxAge || p.IDTokenTTL != c.Lifetimes.IDToken {
				t.Errorf("%v: KeyPolicy %+v does not carry the settings", env, p)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), EnvKeyCacheTTL) || !strings.Contains(err.Error(), EnvJWKSMaxAge) {
			t.Errorf("%v: err %v, want a refusal naming %s and %s", env, err, EnvKeyCacheTTL, EnvJWKSMaxAge)
		}
	}
}

// TestFromLookup_IDTokenAlgs: every algorithm by default, the listed ones in their order
// otherwise; unknown, repeated or no algorithms are refused with the variable named.
func TestFromLookup_IDTokenAlgs(t *testing.T) {
	c, err := FromLookup(lookup(nil))
	if err != nil || strings.Join(c.IDTokenAlgs, ",") != "RS256,PS256,ES256" || strings.Join(c.KeyPolicy().Algs, ",") != "RS256,PS256,ES256" {
		t.Fatalf("default algorithms %v, %v", c.IDTokenAlgs, err)
	}
	c, err = FromLookup(lookup(map[string]string{EnvIDTokenAlgs: " ES256 , PS256"}))
	if err != nil || strings.Join(c.IDTokenAlgs, ",") != "ES256,PS256" || strings.Join(c.KeyPolicy().Algs, ",") != "ES256,PS256" {
		t.Fatalf("ES256,PS256: %v, %v", c.IDTokenAlgs, err)
	}
	for _, bad := range []string{"HS256", "RS256,none", "PS256,PS256", ",", "rs256"} {
		if _, err := FromLookup(lookup(map[string]string{EnvIDTokenAlgs: bad})); err == nil || !strings.Contains(err.Error(), EnvIDTokenAlgs) {
			t.Errorf("%s=%q: err %v", EnvIDTokenAlgs, bad, err)
		}
	}
}

// TestFromLookup_PendingCap: the embedded store's cap on pending requests is 64 MiB unless
// AUTH_EMBEDDED_MAX_PENDING_MB says otherwise; zero, negative or non-numbers are refused.
func TestFromLookup_PendingCap(t *testing.T) {
	if c, err := FromLookup(lookup(nil)); err != nil || c.PendingMB != 64 {
		t.Fatalf("default: %d %v, want 64", c.PendingMB, err)
	}
	if c, err := FromLookup(lookup(map[string]string{EnvMaxPendingMB: "16"})); err != nil || c.PendingMB != 16 {
		t.Fatalf("set to 16: %d %v", c.PendingMB, err)
	}
	for _, bad := range []string{"0", "-1", "lots"} {
		if _, err := FromLookup(lookup(map[string]string{EnvMaxPendingMB: bad})); err == nil || !strings.Contains(err.Error(), EnvMaxPendingMB) {
			t.Fatalf("%q: %v, want an error naming %s", bad, err, EnvMaxPendingMB)
		}
	}
}

// TestFromLookup_ReadsMultiRegionSettingsThroughTheLookup: AUTH_KEY_ROTATION and
// AUTH_PEER_REGIONS come from the lookup given, as every other setting does, not from the
// process's environment.
func TestFromLookup_ReadsMultiRegionSettingsThroughTheLookup(t *testing.T) {
	c, err := FromLookup(lookup(map[string]string{EnvKeyRotation: "off", EnvHomeRegion: "eu-west-1", EnvPeerRegions: " eu-central-1 ",
		EnvStore: "dynamodb", EnvTable: "t"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.KeyRotation || len(c.PeerRegions) != 1 || c.PeerRegions[0] != "eu-central-1" {
		t.Fatalf("rotation %v, peers %q: want off and [eu-central-1]", c.KeyRotation, c.PeerRegions)
	}
}

// TestFromLookup_IntrospectionClientsAreTheTrimmedNonEmptyIDs: the resource servers are the
// trimmed, non-empty ids of AUTH_INTROSPECTION_CLIENTS, read through the lookup; none by default.
func TestFromLookup_IntrospectionClientsAreTheTrimmedNonEmptyIDs(t *testing.T) {
	c, err := FromLookup(lookup(map[string]string{EnvIntrospectionClients: " rs1 ,, rs2,"}))
	if err != nil || len(c.IntrospectionClients) != 2 || !c.IntrospectionClients["rs1"] || !c.IntrospectionClients["rs2"] {
		t.Fatalf("got %v, %v; want rs1 and rs2", c.IntrospectionClients, err)
	}
	if c, err := FromLookup(lookup(nil)); err != nil || len(c.IntrospectionClients) != 0 {
		t.Fatalf("default: %v, %v; want none", c.IntrospectionClients, err)
	}
}

// TestFromLookup_RouteScopesParsedOnceAtLoad: AUTH_ROUTE_SCOPES is laid over the default route
// table when the configuration loads; a malformed table, an unknown scope or a bad route key
// fails the load with the variable named.
func TestFromLookup_RouteScopesParsedOnceAtLoad(t *testing.T) {
	c, err := FromLookup(lookup(map[string]string{EnvRouteScopes: `{"GET /v2/bank/accounts":["openid"]}`}))
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := c.RouteScopes.Required("GET /v2/bank/accounts"); !ok || strings.Join(s, " ") != "openid" {
		t.Fatalf("GET /v2/bank/accounts needs %v (%v), want openid", s, ok)
	}
	d, _ := FromLookup(lookup(nil))
	if len(c.RouteScopes) != len(d.RouteScopes) || len(d.RouteScopes) == 0 {
		t.Fatalf("overrides %d routes, defaults %d: the override should replace one entry of the default table", len(c.RouteScopes), len(d.RouteScopes))
	}
	for _, bad := range []string{"{not json", `{"GET /v2/bank/accounts":["no:such:scope"]}`, `{"get accounts":["openid"]}`, `[]`} {
		if _, err := FromLookup(lookup(map[string]string{EnvRouteScopes: bad})); err == nil || !strings.Contains(err.Error(), EnvRouteScopes) {
			t.Errorf("%s=%s: err %v, want a refusal naming it", EnvRouteScopes, bad, err)
		}
	}
}

// TestFromLookup_ClientTokenRoutesAreRoutesOfTheTable: AUTH_CLIENT_TOKEN_ROUTES names routes of
// the route table (the defaults, or one AUTH_ROUTE_SCOPES adds); none by default; a key that is
// not in the table fails the load with the variable named.
func TestFromLookup_ClientTokenRoutesAreRoutesOfTheTable(t *testing.T) {
	if c, err := FromLookup(lookup(nil)); err != nil || len(c.ClientRoutes) != 0 {
		t.Fatalf("default: %v, %v; want none", c.ClientRoutes, err)
	}
	c, err := FromLookup(lookup(map[string]string{EnvRouteScopes: `{"POST /v2/bank/consents":["bank:transfers:write"]}`,
		EnvClientTokenRoutes: "GET /v2/bank/accounts, POST /v2/bank/consents"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.ClientRoutes) != 2 || !c.ClientRoutes["GET /v2/bank/accounts"] || !c.ClientRoutes["POST /v2/bank/consents"] {
		t.Fatalf("client routes %v", c.ClientRoutes)
	}
	for _, bad := range []string{"POST /v2/bank/consents", "accounts", "GET /v2/bank/accounts/"} {
		if _, err := FromLookup(lookup(map[string]string{EnvClientTokenRoutes: bad})); err == nil || !strings.Contains(err.Error(), EnvClientTokenRoutes) {
			t.Errorf("%s=%s: err %v, want a refusal naming it", EnvClientTokenRoutes, bad, err)
		}
	}
}

// TestFromLookup_TLSFilesGoTogether: the local server's certificate and key go together, and
// a client CA needs them; refused at load with the variables named.
func TestFromLookup_TLSFilesGoTogether(t *testing.T) {
	for _, env := range []map[string]string{{EnvTLSCert: "c.pem"}, {EnvTLSKey: "k.pem"}, {EnvClientCA: "ca.pem"}} {
		if _, err := FromLookup(lookup(env)); err == nil || !strings.Contains(err.Error(), EnvTLSCert) {
			t.Errorf("%v: err %v", env, err)
		}
	}
	if _, err := FromLookup(lookup(map[string]string{EnvTLSCert: "c.pem", EnvTLSKey: "k.pem", EnvClientCA: "ca.pem"})); err != nil {
		t.Error(err)
	}
}

// TestFromLookup_DPoPNoncesWithDynamoDBNeedTheWrappingKey: nonce keys kept in DynamoDB are
// KMS-wrapped only, so AUTH_DPOP_NONCES=on with the DynamoDB store and no AUTH_KMS_DATA_KEY is
// refused; the embedded store (the local server) needs none.
func TestFromLookup_DPoPNoncesWithDynamoDBNeedTheWrappingKey(t *testing.T) {
	dynamo := map[string]string{EnvDPoPNonces: "on", EnvStore: "dynamodb", EnvTable: "t"}
	if _, err := FromLookup(lookup(dynamo)); err == nil || !strings.Contains(err.Error(), EnvKMSDataKey) {
		t.Fatalf("nonces on DynamoDB without the wrapping key: %v, want an error naming %s", err, EnvKMSDataKey)
	}
	dynamo[EnvKMSDataKey] = "alias/wrap"
	if c, err := FromLookup(lookup(dynamo)); err != nil || !c.DPoPNonces {
		t.Fatalf("nonces on DynamoDB with the wrapping key: %v %v", c.DPoPNonces, err)
	}
	if c, err := FromLookup(lookup(map[string]string{EnvDPoPNonces: "on"})); err != nil || !c.DPoPNonces {
		t.Fatalf("nonces on the embedded store: %v %v", c.DPoPNonces, err)
	}
}

// TestPaymentTokenTTL_IsMinutesWithinItsBounds: the payment access token's lifetime defaults
// to 5 minutes, takes a value from 1m to 15m, and refuses one outside (a start error, not a
// silent clamp).
func TestPaymentTokenTTL_IsMinutesWithinItsBounds(t *testing.T) {
	if d := Defaults().Lifetimes.PaymentAccessToken; d != 5*time.Minute {
		t.Errorf("default %s, want 5m", d)
	}
	c, err := FromLookup(lookup(map[string]string{EnvPaymentTTL: "2m"}))
	if err != nil || c.Lifetimes.PaymentAccessToken != 2*time.Minute {
		t.Errorf("2m: %v %v", c.Lifetimes.PaymentAccessToken, err)
	}
	for _, v := range []string{"30s", "16m", "1h", "soon", "-5m"} {
		if _, err := FromLookup(lookup(map[string]string{EnvPaymentTTL: v})); err == nil || !strings.Contains(err.Error(), EnvPaymentTTL) {
			t.Errorf("%s=%s: err %v, want a refusal naming it", EnvPaymentTTL, v, err)
		}
	}
}

// TestPaymentFactors_PasskeyByDefaultTOTPOnlyWhenSaid: a payment is authorized by a passkey
// unless the deployment lists totp too (or alone); anything else is a start error.
func TestPaymentFactors_PasskeyByDefaultTOTPOnlyWhenSaid(t *testing.T) {
	if f := Defaults().PaymentFactors; !slices.Equal(f, []string{"passkey"}) {
		t.Errorf("default %v, want [passkey]", f)
	}
	for v, want := range map[string][]string{"totp": {"totp"}, "passkey, totp": {"passkey", "totp"}, "totp,passkey": {"totp", "passkey"}} {
		c, err := FromLookup(lookup(map[string]string{EnvPaymentFactors: v}))
		if err != nil || !slices.Equal(c.PaymentFactors, want) {
			t.Errorf("%q: %v %v, want %v", v, c.PaymentFactors, err, want)
		}
	}
	for _, v := range []string{"password", "passkey,passkey", "passkey,", "sms", "recovery"} {
		if _, err := FromLookup(lookup(map[string]string{EnvPaymentFactors: v})); err == nil || !strings.Contains(err.Error(), EnvPaymentFactors) {
			t.Errorf("%s=%s: err %v, want a refusal naming it", EnvPaymentFactors, v, err)
		}
	}
}
