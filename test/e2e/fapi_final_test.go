package e2e

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"

	"github.com/acmebank/authserver/shared/admin"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
)

// The FAPI 2.0 Security Profile (Final) rules of issue 26 items 1, 2, 3 and 6, through the real
// endpoints: a fapi2 client that authenticates with private_key_jwt and binds its tokens with
// DPoP, registered as authctl registers it.

func (e *env) registerFAPI2KeyedClient(t *testing.T) keyedClient {
	t.Helper()
	return e.registerKeyedClient(t, admin.ClientSpec{Profile: oauth.ProfileFAPI2, RequirePKCE: true, RequirePAR: true,
		DPoPBoundAccessTokens: true, IDTokenSignedResponseAlg: "ES256", RefreshReuseInterval: 30 * time.Second})
}

// assertionFor is the client's assertion with aud as given (a string, an array, anything).
func (k keyedClient) assertionFor(t *testing.T, e *env, aud any) url.Values {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: k.key, KeyID: "k1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := e.clock.Now()
	payload, _ := json.Marshal(map[string]any{"iss": k.id, "sub": k.id, "aud": aud, "jti": oauth.NewID("j_"),
		"iat": now.Unix(), "exp": now.Add(time.Minute).Unix()})
	jws, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := jws.CompactSerialize()
	return url.Values{"client_id": {k.id}, "client_assertion_type": {oauth.AssertionTypeJWTBearer}, "client_assertion": {out}}
}

