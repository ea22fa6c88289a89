package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
)

// JARM (JWT Secured Authorization Response Mode for OAuth 2.0; FAPI 2.0 Message Signing (Final)
// 5.4) through the real authorization endpoint: response_mode=jwt and query.jwt put the
// authorization response, success or error, in one signed response parameter.

// jarmClaims checks that the redirect loc carries the one response parameter of JARM 2.3.1 and
// nothing else, verifies its signature with the server's JWKS (go-oidc's remote key set) and
// returns its header and claims.
func (e *env) jarmClaims(t *testing.T, loc *url.URL) (map[string]any, map[string]any) {
	t.Helper()
	q := loc.Query()
	resp := q.Get("response")
	if resp == "" || len(q) != 1 {
		t.Fatalf("redirect %s: want exactly one response parameter (JARM)", loc.Redacted())
	}
	if !strings.HasPrefix(loc.String(), redirectURI+"?") {
		t.Fatalf("redirect %s is not the request's redirect URI", loc.Redacted())
	}
	payload, err := oidc.NewRemoteKeySet(context.Background(), e.url(httpapi.PathJWKS)).VerifySignature(context.Background(), resp)
	if err != nil {
		t.Fatalf("the JARM response does not verify with the JWKS: %v", err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	return jwtHeader(t, resp), claims
}

// wantJARMBasics checks the claims JARM 2.1 requires, iss, aud (the client) and exp, 5 minutes
// after iat (JARM 2.1 recommends at most 10), and iat now.
func (e *env) wantJARMBasics(t *testing.T, claims map[string]any, client string) {
	t.Helper()
	now := float64(e.clock.Now().Unix())
	exp, _ := claims["exp"].(float64)
	if claims["iss"] != e.app.Config.Issuer || claims["aud"] != client || claims["iat"] != now || exp != now+300 {
		t.Fatalf("claims %v: want iss %s, aud %s, iat now, exp 5 minutes later", claims, e.app.Config.Issuer, client)
	}
}

// TestJARM_CodeResponseIsASignedJWTForTheClient: with response_mode jwt or query.jwt, sent
// through the browser or pushed (PAR), the redirect carries only response, a JWT signed with
// the id_token keys (RS256 by default) with iss, aud, exp, the code and the state, and no
// plain code or iss; the code in it is exchanged as usual.
func TestJARM_CodeResponseIsASignedJWTForTheClient(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		for _, mode := range []string{"jwt", "query.jwt"} {
			for _, pushed := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s pushed=%v", mode, pushed), func(t *testing.T) {
					verifier := oauth2.GenerateVerifier()
					params := pushedParams(oauth2.S256ChallengeFromVerifier(verifier))
					params.Set("response_mode", mode)
					authURL := e.authorizeURL(params)
					if pushed {
						st, body := e.push(t, params)
						uri, _ := body["request_uri"].(string)
						if st != http.StatusCreated || uri == "" {
							t.Fatalf("push: %d %v", st, body)
						}
						authURL = e.parURL(uri)
					}
					h, claims := e.jarmClaims(t, e.authorize(t, authURL))
					e.wantJARMBasics(t, claims, clientID)
					code, _ := claims["code"].(string)
					if h["alg"] != "RS256" || code == "" || claims["state"] != "st-par" || claims["error"] != nil {
						t.Fatalf("header %v claims %v: want RS256, a code and the state", h, claims)
					}
					st, body := e.exchange(t, code, url.Values{"code_verifier": {verifier}})
					if st != http.StatusOK || body["access_token"] == nil {
						t.Fatalf("exchange of the JARM code: %d %v", st, body)
					}
				})
			}
		}
	})
}

// TestJARM_ErrorsGoBackSignedToo: every error answered at the redirect URI of a request that
// asked for a JWT response mode is signed (JARM 2.1: error responses too): the user's denial
// (pushed or not), prompt=none without a session, and a bad parameter; the bad request stores
// nothing. A response_mode the server does not accept is answered in the plain query.
func TestJARM_ErrorsGoBackSignedToo(t *testing.T) {
	e := newEnv(t)
	t.Run("denied", func(t *testing.T) {
		b := newBrowser(t)
		b.toConsent(e, e.authorizeURL(url.Values{"response_mode": {"jwt"}}))
		_, claims := e.jarmClaims(t, b.decide(e, "deny"))
		e.wantJARMBasics(t, claims, clientID)
		if claims["error"] != "access_denied" || claims["state"] != "st-123" || claims["code"] != nil || claims["error_description"] == nil {
			t.Fatalf("claims %v: want access_denied with the state", claims)
		}
	})
	t.Run("denied pushed", func(t *testing.T) {
		params := pushedParams(oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier()))
		params.Set("response_mode", "query.jwt")
		st, body := e.push(t, params)
		uri, _ := body["request_uri"].(string)
		if st != http.StatusCreated {
			t.Fatalf("push: %d %v", st, body)
		}
		b := newBrowser(t)
		b.toConsent(e, e.parURL(uri))
		_, claims := e.jarmClaims(t, b.decide(e, "deny"))
		if claims["error"] != "access_denied" || claims["state"] != "st-par" {
			t.Fatalf("claims %v: want access_denied with the pushed state", claims)
		}
	})
	t.Run("prompt=none", func(t *testing.T) {
		resp := newBrowser(t).open(e.authorizeURL(url.Values{"response_mode": {"jwt"}, "prompt": {"none"}}))
		loc, _ := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("prompt=none answered %d", resp.StatusCode)
		}
		_, claims := e.jarmClaims(t, loc)
		if claims["error"] != "login_required" || claims["state"] != "st-123" {
			t.Fatalf("claims %v: want login_required", claims)
		}
	})
	t.Run("bad scope", func(t *testing.T) {
		before := e.writes.count()
		resp := newBrowser(t).open(e.authorizeURL(url.Values{"response_mode": {"jwt"}, "scope": {"openid admin:everything"}}))
		loc, _ := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("bad scope answered %d", resp.StatusCode)
		}
		_, claims := e.jarmClaims(t, loc)
		e.wantJARMBasics(t, claims, clientID)
		if claims["error"] != "invalid_scope" || claims["state"] != "st-123" {
			t.Fatalf("claims %v: want invalid_scope", claims)
		}
		if n := e.writes.count(); n != before {
			t.Fatalf("a refused request stored something: %v", e.writes.list()[before:])
		}
	})
	for _, mode := range []string{"form_post.jwt", "fragment.jwt", "JWT"} {
		t.Run("unsupported "+mode, func(t *testing.T) {
			wantRedirectError(t, e, e.authorizeURL(url.Values{"response_mode": {mode}}), "invalid_request")
		})
	}
}

