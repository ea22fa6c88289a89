package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/acmebank/authserver/shared/admin"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
)

const regDirectory = "https://directory.example"

// regEnv is a service with dynamic registration on, trusting one directory whose key it holds.
type regEnv struct {
	*env
	dirKey *ecdsa.PrivateKey
}

func newRegEnv(t *testing.T, profile string) *regEnv {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: k.Public(), KeyID: "dir-1", Algorithm: "ES256", Use: "sig"}}})
	dirs, _ := json.Marshal([]config.Directory{{Issuer: regDirectory, JWKS: set, Profile: profile}})
	e := newEnvFrom(t, envSetup{vars: map[string]string{config.EnvRegistration: "on", config.EnvRegistrationDirectories: string(dirs)}})
	e.app.Audit = e.app.Service.Audit // the audit lines, kept with the logs
	e.serve()
	return &regEnv{env: e, dirKey: k}
}

// initialAccessToken issues a token as authctl does.
func (e *regEnv) initialAccessToken(profile string) string {
	e.t.Helper()
	tok, _, err := admin.New(e.app.Store, cheapHasher, e.clock, nil).CreateInitialAccessToken(context.Background(), time.Hour, profile, "")
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

// statement signs claims as the directory (with key, else the directory's own).
func (e *regEnv) statement(claims map[string]any, key any) string {
	e.t.Helper()
	if key == nil {
		key = e.dirKey
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "dir-1"))
	if err != nil {
		e.t.Fatal(err)
	}
	out, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// call sends a registration request (body marshalled unless it is []byte) and returns the
// status, the decoded JSON answer and the headers.
func (e *regEnv) call(method, path, token string, body any) (int, map[string]any, http.Header) {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, e.url(path), rd)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			e.t.Fatalf("%s %s: %d %q is not JSON", method, path, resp.StatusCode, raw)
		}
	}
	return resp.StatusCode, out, resp.Header
}

// clients is the number of clients stored.
func (e *regEnv) clients() int {
	e.t.Helper()
	list, err := e.app.Store.ListClients(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return len(list)
}

// webClient is the metadata of a secret-based web client.
func webClient() map[string]any {
	return map[string]any{"client_name": "TPP Web", "redirect_uris": []string{"https://tpp.example/cb"}, "scope": "openid email",
		"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"}, "software_id": "tpp-web"}
}