// clientPost sends a form to path with the client's authentication and a DPoP proof ("" for none).
func (e *env) clientPost(t *testing.T, path string, auth, params url.Values, proof string) (int, map[string]any) {
	t.Helper()
	p := url.Values{}
	for _, from := range []url.Values{auth, params} {
		for k, v := range from {
			p[k] = v
		}
	}
	req, _ := http.NewRequest(http.MethodPost, e.url(path), strings.NewReader(p.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if proof != "" {
		req.Header.Set("DPoP", proof)
	}
	st, body, _ := do(t, req)
	return st, body
}

// fapiPushAndAuthorize pushes a request with a good assertion and a proof of dk, signs in and
// consents, and returns the code and its verifier.
func (e *env) fapiPushAndAuthorize(t *testing.T, k keyedClient, dk *dpopKey) (code, verifier string) {
	t.Helper()
	verifier = oauth2.GenerateVerifier()
	st, body := e.clientPost(t, httpapi.PathPAR, k.assertionFor(t, e, e.app.Config.Issuer), pushedParams(oauth2.S256ChallengeFromVerifier(verifier)),
		dk.proof(t, e, http.MethodPost, e.url(httpapi.PathPAR), ""))
	uri, _ := body["request_uri"].(string)
	if st != http.StatusCreated || uri == "" {
		t.Fatalf("PAR: %d %v", st, body)
	}
	loc := e.authorize(t, e.url(httpapi.PathAuthorize)+"?"+url.Values{"client_id": {k.id}, "request_uri": {uri}}.Encode())
	if code = loc.Query().Get("code"); code == "" {
		t.Fatalf("no code in %s", loc.Redacted())
	}
	return code, verifier
}

// TestFAPI2_AssertionAudienceIsOnlyTheIssuerAsAString: FAPI 2.0 (Final) 5.3.2.1 — at PAR, token,
// introspection and revocation a fapi2 client's assertion whose aud is an endpoint URL, an
// array (even of the issuer alone, or with another server), or the issuer plus "/" or a path
// is 401 invalid_client and writes nothing; the code survives the refused exchanges and the
// issuer as a string gets the tokens.
func TestFAPI2_AssertionAudienceIsOnlyTheIssuerAsAString(t *testing.T) {
	e := newEnv(t)
	k := e.registerFAPI2KeyedClient(t)
	dk := newDPoPKey(t, jose.ES256)
	iss := e.app.Config.Issuer
	bad := map[string]any{
		"the token endpoint":           e.url(httpapi.PathToken),
		"the PAR endpoint":             e.url(httpapi.PathPAR),
		"an array of the issuer":       []string{iss},
		"an array with another server": []string{iss, "https://attacker.example/"},
		"the issuer plus a slash":      iss + "/",
		"the issuer plus a path":       iss + "/anything",
	}
	refused := func(what string, st int, body map[string]any) {
		t.Helper()
		if st != http.StatusUnauthorized || body["error"] != "invalid_client" {
			t.Errorf("%s: %d %v, want 401 invalid_client", what, st, body)
		}
	}
	verifier := oauth2.GenerateVerifier()
	push := pushedParams(oauth2.S256ChallengeFromVerifier(verifier))
	for name, aud := range bad {
		before := e.writes.count()
		st, body := e.clientPost(t, httpapi.PathPAR, k.assertionFor(t, e, aud), push, dk.proof(t, e, http.MethodPost, e.url(httpapi.PathPAR), ""))
		refused("PAR, aud "+name, st, body)
		if n := e.writes.count(); n != before {
			t.Errorf("PAR, aud %s: the refused request wrote %d records", name, n-before)
		}
	}
	code, verifier := e.fapiPushAndAuthorize(t, k, dk)
	exchange := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI}, "code_verifier": {verifier}}
	for name, aud := range bad {
		st, body := e.clientPost(t, httpapi.PathToken, k.assertionFor(t, e, aud), exchange, dk.proof(t, e, http.MethodPost, e.url(httpapi.PathToken), ""))
		refused("token, aud "+name, st, body)
	}
	st, tokens := e.clientPost(t, httpapi.PathToken, k.assertionFor(t, e, iss), exchange, dk.proof(t, e, http.MethodPost, e.url(httpapi.PathToken), ""))
	at, _ := tokens["access_token"].(string)
	if st != http.StatusOK || at == "" || tokens["token_type"] != oauth.TokenTypeDPoP {
		t.Fatalf("the exchange with aud the issuer after the refused ones: %d %v", st, tokens)
	}
	for name, aud := range bad {
		st, body := e.clientPost(t, httpapi.PathIntrospect, k.assertionFor(t, e, aud), url.Values{"token": {at}}, "")
		refused("introspection, aud "+name, st, body)
		st, body = e.clientPost(t, httpapi.PathRevoke, k.assertionFor(t, e, aud), url.Values{"token": {at}}, "")
		refused("revocation, aud "+name, st, body)
	}
	if st, body := e.clientPost(t, httpapi.PathIntrospect, k.assertionFor(t, e, iss), url.Values{"token": {at}}, ""); st != http.StatusOK || body["active"] != true {
		t.Fatalf("introspection with aud the issuer (the refused revocations left the token live): %d %v", st, body)
	}
	if st, body := e.clientPost(t, httpapi.PathRevoke, k.assertionFor(t, e, iss), url.Values{"token": {at}}, ""); st != http.StatusOK {
		t.Fatalf("revocation with aud the issuer: %d %v", st, body)
	}
}

