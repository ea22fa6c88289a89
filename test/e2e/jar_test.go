package e2e

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"

	"github.com/acmebank/authserver/shared/admin"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
)

// Signed request objects (JAR, RFC 9101) at PAR, FAPI 2.0 Message Signing (Final) 5.3, through
// the real endpoints: a fapi2 client registered with require_signed_request_object.

// requestObject is the client's request object carrying params, ES256 with typ
// oauth-authz-req+jwt; change edits its claims before signing.
func (k keyedClient) requestObject(t *testing.T, e *env, params url.Values, change func(map[string]any)) string {
	t.Helper()
	now := e.clock.Now()
	claims := map[string]any{"iss": k.id, "aud": e.app.Config.Issuer, "client_id": k.id, "jti": oauth.NewID("j_"),
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(5 * time.Minute).Unix()}
	for n := range params {
		claims[n] = params.Get(n)
	}
	if change != nil {
		change(claims)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: k.key, KeyID: "k1"}},
		(&jose.SignerOptions{}).WithType(oauth.RequestObjectType))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := jws.CompactSerialize()
	return out
}

// TestJAR_SignedRequestObjectAtPARCompletesTheFAPIFlow: a fapi2 client that must sign its
// requests pushes a request object (private_key_jwt, DPoP), the user signs in and consents
// through the request_uri, and the DPoP-bound code exchange gets tokens. Before that, a plain
// push is 400 invalid_request, and an object with a wrong aud, an expired one and an unsigned
// one are 400 invalid_request_object; every refused push writes nothing: the good push reuses
// their very client assertion and DPoP proof (same jtis).
func TestJAR_SignedRequestObjectAtPARCompletesTheFAPIFlow(t *testing.T) {
	e := newEnv(t)
	k := e.registerKeyedClient(t, admin.ClientSpec{Profile: oauth.ProfileFAPI2, RequirePKCE: true, RequirePAR: true,
		DPoPBoundAccessTokens: true, IDTokenSignedResponseAlg: "ES256", RequireSignedRequestObject: true})
	dk := newDPoPKey(t, jose.ES256)
	verifier := oauth2.GenerateVerifier()
	params := pushedParams(oauth2.S256ChallengeFromVerifier(verifier))
	auth := k.assertionFor(t, e, e.app.Config.Issuer)
	proof := dk.proof(t, e, http.MethodPost, e.url(httpapi.PathPAR), "")
	b64 := func(v any) string { b, _ := json.Marshal(v); return base64.RawURLEncoding.EncodeToString(b) }
	refusals := []struct {
		name string
		form url.Values
		want string
	}{
		{"no request object", params, "invalid_request"},
		{"aud another server", url.Values{"request": {k.requestObject(t, e, params, func(c map[string]any) { c["aud"] = "https://attacker.example" })}}, "invalid_request_object"},
		{"expired", url.Values{"request": {k.requestObject(t, e, params, func(c map[string]any) {
			c["nbf"], c["exp"] = e.clock.Now().Add(-10*time.Minute).Unix(), e.clock.Now().Add(-time.Minute).Unix()
		})}}, "invalid_request_object"},
		{"unsigned", url.Values{"request": {b64(map[string]string{"alg": "none"}) + "." + b64(map[string]any{"iss": k.id, "client_id": k.id,
			"aud": e.app.Config.Issuer, "nbf": e.clock.Now().Unix(), "exp": e.clock.Now().Add(time.Minute).Unix()}) + "."}}, "invalid_request_object"},
	}
	for _, r := range refusals {
		before := e.writes.count()
		st, body := e.clientPost(t, httpapi.PathPAR, auth, r.form, proof)
		if st != http.StatusBadRequest || body["error"] != r.want {
			t.Errorf("PAR, %s: %d %v, want 400 %s", r.name, st, body, r.want)
		}
		if n := e.writes.count() - before; n != 0 {
			t.Errorf("PAR, %s: the refused push wrote %d records", r.name, n)
		}
	}

	st, body := e.clientPost(t, httpapi.PathPAR, auth, url.Values{"request": {k.requestObject(t, e, params, nil)}}, proof)
	uri, _ := body["request_uri"].(string)
	if st != http.StatusCreated || uri == "" {
		t.Fatalf("PAR with the request object, after the refused pushes with the same assertion and proof: %d %v", st, body)
	}
	loc := e.authorize(t, e.url(httpapi.PathAuthorize)+"?"+url.Values{"client_id": {k.id}, "request_uri": {uri}}.Encode())
	code := loc.Query().Get("code")
	if code == "" || loc.Query().Get("state") != "st-par" {
		t.Fatalf("no code, or not the object's state, in %s", loc.Redacted())
	}
	exchange := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI}, "code_verifier": {verifier}}
	st, tokens := e.clientPost(t, httpapi.PathToken, k.assertionFor(t, e, e.app.Config.Issuer), exchange, dk.proof(t, e, http.MethodPost, e.url(httpapi.PathToken), ""))
	if st != http.StatusOK || tokens["access_token"] == nil || tokens["id_token"] == nil || tokens["token_type"] != oauth.TokenTypeDPoP {
		t.Fatalf("the DPoP code exchange: %d %v", st, tokens)
	}
}