// TestRegistration_InitialAccessTokenRegistersAClientThatAuthenticatesAndManagesItself: a
// registration with an operator's initial access token answers RFC 7591 3.2.1's response;
// its client_secret authenticates at the revocation endpoint; its registration access token
// reads, replaces and deletes it (RFC 7592), and the token is spent: a second registration
// with it is 401.
func TestRegistration_InitialAccessTokenRegistersAClientThatAuthenticatesAndManagesItself(t *testing.T) {
	e := newRegEnv(t, "")
	iat := e.initialAccessToken("")
	status, out, _ := e.call("POST", httpapi.PathRegister, iat, webClient())
	if status != http.StatusCreated {
		t.Fatalf("register: %d %v", status, out)
	}
	id, _ := out["client_id"].(string)
	secret, _ := out["client_secret"].(string)
	rat, _ := out["registration_access_token"].(string)
	if !strings.HasPrefix(id, oauth.PrefixClientID) || !strings.HasPrefix(secret, oauth.PrefixSecret) || !strings.HasPrefix(rat, oauth.PrefixRegistrationAccess) {
		t.Fatalf("answer %v: want a generated client_id, a secret and a registration access token", out)
	}
	if out["registration_client_uri"] != e.url(httpapi.PathRegister+"/"+id) || out["client_secret_expires_at"] != 0.0 ||
		out["client_id_issued_at"] == nil || out["client_name"] != "TPP Web" || out["scope"] != "openid email" ||
		out["token_endpoint_auth_method"] != "client_secret_basic" || out["software_id"] != "tpp-web" {
		t.Fatalf("answer %v: want RFC 7591 3.2.1's members as registered", out)
	}
	// The secret authenticates the client (RFC 7009: 200 for an unknown token).
	req, _ := http.NewRequest("POST", e.url(httpapi.PathRevoke), strings.NewReader("token=unknown"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(id, secret)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke as the registered client: %v %v, want 200", resp, err)
	}
	if status, out, _ := e.call("POST", httpapi.PathRegister, iat, webClient()); status != http.StatusUnauthorized || out["error"] != "invalid_token" {
		t.Fatalf("second registration with the token: %d %v, want 401 invalid_token", status, out)
	}

	uri := httpapi.PathRegister + "/" + id
	status, read, _ := e.call("GET", uri, rat, nil)
	if status != http.StatusOK || read["client_id"] != id || read["client_name"] != "TPP Web" || read["client_secret"] != nil || read["registration_access_token"] != nil {
		t.Fatalf("read: %d %v, want the metadata without secrets", status, read)
	}
	replace := webClient()
	replace["client_id"] = id
	replace["client_name"] = "TPP Web 2"
	if status, out, _ := e.call("PUT", uri, rat, replace); status != http.StatusOK || out["client_name"] != "TPP Web 2" || out["client_secret"] != nil {
		t.Fatalf("replace: %d %v", status, out)
	}
	if c, err := e.app.Store.GetClient(context.Background(), id); err != nil || c.Name != "TPP Web 2" || !c.VerifySecret(secret, time.Now()) {
		t.Fatalf("stored after replace: %+v %v, want the new name and the same secret", c, err)
	}
	if status, _, _ := e.call("DELETE", uri, rat, nil); status != http.StatusNoContent {
		t.Fatalf("delete: %d", status)
	}
	if _, err := e.app.Store.GetClient(context.Background(), id); err == nil {
		t.Fatal("the client is still stored after its delete")
	}
	if status, _, _ := e.call("GET", uri, rat, nil); status != http.StatusUnauthorized {
		t.Fatalf("read after delete: %d, want 401", status)
	}
	for _, ev := range []string{"client_registered", "client_updated", "client_deleted"} {
		if !strings.Contains(e.logs.String(), `"event":"`+ev+`"`) {
			t.Errorf("no %s audit line", ev)
		}
	}
	for _, secretValue := range []string{iat, secret, rat} {
		if strings.Contains(e.logs.String(), secretValue) {
			t.Errorf("a token or secret reached the logs")
		}
	}
}

// TestRegistration_ManagementRefusesAnotherClientsTokenAndWritesNothing: a registration
// access token of one client, a wrong one, none, or one presented for an operator's client
// (which has none) is 401 invalid_token with the Bearer challenge, for GET, PUT and DELETE, and
// the client is unchanged.
func TestRegistration_ManagementRefusesAnotherClientsTokenAndWritesNothing(t *testing.T) {
	e := newRegEnv(t, "")
	_, a, _ := e.call("POST", httpapi.PathRegister, e.initialAccessToken(""), webClient())
	_, b, _ := e.call("POST", httpapi.PathRegister, e.initialAccessToken(""), webClient())
	idA, ratB := a["client_id"].(string), b["registration_access_token"].(string)
	before, _ := e.app.Store.GetClient(context.Background(), idA)
	replace := webClient()
	replace["client_id"] = idA
	replace["client_name"] = "Hijacked"
	for _, tc := range []struct{ name, id, token string }{
		{"another client's token", idA, ratB},
		{"a wrong token", idA, oauth.NewSecret(oauth.PrefixRegistrationAccess)},
		{"no token", idA, ""},
		{"an operator's client", clientID, ratB},
		{"an unknown client", "cl_unknown", ratB},
	} {
		for _, m := range []string{"GET", "PUT", "DELETE"} {
			var body any
			if m == "PUT" {
				body = replace
			}
			status, out, h := e.call(m, httpapi.PathRegister+"/"+tc.id, tc.token, body)
			if status != http.StatusUnauthorized || out["error"] != "invalid_token" || !strings.Contains(h.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s %s: %d %v %q, want 401 invalid_token with the Bearer challenge", tc.name, m, status, out, h.Get("WWW-Authenticate"))
			}
		}
	}
	after, err := e.app.Store.GetClient(context.Background(), idA)
	if err != nil || after.Name != before.Name || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("client after refused requests: %+v %v, want it unchanged", after, err)
	}
	if _, err := e.app.Store.GetClient(context.Background(), clientID); err != nil {
		t.Fatalf("the operator's client: %v", err)
	}
}