// TestFAPI2_DPoPProofIATUpTo10SecondsAhead: FAPI 2.0 (Final) 5.3.2.1 — a proof whose iat is 10 s
// ahead of the server's clock is accepted at PAR and token; 11 s ahead is invalid_dpop_proof
// saying so, and leaves the code usable.
func TestFAPI2_DPoPProofIATUpTo10SecondsAhead(t *testing.T) {
	e := newEnv(t)
	k := e.registerFAPI2KeyedClient(t)
	dk := newDPoPKey(t, jose.ES256)
	ahead := func(u string, d time.Duration) string {
		c := dk.claims(e, http.MethodPost, u, "")
		c["iat"] = e.clock.Now().Add(d).Unix()
		return dk.proofWith(t, "dpop+jwt", c)
	}
	verifier := oauth2.GenerateVerifier()
	push := pushedParams(oauth2.S256ChallengeFromVerifier(verifier))
	if st, body := e.clientPost(t, httpapi.PathPAR, k.assertionFor(t, e, e.app.Config.Issuer), push, ahead(e.url(httpapi.PathPAR), 10*time.Second)); st != http.StatusCreated {
		t.Fatalf("PAR with a proof 10 s ahead: %d %v", st, body)
	}
	st, body := e.clientPost(t, httpapi.PathPAR, k.assertionFor(t, e, e.app.Config.Issuer), push, ahead(e.url(httpapi.PathPAR), 11*time.Second))
	if desc, _ := body["error_description"].(string); st != http.StatusBadRequest || body["error"] != "invalid_dpop_proof" || !strings.Contains(desc, "more than 10s ahead") {
		t.Fatalf("PAR with a proof 11 s ahead: %d %v, want invalid_dpop_proof saying it is more than 10s ahead", st, body)
	}
	code, verifier := e.fapiPushAndAuthorize(t, k, dk)
	exchange := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI}, "code_verifier": {verifier}}
	st, body = e.clientPost(t, httpapi.PathToken, k.assertionFor(t, e, e.app.Config.Issuer), exchange, ahead(e.url(httpapi.PathToken), 11*time.Second))
	if desc, _ := body["error_description"].(string); st != http.StatusBadRequest || body["error"] != "invalid_dpop_proof" || !strings.Contains(desc, "more than 10s ahead") {
		t.Fatalf("token with a proof 11 s ahead: %d %v", st, body)
	}
	if st, body := e.clientPost(t, httpapi.PathToken, k.assertionFor(t, e, e.app.Config.Issuer), exchange, ahead(e.url(httpapi.PathToken), 10*time.Second)); st != http.StatusOK {
		t.Fatalf("token with a proof 10 s ahead, after the refused one: %d %v", st, body)
	}
}

// TestFAPI2_DPoPProofAlgIsPS256ES256OrEdDSA: FAPI 2.0 (Final) 5.4.1 — a fapi2 client's RS256
// proof is invalid_dpop_proof at PAR and token and writes nothing; an EdDSA (Ed25519) proof is
// accepted at both and binds the tokens to its key; a client without the profile may still
// send RS256.
func TestFAPI2_DPoPProofAlgIsPS256ES256OrEdDSA(t *testing.T) {
	e := newEnv(t)
	k := e.registerFAPI2KeyedClient(t)
	rs := newDPoPKey(t, jose.RS256)
	_, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	ed := &dpopKey{alg: jose.EdDSA, priv: edPriv}
	iss := e.app.Config.Issuer
	rsRefused := func(what string, st int, body map[string]any) {
		t.Helper()
		if desc, _ := body["error_description"].(string); st != http.StatusBadRequest || body["error"] != "invalid_dpop_proof" || !strings.Contains(desc, "PS256, ES256 or EdDSA") {
			t.Fatalf("%s with an RS256 proof: %d %v, want invalid_dpop_proof", what, st, body)
		}
	}
	verifier := oauth2.GenerateVerifier()
	push := pushedParams(oauth2.S256ChallengeFromVerifier(verifier))
	before := e.writes.count()
	st, body := e.clientPost(t, httpapi.PathPAR, k.assertionFor(t, e, iss), push, rs.proof(t, e, http.MethodPost, e.url(httpapi.PathPAR), ""))
	rsRefused("PAR", st, body)
	if n := e.writes.count(); n != before {
		t.Errorf("the refused PAR wrote %d records", n-before)
	}
	code, verifier := e.fapiPushAndAuthorize(t, k, ed) // EdDSA at PAR
	exchange := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI}, "code_verifier": {verifier}}
	st, body = e.clientPost(t, httpapi.PathToken, k.assertionFor(t, e, iss), exchange, rs.proof(t, e, http.MethodPost, e.url(httpapi.PathToken), ""))
	rsRefused("token", st, body)
	st, tokens := e.clientPost(t, httpapi.PathToken, k.assertionFor(t, e, iss), exchange, ed.proof(t, e, http.MethodPost, e.url(httpapi.PathToken), ""))
	at, _ := tokens["access_token"].(string)
	if st != http.StatusOK || tokens["token_type"] != oauth.TokenTypeDPoP {
		t.Fatalf("token with an EdDSA proof: %d %v", st, tokens)
	}
	if st, _ := dpopGet(t, e.url(httpapi.PathUserinfo), "DPoP", at, ed.proof(t, e, http.MethodGet, e.url(httpapi.PathUserinfo), at)); st != http.StatusOK {
		t.Fatalf("userinfo with the EdDSA-bound token and its proof: %d", st)
	}
	// The seeded client (client_secret, no profile) may still bind its tokens with RS256.
	code, pkce := e.codeWithPKCE(t, nil)
	if st, body, _ := e.dpopPost(t, httpapi.PathToken, codeParams(code, pkce), rs.proof(t, e, http.MethodPost, e.url(httpapi.PathToken), "")); st != http.StatusOK {
		t.Fatalf("an RS256 proof from a client without the profile: %d %v", st, body)
	}
}