// TestJAR_FiftyRacingPushesOfOneObjectEachGetARequestURI: the object's jti is not recorded
// (the push is client-authenticated, RFC 9126 2.1; docs/api.md), so 50 pushes of one request
// object at once, each with its own assertion and proof, all succeed with 50 different
// request_uris.
func TestJAR_FiftyRacingPushesOfOneObjectEachGetARequestURI(t *testing.T) {
	e := newEnv(t)
	k := e.registerKeyedClient(t, admin.ClientSpec{RequirePKCE: true, RequireSignedRequestObject: true})
	object := k.requestObject(t, e, pushedParams(oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())), nil)
	const n = 50
	auths := make([]url.Values, n)
	for i := range auths {
		auths[i] = k.assertionFor(t, e, e.app.Config.Issuer)
	}
	uris := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, body := e.clientPost(t, httpapi.PathPAR, auths[i], url.Values{"request": {object}}, "")
			if st != http.StatusCreated {
				t.Errorf("push %d: %d %v", i, st, body)
			}
			uris[i], _ = body["request_uri"].(string)
		}()
	}
	wg.Wait()
	slices.Sort(uris)
	if len(slices.Compact(uris)) != n || uris[0] == "" {
		t.Fatalf("50 pushes got %d distinct request_uris", len(slices.Compact(uris)))
	}
}

// TestJAR_DiscoveryAdvertisesRequestObjectAlgsNotTheRequestParameter: request objects are
// taken at PAR only, so request_parameter_supported (the authorization endpoint's) stays false
// and request_object_signing_alg_values_supported names PS256 and ES256.
func TestJAR_DiscoveryAdvertisesRequestObjectAlgsNotTheRequestParameter(t *testing.T) {
	e := newEnv(t)
	req, _ := http.NewRequest(http.MethodGet, e.url(httpapi.PathDiscovery), nil)
	st, doc, _ := do(t, req)
	algs, _ := json.Marshal(doc["request_object_signing_alg_values_supported"])
	if st != http.StatusOK || string(algs) != `["PS256","ES256"]` || doc["request_parameter_supported"] != false {
		t.Fatalf("discovery %d: request_object_signing_alg_values_supported %s, request_parameter_supported %v", st, algs, doc["request_parameter_supported"])
	}
	if _, ok := doc["require_signed_request_object"]; ok {
		t.Fatal("discovery advertises require_signed_request_object: it is per client here")
	}
}

// TestJAR_AuthorizationEndpointRefusesASignedRequestObject: a well-signed request object sent
// by value to the authorization endpoint is request_not_supported at the redirect URI, as an
// unsigned one is (TestAuthorize_UnsupportedRequestParametersRefused): only PAR takes them.
func TestJAR_AuthorizationEndpointRefusesASignedRequestObject(t *testing.T) {
	e := newEnv(t)
	k := e.registerKeyedClient(t, admin.ClientSpec{RequirePKCE: true})
	params := pushedParams(oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier()))
	q := url.Values{"client_id": {k.id}, "redirect_uri": {redirectURI}, "response_type": {"code"},
		"request": {k.requestObject(t, e, params, nil)}}
	for n, v := range params {
		q[n] = v
	}
	q.Set("state", "st-123")
	wantRedirectError(t, e, e.url(httpapi.PathAuthorize)+"?"+q.Encode(), "request_not_supported")
}

// TestJAR_RequestObjectOfAJWKSURIClientIsVerifiedWithThePublishedKeys: the object is verified
// through the one lookup of a client's keys, so a client registered with a jwks_uri pushes a
// request object signed with the key it publishes there; one signed with a key it does not
// publish is invalid_request_object.
func TestJAR_RequestObjectOfAJWKSURIClientIsVerifiedWithThePublishedKeys(t *testing.T) {
	e := newEnvFrom(t, envSetup{vars: allowPrivate})
	c := e.registerURIClient(t, newKeyHost(t))
	params := pushedParams(oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier()))
	published := keyedClient{id: c.id, key: c.keys["k1"]}
	st, body := e.clientPost(t, httpapi.PathPAR, c.assertion(t, e, "k1"), url.Values{"request": {published.requestObject(t, e, params, nil)}}, "")
	if st != http.StatusCreated || body["request_uri"] == nil {
		t.Fatalf("PAR with an object signed by the published key: %d %v", st, body)
	}
	stranger := keyedClient{id: c.id, key: newP256(t)}
	st, body = e.clientPost(t, httpapi.PathPAR, c.assertion(t, e, "k1"), url.Values{"request": {stranger.requestObject(t, e, params, nil)}}, "")
	if st != http.StatusBadRequest || body["error"] != "invalid_request_object" {
		t.Fatalf("PAR with an object signed by an unpublished key: %d %v, want 400 invalid_request_object", st, body)
	}
}