// TestRegistration_WithoutTokenOrStatementIsRefusedAndStoresNothing: RFC 7591 3's protected
// registration: with neither an initial access token nor a software statement, 401
// invalid_token with the challenge; with an unknown token, the same. No client is stored.
func TestRegistration_WithoutTokenOrStatementIsRefusedAndStoresNothing(t *testing.T) {
	e := newRegEnv(t, "")
	n := e.clients()
	bad := webClient()
	bad["redirect_uris"] = []string{"javascript:alert(1)"} // metadata errors are not told before authorization
	badWithJWKSURI := webClient()
	badWithJWKSURI["redirect_uris"], badWithJWKSURI["token_endpoint_auth_method"], badWithJWKSURI["jwks_uri"] = []string{"javascript:alert(1)"}, "private_key_jwt", "https://tpp.example/jwks"
	for _, tc := range []struct {
		token string
		body  any
	}{{"", webClient()}, {"", bad}, {"", []byte("not json")}, {oauth.NewSecret(oauth.PrefixInitialAccess), webClient()}, {"not-a-token", webClient()},
		// A made-up token: refused before its metadata are read (nothing of them, such as a
		// jwks_uri to fetch, is acted on), so its bad redirect URI is not what it is told.
		{oauth.NewSecret(oauth.PrefixInitialAccess), bad}, {oauth.NewSecret(oauth.PrefixInitialAccess), badWithJWKSURI}} {
		token := tc.token
		status, out, h := e.call("POST", httpapi.PathRegister, token, tc.body)
		if status != http.StatusUnauthorized || out["error"] != "invalid_token" || !strings.Contains(h.Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Errorf("token %q: %d %v, want 401 invalid_token", token, status, out)
		}
	}
	if e.clients() != n {
		t.Fatalf("%d clients stored, want %d", e.clients(), n)
	}
	if !strings.Contains(e.logs.String(), `"event":"registration_refused"`) {
		t.Error("no registration_refused audit line")
	}
}

// TestRegistration_RacingRegistrationsWithOneTokenRegisterOneClient: 50 registrations race
// with one single-use initial access token: exactly one is 201, the others 401, and the store
// holds one client more.
func TestRegistration_RacingRegistrationsWithOneTokenRegisterOneClient(t *testing.T) {
	e := newRegEnv(t, "")
	iat := e.initialAccessToken("")
	n := e.clients()
	const racers = 50
	statuses := make([]int, racers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			statuses[i], _, _ = e.call("POST", httpapi.PathRegister, iat, webClient())
		}()
	}
	close(start)
	wg.Wait()
	won := 0
	for _, s := range statuses {
		switch s {
		case http.StatusCreated:
			won++
		case http.StatusUnauthorized:
		default:
			t.Errorf("status %d, want 201 or 401", s)
		}
	}
	if won != 1 || e.clients() != n+1 {
		t.Fatalf("%d registrations won and %d clients were added, want 1 and 1", won, e.clients()-n)
	}
}

// jwksOf is a JWK Set of n fresh public P-256 keys (with the private half when private).
func jwksOf(t *testing.T, n int, private bool) json.RawMessage {
	t.Helper()
	var set jose.JSONWebKeySet
	for i := range n {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		var key any = k.Public()
		if private {
			key = k
		}
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: key, KeyID: fmt.Sprintf("k%d", i), Use: "sig", Algorithm: "ES256"})
	}
	b, _ := json.Marshal(set)
	return b
}

// fapiClient is the metadata of a FAPI 2.0 client: private_key_jwt with its keys, DPoP, PS256.
func fapiMetadata(t *testing.T) map[string]any {
	return map[string]any{"client_name": "TPP FAPI", "redirect_uris": []string{"https://tpp.example/cb"}, "scope": "openid",
		"token_endpoint_auth_method": "private_key_jwt", "jwks": jwksOf(t, 1, false), "dpop_bound_access_tokens": true,
		"id_token_signed_response_alg": "PS256", "require_pushed_authorization_requests": true}
}