// TestDiscovery_AnnouncesOnlyWhatWorks: prompt_values_supported leaves out "none" (silent
// authentication is not supported yet) and tls_client_certificate_bound_access_tokens is absent
// without a mutual-TLS connect host (AUTH_MTLS_BASE_URL) and true with one.
func TestDiscovery_AnnouncesOnlyWhatWorks(t *testing.T) {
	read := func(u string, c *http.Client) map[string]any {
		t.Helper()
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
			t.Fatal(err)
		}
		return doc
	}
	e := newEnv(t)
	doc := read(e.url(httpapi.PathDiscovery), http.DefaultClient)
	prompts, _ := doc["prompt_values_supported"].([]any)
	if len(prompts) == 0 || slices.Contains(prompts, any("none")) {
		t.Errorf("prompt_values_supported %v: want the values that work, without none", doc["prompt_values_supported"])
	}
	if v, ok := doc["tls_client_certificate_bound_access_tokens"]; ok {
		t.Errorf("tls_client_certificate_bound_access_tokens %v without mutual TLS", v)
	}
	m := newEnvFrom(t, envSetup{vars: map[string]string{config.EnvMTLSBaseURL: "https://connect.bank.example"}})
	if v := read(m.url(httpapi.PathDiscovery), http.DefaultClient)["tls_client_certificate_bound_access_tokens"]; v != true {
		t.Errorf("with AUTH_MTLS_BASE_URL: tls_client_certificate_bound_access_tokens %v, want true", v)
	}
}

// TestAuthorize_RedirectsToTheClientWith303: every authorization response sent to the client's
// redirect URI is 303 See Other (FAPI 2.0 (Final) 5.3.2.2, RFC 9700 4.11): an error for a
// request sent by GET without PAR, the same by POST, and the code after the user's decision.
func TestAuthorize_RedirectsToTheClientWith303(t *testing.T) {
	e := newEnv(t)
	bad := url.Values{"code_challenge": {"x"}, "code_challenge_method": {"plain"}}
	resp := newBrowser(t).open(e.authorizeURL(bad))
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || loc.Query().Get("error") != "invalid_request" {
		t.Errorf("GET without PAR: %d %s, want 303 with invalid_request", resp.StatusCode, loc.Redacted())
	}
	u, _ := url.Parse(e.authorizeURL(bad))
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post, err := noFollow.PostForm(e.url(httpapi.PathAuthorize), u.Query())
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	loc, _ = url.Parse(post.Header.Get("Location"))
	if post.StatusCode != http.StatusSeeOther || loc.Query().Get("error") != "invalid_request" {
		t.Errorf("POST: %d %s, want 303 with invalid_request", post.StatusCode, loc.Redacted())
	}
	// The decision's redirect: e.authorize (browser.decide) requires 303.
	if e.code(t, nil) == "" {
		t.Fatal("no code")
	}
}
