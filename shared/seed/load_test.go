package seed

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// TestLoad_IdempotentAndPasswordChanges: loading a file twice keeps the stored password hash
// openStore opens an embedded store in a temporary directory, closed when the test ends.
func openStore(t *testing.T) *embedded.Store {
	t.Helper()
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// (no re-hash), and a changed password is hashed anew and verifies.
func TestLoad_IdempotentAndPasswordChanges(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	h := authn.PasswordHasher{Time: 1, MemoryKiB: 64, Threads: 1}
	f := &File{Users: []User{{UID: "u1", Username: "Alice", Password: "first-password-123"}}}
	load := func() oauth.User {
		t.Helper()
		if _, err := Load(ctx, st, f, h, time.Now()); err != nil {
			t.Fatal(err)
		}
		u, err := st.GetUser(ctx, "u1")
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	first := load()
	if first.Username != "alice" {
		t.Fatalf("username %q was not normalised", first.Username)
	}
	if again := load(); again.PasswordHash != first.PasswordHash {
		t.Fatal("reloading an unchanged password re-hashed it")
	}
	f.Users[0].Password = "second-password-456"
	changed := load()
	if ok, _ := h.Verify("second-password-456", changed.PasswordHash); !ok {
		t.Fatal("the changed password does not verify")
	}
	if ok, _ := h.Verify("first-password-123", changed.PasswordHash); ok {
		t.Fatal("the old password still verifies")
	}
}

// TestLoad_RefreshReuseInterval: a seed client's refresh_reuse_interval_seconds is stored as its
// retry window, absent is off, and more than 60 is refused when the file is parsed.
func TestLoad_RefreshReuseInterval(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	f, err := Parse([]byte(`{"clients":[
		{"client_id":"retry","client_secret":"0123456789abcdef0123456789abcdef","name":"Retry",
		 "redirect_uris":["https://retry.example/cb"],"scopes":["openid"],"refresh_reuse_interval_seconds":20},
		{"client_id":"plain","client_secret":"0123456789abcdef0123456789abcdef","name":"Plain",
		 "redirect_uris":["https://plain.example/cb"],"scopes":["openid"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ctx, st, f, authn.PasswordHasher{Time: 1, MemoryKiB: 64, Threads: 1}, time.Now()); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]time.Duration{"retry": 20 * time.Second, "plain": 0} {
		if c, err := st.GetClient(ctx, id); err != nil || c.RefreshReuseInterval != want {
			t.Errorf("client %s: window %v (%v), want %v", id, c.RefreshReuseInterval, err, want)
		}
	}
	if _, err := Parse([]byte(`{"clients":[{"client_id":"big","client_secret":"0123456789abcdef0123456789abcdef","name":"Big",
		"redirect_uris":["https://big.example/cb"],"scopes":["openid"],"refresh_reuse_interval_seconds":61}]}`)); err == nil {
		t.Error("a 61-second window was accepted")
	}
}

// TestLoad_IDTokenSignedResponseAlg: the seed field reaches the stored client; an unsupported
// algorithm fails Parse, and one the deployment has no keys for fails CheckIDTokenAlgs.
func TestLoad_IDTokenSignedResponseAlg(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	client := func(id, alg string) string {
		return `{"client_id":"` + id + `","client_secret":"0123456789abcdef0123456789abcdef","name":"N",
		 "redirect_uris":["https://x.example/cb"],"scopes":["openid"]` + alg + `}`
	}
	f, err := Parse([]byte(`{"clients":[` + client("fapi", `,"id_token_signed_response_alg":"PS256"`) + `,` + client("plain", "") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CheckIDTokenAlgs([]string{"RS256", "PS256"}); err != nil {
		t.Fatal(err)
	}
	if err := f.CheckIDTokenAlgs([]string{"RS256", "ES256"}); err == nil || !strings.Contains(err.Error(), "fapi") {
		t.Fatalf("PS256 client where PS256 has no keys: %v", err)
	}
	if _, err := Load(ctx, st, f, authn.PasswordHasher{Time: 1, MemoryKiB: 64, Threads: 1}, time.Now()); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"fapi": "PS256", "plain": ""} {
		if c, err := st.GetClient(ctx, id); err != nil || c.IDTokenSignedResponseAlg != want {
			t.Errorf("client %s: alg %q (%v), want %q", id, c.IDTokenSignedResponseAlg, err, want)
		}
	}
	if _, err := Parse([]byte(`{"clients":[` + client("bad", `,"id_token_signed_response_alg":"HS256"`) + `]}`)); err == nil {
		t.Error("an HS256 client was accepted")
	}
}

// TestLoad_ProfileFAPI2IncompleteIsRefused: a seed client under the fapi2 profile that misses
// its rules is refused before anything is stored, and an unknown profile when the file is parsed.
func TestLoad_ProfileFAPI2IncompleteIsRefused(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	f, err := Parse([]byte(`{"clients":[{"client_id":"tpp","client_secret":"0123456789abcdef0123456789abcdef","name":"TPP",
		"redirect_uris":["https://tpp.example/cb"],"scopes":["openid"],"profile":"fapi2"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ctx, st, f, authn.PasswordHasher{Time: 1, MemoryKiB: 64, Threads: 1}, time.Now()); err == nil {
		t.Fatal("an incomplete fapi2 client was loaded")
	}
	if _, err := st.GetClient(ctx, "tpp"); err != oauth.ErrNotFound {
		t.Fatalf("the refused client: %v, want not found", err)
	}
	if _, err := Parse([]byte(`{"clients":[{"client_id":"tpp","client_secret":"0123456789abcdef0123456789abcdef","name":"TPP",
		"redirect_uris":["https://tpp.example/cb"],"scopes":["openid"],"profile":"FAPI2"}]}`)); err == nil {
		t.Fatal("an unknown profile was accepted")
	}
}

// TestLoad_PrivateKeyJWTClientWithDPoP: a seed client with token_endpoint_auth_method
// private_key_jwt, its jwks, no client_secret and dpop_bound_access_tokens is stored with no
// secret hash and the keys; a private_key_jwt client with a secret, or without keys, is refused.
func TestLoad_PrivateKeyJWTClientWithDPoP(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	const jwks = `{"keys":[{"kty":"EC","crv":"P-256","kid":"k1","use":"sig",
		"x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}`
	f, err := Parse([]byte(`{"clients":[{"client_id":"tpp","name":"TPP","redirect_uris":["https://tpp.example/cb"],"scopes":["openid"],
		"profile":"fapi2","require_pkce":true,"require_pushed_authorization_requests":true,"dpop_bound_access_tokens":true,
		"token_endpoint_auth_method":"private_key_jwt","jwks":` + jwks + `,"id_token_signed_response_alg":"ES256",
		"refresh_reuse_interval_seconds":30}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ctx, st, f, authn.PasswordHasher{Time: 1, MemoryKiB: 64, Threads: 1}, time.Now()); err != nil {
		t.Fatal(err)
	}
	c, err := st.GetClient(ctx, "tpp")
	if err != nil {
		t.Fatal(err)
	}
	if !c.UsesPrivateKeyJWT() || !c.DPoPBoundAccessTokens || len(c.SecretHashes) != 0 || oauth.ValidClientJWKS(c.JWKS) != nil {
		t.Fatalf("stored %+v", c)
	}
	for name, doc := range map[string]string{
		"a secret too": `{"clients":[{"client_id":"x","client_secret":"0123456789abcdef0123456789abcdef","name":"X","redirect_uris":["https://x.example/cb"],
			"scopes":["openid"],"token_endpoint_auth_method":"private_key_jwt","jwks":` + jwks + `}]}`,
		"no keys": `{"clients":[{"client_id":"x","name":"X","redirect_uris":["https://x.example/cb"],"scopes":["openid"],
			"token_endpoint_auth_method":"private_key_jwt"}]}`,
	} {
		if _, err := Parse([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestLoad_FAPI2ClientImpliesPARAndDoesNotRotate: a fapi2 seed client without
// require_pushed_authorization_requests or a retry window loads, stored with PAR on
// (FAPI 2.0 5.3.2.2) and refresh tokens that do not rotate (5.3.2.1); one that opts into
// rotation without a window is refused and stores nothing.
func TestLoad_FAPI2ClientImpliesPARAndDoesNotRotate(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	entry := func(id, extra string) []byte {
		return []byte(`{"clients":[{"client_id":"` + id + `","name":"TPP","redirect_uris":["https://tpp.example/cb"],"scopes":["openid"],
		"profile":"fapi2","require_pkce":true,"dpop_bound_access_tokens":true,
		"token_endpoint_auth_method":"private_key_jwt","jwks":{"keys":[{"kty":"EC","crv":"P-256","kid":"k1","use":"sig",
		"x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]},
		"id_token_signed_response_alg":"ES256"` + extra + `}]}`)
	}
	hasher := authn.PasswordHasher{Time: 1, MemoryKiB: 64, Threads: 1}
	f, err := Parse(entry("tpp", ""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ctx, st, f, hasher, time.Now()); err != nil {
		t.Fatal(err)
	}
	c, err := st.GetClient(ctx, "tpp")
	if err != nil || !c.RequirePAR || c.RotatesRefreshTokens() {
		t.Fatalf("stored PAR %v, rotates %v (%v); want PAR on, no rotation", c.RequirePAR, c.RotatesRefreshTokens(), err)
	}
	f, err = Parse(entry("rotating", `,"refresh_token_rotation":"on"`))
	if err == nil {
		_, err = Load(ctx, st, f, hasher, time.Now())
	}
	if err == nil || !strings.Contains(err.Error(), "refresh reuse interval") {
		t.Fatalf("rotation without a window: %v", err)
	}
	if _, err := st.GetClient(ctx, "rotating"); !errors.Is(err, oauth.ErrNotFound) {
		t.Fatalf("the refused client was stored: %v", err)
	}
}

// TestLoad_AuthorizationDetailsTypes: the seed's authorization_details_types reach the stored
// client; a type the deployment does not declare fails Parse.
func TestLoad_AuthorizationDetailsTypes(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	f, err := Parse([]byte(`{"clients":[{"client_id":"tpp","client_secret":"0123456789abcdef0123456789abcdef","name":"TPP",
		"redirect_uris":["https://tpp.example/cb"],"scopes":["openid"],"authorization_details_types":["payment_initiation"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ctx, st, f, authn.PasswordHasher{Time: 1, MemoryKiB: 64, Threads: 1}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if c, err := st.GetClient(ctx, "tpp"); err != nil || strings.Join(c.AuthorizationDetailsTypes, " ") != "payment_initiation" {
		t.Errorf("stored types %v (%v), want payment_initiation", c.AuthorizationDetailsTypes, err)
	}
	if _, err := Parse([]byte(`{"clients":[{"client_id":"tpp","client_secret":"0123456789abcdef0123456789abcdef","name":"TPP",
		"redirect_uris":["https://tpp.example/cb"],"scopes":["openid"],"authorization_details_types":["payments"]}]}`)); err == nil ||
		!strings.Contains(err.Error(), "authorization_details_types") {
		t.Errorf("an unknown type: %v, want refused", err)
	}
}

// TestLoad_GrantTypes: the seed's grant_types reach the stored client; a grant type the token
// endpoint does not serve fails Parse.
func TestLoad_GrantTypes(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	f, err := Parse([]byte(`{"clients":[{"client_id":"m2m","client_secret":"0123456789abcdef0123456789abcdef","name":"M2M",
		"redirect_uris":["https://m2m.example/cb"],"scopes":["bank:transfers:write"],"grant_types":["client_credentials"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ctx, st, f, authn.PasswordHasher{Time: 1, MemoryKiB: 64, Threads: 1}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if c, err := st.GetClient(ctx, "m2m"); err != nil || strings.Join(c.GrantTypes, " ") != "client_credentials" {
		t.Errorf("stored grant types %v (%v), want client_credentials", c.GrantTypes, err)
	}
	if _, err := Parse([]byte(`{"clients":[{"client_id":"m2m","client_secret":"0123456789abcdef0123456789abcdef","name":"M2M",
		"redirect_uris":["https://m2m.example/cb"],"scopes":["openid"],"grant_types":["password"]}]}`)); err == nil ||
		!strings.Contains(err.Error(), "grant_types") {
		t.Errorf("an unknown grant type: %v, want refused", err)
	}
}

// TestLoad_BackchannelSettings: a seed's CIBA settings reach the stored client; a ping client
// without an https notification endpoint is refused and nothing of it is stored.
func TestLoad_BackchannelSettings(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	hasher := authn.PasswordHasher{Time: 1, MemoryKiB: 64, Threads: 1}
	f, err := Parse([]byte(`{"clients":[{"client_id":"pinged","client_secret":"0123456789abcdef0123456789abcdef","name":"Pinged",
		"scopes":["openid"],"grant_types":["urn:openid:params:grant-type:ciba"],
		"backchannel_token_delivery_mode":"ping","backchannel_client_notification_endpoint":"https://tpp.example/cb"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ctx, st, f, hasher, time.Now()); err != nil {
		t.Fatal(err)
	}
	c, err := st.GetClient(ctx, "pinged")
	if err != nil || c.BackchannelTokenDeliveryMode != "ping" || c.BackchannelClientNotificationEndpoint != "https://tpp.example/cb" {
		t.Fatalf("stored client %+v (%v)", c, err)
	}
	f, err = Parse([]byte(`{"clients":[{"client_id":"bad-ping","client_secret":"0123456789abcdef0123456789abcdef","name":"Bad",
		"scopes":["openid"],"grant_types":["urn:openid:params:grant-type:ciba"],
		"backchannel_token_delivery_mode":"ping","backchannel_client_notification_endpoint":"http://tpp.example/cb"}]}`))
	if err == nil {
		_, err = Load(ctx, st, f, hasher, time.Now())
	}
	if err == nil || !strings.Contains(err.Error(), "backchannel_client_notification_endpoint") {
		t.Fatalf("a ping client with an http endpoint: %v, want refused", err)
	}
	if _, err := st.GetClient(ctx, "bad-ping"); err == nil {
		t.Fatal("the refused client was stored")
	}
}