// TestRegistration_HostileMetadataIsRefusedAndSpendsNothing: each hostile registration gets
// RFC 7591 3.2.2's error, stores no client, and leaves the initial access token it came with
// unspent (the next, valid, registration with it succeeds).
func TestRegistration_HostileMetadataIsRefusedAndSpendsNothing(t *testing.T) {
	e := newRegEnv(t, "")
	with := func(base map[string]any, k string, v any) map[string]any {
		base[k] = v
		return base
	}
	for _, tc := range []struct {
		name    string
		profile string
		body    any
		want    string
	}{
		{"http redirect URI", "", with(webClient(), "redirect_uris", []string{"http://tpp.example/cb"}), "invalid_redirect_uri"},
		{"redirect URI with a fragment", "", with(webClient(), "redirect_uris", []string{"https://tpp.example/cb#frag"}), "invalid_redirect_uri"},
		{"loopback redirect URI for fapi2", oauth.ProfileFAPI2, with(fapiMetadata(t), "redirect_uris", []string{"http://127.0.0.1:8080/cb"}), "invalid_redirect_uri"},
		{"localhost redirect URI", "", with(webClient(), "redirect_uris", []string{"http://localhost/cb"}), "invalid_redirect_uri"},
		{"javascript redirect URI", "", with(webClient(), "redirect_uris", []string{"javascript:alert(1)"}), "invalid_redirect_uri"},
		{"wildcard redirect URI", "", with(webClient(), "redirect_uris", []string{"https://*.tpp.example/cb"}), "invalid_redirect_uri"},
		{"custom scheme redirect URI", "", with(webClient(), "redirect_uris", []string{"com.tpp.app:/cb"}), "invalid_redirect_uri"},
		{"no redirect URI", "", with(webClient(), "redirect_uris", []string{}), "invalid_redirect_uri"},
		{"redirect_uris not an array", "", with(webClient(), "redirect_uris", "https://tpp.example/cb"), "invalid_redirect_uri"},
		{"jwks of 11 keys", "", with(fapiMetadata(t), "jwks", jwksOf(t, 11, false)), "invalid_client_metadata"},
		{"jwks with a private key", "", with(fapiMetadata(t), "jwks", jwksOf(t, 1, true)), "invalid_client_metadata"},
		{"jwks and jwks_uri", "", with(fapiMetadata(t), "jwks_uri", "https://tpp.example/jwks"), "invalid_client_metadata"},
		{"unknown scope", "", with(webClient(), "scope", "openid admin"), "invalid_client_metadata"},
		{"implicit grant", "", with(webClient(), "grant_types", []string{"implicit"}), "invalid_client_metadata"},
		{"token response type", "", with(webClient(), "response_types", []string{"token"}), "invalid_client_metadata"},
		{"client_secret_jwt", "", with(webClient(), "token_endpoint_auth_method", "client_secret_jwt"), "invalid_client_metadata"},
		{"none auth method", "", with(webClient(), "token_endpoint_auth_method", "none"), "invalid_client_metadata"},
		{"RS256 id_token for fapi2", oauth.ProfileFAPI2, with(fapiMetadata(t), "id_token_signed_response_alg", "RS256"), "invalid_client_metadata"},
		{"secret client for fapi2", oauth.ProfileFAPI2, webClient(), "invalid_client_metadata"},
		{"http logo", "", with(webClient(), "logo_uri", "http://tpp.example/logo.png"), "invalid_client_metadata"},
		{"name too long", "", with(webClient(), "client_name", strings.Repeat("n", 201)), "invalid_client_metadata"},
		{"a member given twice", "", []byte(`{"client_name":"A","client_name":"B","redirect_uris":["https://tpp.example/cb"],"scope":"openid"}`), "invalid_client_metadata"},
		{"not an object", "", []byte(`["https://tpp.example/cb"]`), "invalid_client_metadata"},
		{"oversized body", "", with(webClient(), "padding", strings.Repeat("x", httpapi.MaxRegistrationBodyBytes)), "invalid_client_metadata"},
		{"software statement of alg none", "", with(webClient(), "software_statement", "eyJhbGciOiJub25lIn0.eyJpc3MiOiJodHRwczovL2RpcmVjdG9yeS5leGFtcGxlIn0."), "invalid_software_statement"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			iat := e.initialAccessToken(tc.profile)
			n := e.clients()
			status, out, _ := e.call("POST", httpapi.PathRegister, iat, tc.body)
			if status != http.StatusBadRequest || out["error"] != tc.want {
				t.Fatalf("%d %v, want 400 %s", status, out, tc.want)
			}
			if e.clients() != n {
				t.Fatal("a refused registration stored a client")
			}
			valid := webClient()
			if tc.profile == oauth.ProfileFAPI2 {
				valid = fapiMetadata(t)
			}
			if status, out, _ := e.call("POST", httpapi.PathRegister, iat, valid); status != http.StatusCreated {
				t.Fatalf("the token after the refusal: %d %v, want it unspent", status, out)
			}
		})
	}
}