// TestJARM_SignedWithTheClientsAuthorizationSignedResponseAlg: a client registered with
// authorization_signed_response_alg gets its responses in that algorithm; one without it gets
// its id_token algorithm.
func TestJARM_SignedWithTheClientsAuthorizationSignedResponseAlg(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ jarm, idToken, want string }{
		{"ES256", "", "ES256"},
		{"PS256", "ES256", "PS256"},
		{"", "ES256", "ES256"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if err := e.app.Store.UpdateClient(context.Background(), clientID, func(c oauth.Client) (oauth.Client, error) {
				c.AuthorizationSignedResponseAlg, c.IDTokenSignedResponseAlg = tc.jarm, tc.idToken
				return c, nil
			}); err != nil {
				t.Fatal(err)
			}
			h, claims := e.jarmClaims(t, e.authorize(t, e.authorizeURL(url.Values{"response_mode": {"jwt"}})))
			if h["alg"] != tc.want || claims["code"] == nil {
				t.Fatalf("header %v: want alg %s", h, tc.want)
			}
		})
	}
}

// TestJARM_AFailedSignatureIssuesNothing: when the key service fails at the decision, the user
// sees an error page, no code is issued and the pushed request's request_uri is not spent, so
// the request_uri opens a page again that can be decided once signing works.
func TestJARM_AFailedSignatureIssuesNothing(t *testing.T) {
	e := newEnv(t)
	signer := &failingSigner{IDTokenSigner: e.app.Service.Signer}
	e.app.Service.Signer = signer
	params := pushedParams(oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier()))
	params.Set("response_mode", "jwt")
	st, body := e.push(t, params)
	uri, _ := body["request_uri"].(string)
	if st != http.StatusCreated {
		t.Fatalf("push: %d %v", st, body)
	}
	b := newBrowser(t)
	b.toConsent(e, e.parURL(uri))
	homes := len(e.writes.onetimeHomes())
	before := e.writes.count()
	signer.armed.Store(true)
	resp := b.submit(e.url(httpapi.PathAuthorize), url.Values{"decision": {"allow"}})
	if resp.StatusCode < 500 || resp.Header.Get("Location") != "" {
		t.Fatalf("a failed signature answered %d %q, want an error page", resp.StatusCode, resp.Header.Get("Location"))
	}
	if w := e.writes.list()[before:]; slices.Contains(w, "CreateCode") || len(e.writes.onetimeHomes()) != homes {
		t.Fatalf("a failed signature wrote %v (one-time records %d -> %d)", w, homes, len(e.writes.onetimeHomes()))
	}
	// The request_uri was not spent: it opens the page again and the decision issues a code.
	_, claims := e.jarmClaims(t, e.authorize(t, e.parURL(uri)))
	if claims["code"] == nil {
		t.Fatalf("claims %v: want a code after the failure", claims)
	}
}

// TestJARM_DiscoveryAdvertisesTheModesAndAlgorithms: response_modes_supported lists jwt and
// query.jwt, and authorization_signing_alg_values_supported the id_token algorithms.
func TestJARM_DiscoveryAdvertisesTheModesAndAlgorithms(t *testing.T) {
	e := newEnv(t)
	st, doc, _ := do(t, mustRequest(t, e.url(httpapi.PathDiscovery)))
	if st != http.StatusOK {
		t.Fatalf("discovery answered %d", st)
	}
	if got := fmt.Sprint(doc["response_modes_supported"]); got != "[query jwt query.jwt]" {
		t.Errorf("response_modes_supported = %s", got)
	}
	if got, want := fmt.Sprint(doc["authorization_signing_alg_values_supported"]), fmt.Sprint(doc["id_token_signing_alg_values_supported"]); got != want {
		t.Errorf("authorization_signing_alg_values_supported = %s, want the id_token algorithms %s", got, want)
	}
}
