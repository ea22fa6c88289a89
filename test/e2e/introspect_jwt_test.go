package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
)

// JWT introspection responses (RFC 9701; FAPI 2.0 Message Signing (Final)) through the real
// introspection endpoint.

// introspectJWT posts an introspection request of the client id with the Accept header accept
// ("" for none) and returns the status, the Content-Type and the body.
func (e *env) introspectJWT(t *testing.T, id, secret, token, accept string) (int, string, string) {
	t.Helper()
	form := url.Values{"token": {token}, "client_id": {id}, "client_secret": {secret}}
	req, _ := http.NewRequest(http.MethodPost, e.url(httpapi.PathIntrospect), strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(body)
}

// verifiedClaims verifies a compact JWS with the server's JWKS and returns its claims.
func (e *env) verifiedClaims(t *testing.T, jws string) map[string]any {
	t.Helper()
	payload, err := oidc.NewRemoteKeySet(context.Background(), e.url(httpapi.PathJWKS)).VerifySignature(context.Background(), jws)
	if err != nil {
		t.Fatalf("the JWT does not verify with the JWKS: %v (%.80s)", err, jws)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	return claims
}

// TestIntrospectJWT_AcceptHeaderGetsTheSameAnswerSigned: a client that sends Accept:
// application/token-introspection+jwt (alone, or among other types) gets Content-Type
// application/token-introspection+jwt and a JWT of typ token-introspection+jwt, signed with
// the id_token keys (RS256 by default), with iss, aud (the client), iat, and the plain JSON
// answer as token_introspection, for an active and an inactive token (RFC 9701 4, 5); no
// token claim is at the top level. Without the header, or with q=0, the answer is the JSON.
func TestIntrospectJWT_AcceptHeaderGetsTheSameAnswerSigned(t *testing.T) {
	e := newEnv(t)
	access, _ := e.apiTokens(t, "openid email")
	for _, token := range []string{access, "at_unknown"} {
		plain := e.apiIntrospect(t, http.DefaultClient, e.srv.URL, clientID, clientSecret, token)
		for _, accept := range []string{"application/token-introspection+jwt", "application/json;q=0.5, application/token-introspection+jwt"} {
			st, ct, body := e.introspectJWT(t, clientID, clientSecret, token, accept)
			if st != http.StatusOK || ct != "application/token-introspection+jwt" {
				t.Fatalf("Accept %q: %d %s %.200s", accept, st, ct, body)
			}
			if h := jwtHeader(t, body); h["typ"] != oauth.JWTTypeIntrospection || h["alg"] != "RS256" {
				t.Fatalf("header %v: want typ %s alg RS256", h, oauth.JWTTypeIntrospection)
			}
			claims := e.verifiedClaims(t, body)
			if claims["iss"] != e.app.Config.Issuer || claims["aud"] != clientID || claims["iat"] != float64(e.clock.Now().Unix()) {
				t.Fatalf("claims %v: want iss, aud %s and iat", claims, clientID)
			}
			for _, top := range []string{"sub", "exp", "active", "scope", "client_id"} {
				if _, ok := claims[top]; ok {
					t.Errorf("claim %s at the top level: %v", top, claims)
				}
			}
			if !reflect.DeepEqual(claims["token_introspection"], any(plain.json)) {
				t.Fatalf("token_introspection = %v, want the plain answer %v", claims["token_introspection"], plain.json)
			}
		}
	}
	for _, accept := range []string{"", "application/json", "application/token-introspection+jwt;q=0", "application/jwt"} {
		st, ct, body := e.introspectJWT(t, clientID, clientSecret, access, accept)
		if st != http.StatusOK || !strings.HasPrefix(ct, "application/json") || !strings.Contains(body, `"active":true`) {
			t.Errorf("Accept %q: %d %s %.100s, want the JSON answer", accept, st, ct, body)
		}
	}
}

// TestIntrospectJWT_ClientsRegisteredAlgSignsEveryResponse: a client registered with
// introspection_signed_response_alg gets every answer signed in that algorithm, with or
// without the Accept header (RFC 9701 6).
func TestIntrospectJWT_ClientsRegisteredAlgSignsEveryResponse(t *testing.T) {
	e := newEnv(t)
	access, _ := e.apiTokens(t, "openid")
	if err := e.app.Store.UpdateClient(context.Background(), clientID, func(c oauth.Client) (oauth.Client, error) {
		c.IntrospectionSignedResponseAlg = "ES256"
		return c, nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, accept := range []string{"", "application/token-introspection+jwt"} {
		st, ct, body := e.introspectJWT(t, clientID, clientSecret, access, accept)
		if st != http.StatusOK || ct != "application/token-introspection+jwt" {
			t.Fatalf("Accept %q: %d %s %.200s", accept, st, ct, body)
		}
		if h := jwtHeader(t, body); h["alg"] != "ES256" {
			t.Fatalf("header %v: want ES256", h)
		}
		if ti, _ := e.verifiedClaims(t, body)["token_introspection"].(map[string]any); ti["active"] != true {
			t.Fatalf("token_introspection %v: want the active token", ti)
		}
	}
}

// TestIntrospectJWT_ErrorsStayJSONAndWriteNothing: a request refused (bad client credentials,
// no token) that asked for a JWT is the RFC 6749 JSON error, unsigned, and stores nothing.
func TestIntrospectJWT_ErrorsStayJSONAndWriteNothing(t *testing.T) {
	e := newEnv(t)
	access, _ := e.apiTokens(t, "openid")
	before := e.writes.count()
	for _, tc := range []struct{ name, secret, token, want string }{
		{"bad secret", "wrong-secret-0123456789abcdef", access, "invalid_client"},
		{"no token", clientSecret, "", "invalid_request"},
	} {
		st, ct, body := e.introspectJWT(t, clientID, tc.secret, tc.token, "application/token-introspection+jwt")
		if st < 400 || !strings.HasPrefix(ct, "application/json") || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s %.200s, want a JSON %s", tc.name, st, ct, body, tc.want)
		}
	}
	if n := e.writes.count(); n != before {
		t.Fatalf("refused introspections stored %v", e.writes.list()[before:])
	}
}

// TestIntrospectJWT_DiscoveryAdvertisesTheAlgorithms: introspection_signing_alg_values_supported
// lists the id_token algorithms, which sign the responses.
func TestIntrospectJWT_DiscoveryAdvertisesTheAlgorithms(t *testing.T) {
	e := newEnv(t)
	_, doc, _ := do(t, mustRequest(t, e.url(httpapi.PathDiscovery)))
	if got, want := fmt.Sprint(doc["introspection_signing_alg_values_supported"]), fmt.Sprint(doc["id_token_signing_alg_values_supported"]); got != want || want == "<nil>" {
		t.Errorf("introspection_signing_alg_values_supported = %s, want %s", got, want)
	}
}