// TestRegistration_UnknownMetadataIsIgnored: RFC 7591 2: metadata the server does not
// understand is ignored: the registration succeeds, and the member is neither stored nor
// answered.
func TestRegistration_UnknownMetadataIsIgnored(t *testing.T) {
	e := newRegEnv(t, "")
	body := webClient()
	body["x_tracking"] = "<script>alert(1)</script>"
	body["client_secret"] = "chosen-by-the-caller"
	status, out, _ := e.call("POST", httpapi.PathRegister, e.initialAccessToken(""), body)
	if status != http.StatusCreated || out["x_tracking"] != nil || out["client_secret"] == "chosen-by-the-caller" {
		t.Fatalf("%d %v, want 201 without the unknown member and with a secret of the server's", status, out)
	}
	c, _ := e.app.Store.GetClient(context.Background(), out["client_id"].(string))
	raw, _ := json.Marshal(c)
	if strings.Contains(string(raw), "x_tracking") || strings.Contains(string(raw), "script") {
		t.Fatalf("stored client %s holds the unknown member", raw)
	}
}

// TestRegistration_FAPI2TokenRegistersAFAPI2Client: a token issued with --profile fapi2
// registers a client held to the profile (PAR, PKCE, DPoP, private_key_jwt, PS256), answered
// with no secret.
func TestRegistration_FAPI2TokenRegistersAFAPI2Client(t *testing.T) {
	e := newRegEnv(t, "")
	status, out, _ := e.call("POST", httpapi.PathRegister, e.initialAccessToken(oauth.ProfileFAPI2), fapiMetadata(t))
	if status != http.StatusCreated || out["client_secret"] != nil || out["token_endpoint_auth_method"] != "private_key_jwt" {
		t.Fatalf("%d %v", status, out)
	}
	c, err := e.app.Store.GetClient(context.Background(), out["client_id"].(string))
	if err != nil || !c.IsFAPI2() || !c.RequirePAR || !c.RequirePKCE || len(c.SecretHashes) != 0 {
		t.Fatalf("stored %+v %v, want a fapi2 client with PAR and PKCE and no secret", c, err)
	}
}

// TestRegistration_SoftwareStatementClaimsTakePrecedence: a registration with a statement of
// a trusted directory and no initial access token succeeds; the statement's claims replace
// the request's (RFC 7591 2.3): the name, the redirect URIs and the software_id registered
// are the directory's; the statement is answered unmodified.
func TestRegistration_SoftwareStatementClaimsTakePrecedence(t *testing.T) {
	e := newRegEnv(t, "")
	now := e.clock.Now()
	ssa := e.statement(map[string]any{"iss": regDirectory, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		"software_id": "dir-sw-1", "client_name": "Vouched App", "redirect_uris": []string{"https://vouched.example/cb"}}, nil)
	body := webClient()
	body["client_name"] = "Evil App"
	body["redirect_uris"] = []string{"https://evil.example/cb"}
	body["software_id"] = "evil"
	body["software_statement"] = ssa
	status, out, _ := e.call("POST", httpapi.PathRegister, "", body)
	if status != http.StatusCreated {
		t.Fatalf("%d %v", status, out)
	}
	c, err := e.app.Store.GetClient(context.Background(), out["client_id"].(string))
	if err != nil || c.Name != "Vouched App" || c.SoftwareID != "dir-sw-1" || len(c.RedirectURIs) != 1 || c.RedirectURIs[0] != "https://vouched.example/cb" ||
		c.Directory != regDirectory || out["software_statement"] != ssa {
		t.Fatalf("stored %+v %v, answer %v: want the statement's metadata", c, err, out)
	}
	// A replacement cannot undo what the statement vouched for.
	rat := out["registration_access_token"].(string)
	body["client_id"] = c.ID
	delete(body, "software_statement")
	if status, out, _ := e.call("PUT", httpapi.PathRegister+"/"+c.ID, rat, body); status != http.StatusOK || out["client_name"] != "Vouched App" {
		t.Fatalf("replace: %d %v, want the statement's name kept", status, out)
	}
}

// TestRegistration_RefusedSoftwareStatementsStoreNothing: an untrusted issuer is
// unapproved_software_statement; an expired statement, or one signed by a key outside the
// directory's set, is invalid_software_statement; none stores a client.
func TestRegistration_RefusedSoftwareStatementsStoreNothing(t *testing.T) {
	e := newRegEnv(t, "")
	now := e.clock.Now()
	claims := func(iss string, exp time.Time) map[string]any {
		return map[string]any{"iss": iss, "iat": now.Unix(), "exp": exp.Unix(), "redirect_uris": []string{"https://vouched.example/cb"}}
	}
	stranger, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	n := e.clients()
	for _, tc := range []struct{ name, ssa, want string }{
		{"untrusted issuer", e.statement(claims("https://evil.example", now.Add(time.Hour)), nil), "unapproved_software_statement"},
		{"expired", e.statement(claims(regDirectory, now.Add(-time.Minute)), nil), "invalid_software_statement"},
		{"key not in the directory's set", e.statement(claims(regDirectory, now.Add(time.Hour)), stranger), "invalid_software_statement"},
	} {
		body := webClient()
		body["software_statement"] = tc.ssa
		if status, out, _ := e.call("POST", httpapi.PathRegister, "", body); status != http.StatusBadRequest || out["error"] != tc.want {
			t.Errorf("%s: %d %v, want 400 %s", tc.name, status, out, tc.want)
		}
	}
	if e.clients() != n {
		t.Fatal("a refused statement stored a client")
	}
}

// TestRegistration_DirectoryProfileBindsItsClients: a directory configured with profile fapi2
// holds every client it vouches for to the profile: a secret-based web client is refused.
func TestRegistration_DirectoryProfileBindsItsClients(t *testing.T) {
	e := newRegEnv(t, oauth.ProfileFAPI2)
	now := e.clock.Now()
	ssa := e.statement(map[string]any{"iss": regDirectory, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}, nil)
	body := webClient()
	body["software_statement"] = ssa
	if status, out, _ := e.call("POST", httpapi.PathRegister, "", body); status != http.StatusBadRequest || out["error"] != "invalid_client_metadata" {
		t.Fatalf("web client: %d %v, want invalid_client_metadata", status, out)
	}
	body = fapiMetadata(t)
	body["software_statement"] = ssa
	status, out, _ := e.call("POST", httpapi.PathRegister, "", body)
	if status != http.StatusCreated {
		t.Fatalf("fapi client: %d %v", status, out)
	}
	if c, _ := e.app.Store.GetClient(context.Background(), out["client_id"].(string)); !c.IsFAPI2() {
		t.Fatal("the client is not held to fapi2")
	}
}

// TestRegistration_OffByDefault: without AUTH_REGISTRATION the endpoint answers 404 and
// discovery announces no registration_endpoint; with it on, discovery does.
func TestRegistration_OffByDefault(t *testing.T) {
	off := newEnv(t)
	resp, err := http.Post(off.url(httpapi.PathRegister), "application/json", strings.NewReader(`{}`))
	if err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("registration off: %v %v, want 404", resp, err)
	}
	discovery := func(e *env) map[string]any {
		resp, err := http.Get(e.url(httpapi.PathDiscovery))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var d map[string]any
		json.NewDecoder(resp.Body).Decode(&d)
		return d
	}
	if _, ok := discovery(off)["registration_endpoint"]; ok {
		t.Fatal("discovery announces registration_endpoint while registration is off")
	}
	on := newRegEnv(t, "")
	if got := discovery(on.env)["registration_endpoint"]; got != on.url(httpapi.PathRegister) {
		t.Fatalf("registration_endpoint %v, want %s", got, on.url(httpapi.PathRegister))
	}
}

// TestRegistration_DeleteEndsTheClientsTokens: a registered client signs a user in (PKCE, as
// every registered client must) and gets tokens; the DELETE of its registration revokes its
// grant, so its access token fails at userinfo and its refresh token at the token endpoint.
func TestRegistration_DeleteEndsTheClientsTokens(t *testing.T) {
	e := newRegEnv(t, "")
	_, out, _ := e.call("POST", httpapi.PathRegister, e.initialAccessToken(""), webClient())
	id, secret, rat := out["client_id"].(string), out["client_secret"].(string), out["registration_access_token"].(string)
	verifier := oauth.NewSecret("v") + "-pkce-verifier"
	loc := e.authorize(t, e.authorizeURL(url.Values{"client_id": {id}, "redirect_uri": {"https://tpp.example/cb"},
		"code_challenge": {oauth.S256(verifier)}, "code_challenge_method": {"S256"}}))
	code := loc.Query().Get("code")
	if code == "" {
		t.Fatalf("no code in %s", loc.Redacted())
	}
	token := func(form url.Values) (int, map[string]any) {
		req, _ := http.NewRequest("POST", e.url(httpapi.PathToken), strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(id, secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	status, tokens := token(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {"https://tpp.example/cb"}, "code_verifier": {verifier}})
	if status != http.StatusOK {
		t.Fatalf("code exchange: %d %v", status, tokens)
	}
	userinfo := func() int {
		req, _ := http.NewRequest("GET", e.url(httpapi.PathUserinfo), nil)
		req.Header.Set("Authorization", "Bearer "+tokens["access_token"].(string))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := userinfo(); s != http.StatusOK {
		t.Fatalf("userinfo before the delete: %d", s)
	}
	if status, _, _ := e.call("DELETE", httpapi.PathRegister+"/"+id, rat, nil); status != http.StatusNoContent {
		t.Fatalf("delete: %d", status)
	}
	if s := userinfo(); s != http.StatusUnauthorized {
		t.Fatalf("userinfo after the delete: %d, want 401", s)
	}
	if status, m := token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tokens["refresh_token"].(string)}}); status == http.StatusOK {
		t.Fatalf("refresh after the delete: %d %v, want a refusal", status, m)
	}
}

// TestRegistration_OtherPartsMetadataAreOneLineEach: the grant types (client_credentials among
// them) and the logout metadata registered by a third party are stored and answered as
// authctl stores them, and held to authctl's rules: an http post_logout_redirect_uri or
// backchannel_logout_uri is invalid_client_metadata or invalid_redirect_uri, storing nothing.
func TestRegistration_OtherPartsMetadataAreOneLineEach(t *testing.T) {
	e := newRegEnv(t, "")
	body := webClient()
	body["grant_types"] = []string{"authorization_code", "refresh_token", "client_credentials"}
	body["post_logout_redirect_uris"] = []string{"https://tpp.example/bye"}
	body["backchannel_logout_uri"] = "https://tpp.example/logout"
	body["backchannel_logout_session_required"] = true
	status, out, _ := e.call("POST", httpapi.PathRegister, e.initialAccessToken(""), body)
	if status != http.StatusCreated {
		t.Fatalf("%d %v", status, out)
	}
	c, err := e.app.Store.GetClient(context.Background(), out["client_id"].(string))
	if err != nil || !c.AllowsGrantType(oauth.GrantTypeClientCredentials) || !c.HasPostLogoutRedirectURI("https://tpp.example/bye") ||
		c.BackchannelLogoutURI != "https://tpp.example/logout" || !c.BackchannelLogoutSessionRequired {
		t.Fatalf("stored %+v %v", c, err)
	}
	if gt, _ := out["grant_types"].([]any); len(gt) != 3 || out["backchannel_logout_uri"] != "https://tpp.example/logout" {
		t.Fatalf("answer %v, want the registered metadata", out)
	}
	n := e.clients()
	for k, v := range map[string]any{"post_logout_redirect_uris": []string{"http://tpp.example/bye"}, "backchannel_logout_uri": "http://tpp.example/logout",
		"grant_types": []string{"password"}} {
		bad := webClient()
		bad[k] = v
		if status, out, _ := e.call("POST", httpapi.PathRegister, e.initialAccessToken(""), bad); status != http.StatusBadRequest ||
			(out["error"] != "invalid_client_metadata" && out["error"] != "invalid_redirect_uri") {
			t.Errorf("%s %v: %d %v, want 400", k, v, status, out)
		}
	}
	if e.clients() != n {
		t.Fatal("a refused registration stored a client")
	}
}

// TestRegistration_RacingReplacesAndADeleteLeaveOneConsistentClientOrNone: 50 replacements of
// one registration, each with its own client_name, race: each is answered 200, or 503
// temporarily_unavailable when others kept winning the store's compare-and-swap (never a 500),
// and the client ends as one of those answered 200, with its secret and registration access
// token unchanged. Then 25 replacements race with the delete: each is 200, 401 or 503; the
// delete is 204 (or 503 when the replacements kept winning its first write, then 204 when sent
// again), and no replacement brings the client back.
func TestRegistration_RacingReplacesAndADeleteLeaveOneConsistentClientOrNone(t *testing.T) {
	e := newRegEnv(t, "")
	status, out, _ := e.call("POST", httpapi.PathRegister, e.initialAccessToken(""), webClient())
	if status != http.StatusCreated {
		t.Fatalf("register: %d %v", status, out)
	}
	id, secret, rat := out["client_id"].(string), out["client_secret"].(string), out["registration_access_token"].(string)
	uri := httpapi.PathRegister + "/" + id
	replace := func(name string) int {
		m := webClient()
		m["client_id"], m["client_name"] = id, name
		status, out, _ := e.call("PUT", uri, rat, m)
		if status == http.StatusServiceUnavailable && out["error"] != "temporarily_unavailable" {
			t.Errorf("a lost replacement: 503 %v, want temporarily_unavailable", out)
		}
		return status
	}
	const racers = 50
	statuses := make([]int, racers)
	names := map[string]bool{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			statuses[i] = replace(fmt.Sprintf("TPP Web %d", i))
		}()
	}
	close(start)
	wg.Wait()
	for i, s := range statuses {
		switch s {
		case http.StatusOK:
			names[fmt.Sprintf("TPP Web %d", i)] = true
		case http.StatusServiceUnavailable:
		default:
			t.Errorf("replacement %d: %d, want 200 or 503", i, s)
		}
	}
	if len(names) == 0 {
		t.Fatal("no replacement won")
	}
	c, err := e.app.Store.GetClient(context.Background(), id)
	if err != nil || !names[c.Name] || !c.VerifySecret(secret, time.Now()) {
		t.Fatalf("after the racing replacements: %q %v, want one of the names sent and the same secret", c.Name, err)
	}
	if status, read, _ := e.call("GET", uri, rat, nil); status != http.StatusOK || read["client_name"] != c.Name {
		t.Fatalf("read with the registration access token: %d %v", status, read)
	}

	const replacers = 25
	statuses = make([]int, replacers)
	var deleted int
	start = make(chan struct{})
	for i := range replacers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			statuses[i] = replace(fmt.Sprintf("After %d", i))
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-start
		deleted, _, _ = e.call("DELETE", uri, rat, nil)
	}()
	close(start)
	wg.Wait()
	if deleted == http.StatusServiceUnavailable {
		// The replacements kept winning the delete's first write (disabling the client):
		// nothing was deleted, and the delete is sent again, as a client does after a 503.
		deleted, _, _ = e.call("DELETE", uri, rat, nil)
	}
	if deleted != http.StatusNoContent {
		t.Fatalf("the delete racing replacements: %d, want 204 (or 503 then 204)", deleted)
	}
	for i, s := range statuses {
		if s != http.StatusOK && s != http.StatusUnauthorized && s != http.StatusServiceUnavailable {
			t.Errorf("replacement %d racing the delete: %d, want 200, 401 or 503", i, s)
		}
	}
	if c, err := e.app.Store.GetClient(context.Background(), id); !errors.Is(err, oauth.ErrNotFound) {
		t.Fatalf("after the delete: %q %v, want no client", c.Name, err)
	}
}

// TestRegistration_CIBAMetadataAreStoredAndHeldToTheRules: a third party registers a ping
// client for the ciba grant (CIBA Core 4's metadata), stored and answered as given; a ping
// client over http or without an endpoint, and push, are invalid_client_metadata and store
// nothing.
func TestRegistration_CIBAMetadataAreStoredAndHeldToTheRules(t *testing.T) {
	e := newRegEnv(t, "")
	body := webClient()
	body["grant_types"] = []string{"authorization_code", oauth.GrantTypeCIBA}
	body["backchannel_token_delivery_mode"] = "ping"
	body["backchannel_client_notification_endpoint"] = "https://tpp.example/ciba"
	status, out, _ := e.call("POST", httpapi.PathRegister, e.initialAccessToken(""), body)
	if status != http.StatusCreated {
		t.Fatalf("%d %v", status, out)
	}
	c, err := e.app.Store.GetClient(context.Background(), out["client_id"].(string))
	if err != nil || !c.AllowsGrantType(oauth.GrantTypeCIBA) || c.BackchannelTokenDeliveryMode != "ping" ||
		c.BackchannelClientNotificationEndpoint != "https://tpp.example/ciba" {
		t.Fatalf("stored %+v %v", c, err)
	}
	if out["backchannel_token_delivery_mode"] != "ping" || out["backchannel_client_notification_endpoint"] != "https://tpp.example/ciba" {
		t.Fatalf("answer %v, want the registered metadata", out)
	}
	n := e.clients()
	for _, bad := range []map[string]any{
		{"backchannel_token_delivery_mode": "ping", "backchannel_client_notification_endpoint": "http://tpp.example/ciba"},
		{"backchannel_token_delivery_mode": "ping"},
		{"backchannel_token_delivery_mode": "push"},
	} {
		b := webClient()
		for k, v := range bad {
			b[k] = v
		}
		if status, out, _ := e.call("POST", httpapi.PathRegister, e.initialAccessToken(""), b); status != http.StatusBadRequest || out["error"] != "invalid_client_metadata" {
			t.Errorf("%v: %d %v, want 400 invalid_client_metadata", bad, status, out)
		}
	}
	if e.clients() != n {
		t.Fatal("a refused registration stored a client")
	}
}
