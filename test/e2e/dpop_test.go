package e2e

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"

	"github.com/acmebank/authserver/shared/app"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
)

// dpopKey is a client's DPoP key pair: it signs proofs with its public JWK in the header, as
// RFC 9449 4.2 says (go-jose's EmbedJWK).
type dpopKey struct {
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

func newDPoPKey(t *testing.T, alg jose.SignatureAlgorithm) *dpopKey {
	t.Helper()
	var k crypto.Signer
	var err error
	if alg == jose.ES256 {
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	} else {
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	if err != nil {
		t.Fatal(err)
	}
	return &dpopKey{alg: alg, priv: k}
}

// thumbprint is the key's RFC 7638 thumbprint: what cnf.jkt and dpop_jkt carry.
func (k *dpopKey) thumbprint(t *testing.T) string {
	t.Helper()
	tp, err := (&jose.JSONWebKey{Key: k.priv.Public()}).Thumbprint(crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(tp)
}

// proof signs a DPoP proof of claims (jti and iat filled in unless given) with header typ.
func (k *dpopKey) proofWith(t *testing.T, typ string, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{EmbedJWK: true}).WithType(jose.ContentType(typ))
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: k.priv}, opts)
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// proof is a valid proof for method and URL at the env's time, with ath when a token is given.
func (k *dpopKey) proof(t *testing.T, e *env, method, u, accessToken string) string {
	return k.proofWith(t, "dpop+jwt", k.claims(e, method, u, accessToken))
}

func (k *dpopKey) claims(e *env, method, u, accessToken string) map[string]any {
	c := map[string]any{"jti": oauth.NewID("j_"), "htm": method, "htu": u, "iat": e.clock.Now().Unix()}
	if accessToken != "" {
		sum := sha256.Sum256([]byte(accessToken))
		c["ath"] = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	return c
}

// dpopPost sends a token request (client_secret_post) with a DPoP proof header.
func (e *env) dpopPost(t *testing.T, path string, params url.Values, proof string) (int, map[string]any, http.Header) {
	t.Helper()
	p := url.Values{"client_id": {clientID}, "client_secret": {clientSecret}}
	for k, v := range params {
		p[k] = v
	}
	req, _ := http.NewRequest(http.MethodPost, e.url(path), strings.NewReader(p.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if proof != "" {
		req.Header.Set("DPoP", proof)
	}
	return do(t, req)
}

// dpopGet calls a protected resource with the token in the given scheme and a proof.
func dpopGet(t *testing.T, u, scheme, token, proof string) (int, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Authorization", scheme+" "+token)
	if proof != "" {
		req.Header.Set("DPoP", proof)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

func (e *env) codeWithPKCE(t *testing.T, extra url.Values) (code, verifier string) {
	t.Helper()
	verifier = oauth2.GenerateVerifier()
	p := url.Values{"code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "code_challenge_method": {"S256"}}
	for k, v := range extra {
		p[k] = v
	}
	return e.code(t, p), verifier
}

func codeParams(code, verifier string) url.Values {
	return url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI}, "code_verifier": {verifier}}
}

// TestDPoP_TokensAreBoundToTheProofKey: a code exchanged with a DPoP proof gives token_type
// DPoP; the access token works at userinfo and the bank API only under the DPoP scheme with a
// proof of the same key naming that request and that token; introspection shows cnf.jkt; the
// refresh token is spent only with the same key. On both stores.
func TestDPoP_TokensAreBoundToTheProofKey(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		e.mountAPI(t, app.APIOptions{})
		key, other := newDPoPKey(t, jose.ES256), newDPoPKey(t, jose.PS256)
		tokenURL, userinfoURL := e.url(httpapi.PathToken), e.url(httpapi.PathUserinfo)
		code, verifier := e.codeWithPKCE(t, nil)
		st, body, _ := e.dpopPost(t, httpapi.PathToken, codeParams(code, verifier), key.proof(t, e, http.MethodPost, tokenURL, ""))
		if st != http.StatusOK || body["token_type"] != "DPoP" {
			t.Fatalf("exchange with a proof: %d %v, want 200 token_type DPoP", st, body)
		}
		at, rt := body["access_token"].(string), body["refresh_token"].(string)

		if st, _ := dpopGet(t, userinfoURL, "DPoP", at, key.proof(t, e, http.MethodGet, userinfoURL, at)); st != http.StatusOK {
			t.Fatalf("userinfo with its proof: %d", st)
		}
		for name, c := range map[string]struct{ scheme, proof string }{
			"as Bearer":                  {"Bearer", ""},
			"as Bearer with a proof":     {"Bearer", key.proof(t, e, http.MethodGet, userinfoURL, at)},
			"DPoP without a proof":       {"DPoP", ""},
			"another key's proof":        {"DPoP", other.proof(t, e, http.MethodGet, userinfoURL, at)},
			"a proof for another token":  {"DPoP", key.proof(t, e, http.MethodGet, userinfoURL, "at_other")},
			"a proof for another URL":    {"DPoP", key.proof(t, e, http.MethodGet, tokenURL, at)},
			"a proof for another method": {"DPoP", key.proof(t, e, http.MethodPost, userinfoURL, at)},
		} {
			st, h := dpopGet(t, userinfoURL, c.scheme, at, c.proof)
			if st != http.StatusUnauthorized || h.Get("WWW-Authenticate") == "" {
				t.Errorf("userinfo %s: %d %q, want 401 with a challenge", name, st, h.Get("WWW-Authenticate"))
			}
		}
		// The bank API's authorizer checks the same binding.
		api := e.url("/v2/bank/accounts")
		if st, _ := dpopGet(t, api, "DPoP", at, key.proof(t, e, http.MethodGet, api, at)); st != http.StatusOK {
			t.Fatalf("bank API with the proof: %d", st)
		}
		if st, h := dpopGet(t, api, "Bearer", at, ""); st != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("bank API as Bearer: %d %q, want 401", st, h.Get("WWW-Authenticate"))
		}

		st, intro, _ := e.post(t, httpapi.PathIntrospect, url.Values{"token": {at}}, true, false)
		cnf, _ := intro["cnf"].(map[string]any)
		if st != http.StatusOK || intro["token_type"] != "DPoP" || cnf["jkt"] != key.thumbprint(t) {
			t.Fatalf("introspection: %d %v, want token_type DPoP and cnf.jkt %s", st, intro, key.thumbprint(t))
		}

		refresh := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}}
		st, body, _ = e.dpopPost(t, httpapi.PathToken, refresh, key.proof(t, e, http.MethodPost, tokenURL, ""))
		if st != http.StatusOK || body["token_type"] != "DPoP" {
			t.Fatalf("refresh with the same key: %d %v", st, body)
		}
		next := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {body["refresh_token"].(string)}}
		for name, proof := range map[string]string{"another key": other.proof(t, e, http.MethodPost, tokenURL, ""), "no proof": ""} {
			if st, body, _ := e.dpopPost(t, httpapi.PathToken, next, proof); st != http.StatusBadRequest || body["error"] != "invalid_grant" {
				t.Fatalf("refresh with %s: %d %v, want invalid_grant", name, st, body)
			}
		}
	})
}

// TestDPoP_BadProofsAreRefusedAndSpendNothing: every check of RFC 9449 4.3 refuses a proof
// with 400 invalid_dpop_proof before the code is touched, so the code still works after.
func TestDPoP_BadProofsAreRefusedAndSpendNothing(t *testing.T) {
	e := newEnv(t)
	key := newDPoPKey(t, jose.ES256)
	tokenURL := e.url(httpapi.PathToken)
	good := func() map[string]any { return key.claims(e, http.MethodPost, tokenURL, "") }
	with := func(k string, v any) map[string]any { c := good(); c[k] = v; return c }
	without := func(k string) map[string]any { c := good(); delete(c, k); return c }
	hmacProof := func() string {
		s, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("0123456789abcdef0123456789abcdef")},
			(&jose.SignerOptions{}).WithType("dpop+jwt"))
		p, _ := json.Marshal(good())
		jws, _ := s.Sign(p)
		out, _ := jws.CompactSerialize()
		return out
	}
	code, verifier := e.codeWithPKCE(t, nil)
	for name, proof := range map[string]string{
		"not a JWS":         "not-a-jws",
		"typ JWT":           key.proofWith(t, "JWT", good()),
		"HS256":             hmacProof(),
		"another method":    key.proofWith(t, "dpop+jwt", with("htm", "GET")),
		"another URL":       key.proofWith(t, "dpop+jwt", with("htu", e.url(httpapi.PathUserinfo))),
		"another host":      key.proofWith(t, "dpop+jwt", with("htu", "https://evil.example"+httpapi.PathToken)),
		"iat 2 minutes old": key.proofWith(t, "dpop+jwt", with("iat", e.clock.Now().Add(-2*time.Minute).Unix())),
		"iat in the future": key.proofWith(t, "dpop+jwt", with("iat", e.clock.Now().Add(time.Minute).Unix())),
		"no iat":            key.proofWith(t, "dpop+jwt", without("iat")),
		"no jti":            key.proofWith(t, "dpop+jwt", without("jti")),
		"iat a string":      key.proofWith(t, "dpop+jwt", with("iat", "now")),
	} {
		st, body, _ := e.dpopPost(t, httpapi.PathToken, codeParams(code, verifier), proof)
		if st != http.StatusBadRequest || body["error"] != "invalid_dpop_proof" {
			t.Errorf("%s: %d %v, want 400 invalid_dpop_proof", name, st, body)
		}
	}
	// Two proofs in one request are refused too.
	req, _ := http.NewRequest(http.MethodPost, tokenURL, strings.NewReader(url.Values{"client_id": {clientID}, "client_secret": {clientSecret},
		"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI}, "code_verifier": {verifier}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Add("DPoP", key.proof(t, e, http.MethodPost, tokenURL, ""))
	req.Header.Add("DPoP", key.proof(t, e, http.MethodPost, tokenURL, ""))
	if st, body, _ := do(t, req); st != http.StatusBadRequest || body["error"] != "invalid_dpop_proof" {
		t.Errorf("two DPoP headers: %d %v", st, body)
	}
	if st, body, _ := e.dpopPost(t, httpapi.PathToken, codeParams(code, verifier), key.proof(t, e, http.MethodPost, tokenURL, "")); st != http.StatusOK {
		t.Fatalf("the code after the refused proofs: %d %v", st, body)
	}
}

// TestDPoP_RacingReplaysOfOneProofOneWins: one proof sent by 50 requests at once is accepted
// once (its jti is recorded with a conditional write); the others are invalid_dpop_proof.
func TestDPoP_RacingReplaysOfOneProofOneWins(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		key := newDPoPKey(t, jose.ES256)
		tokenURL, userinfoURL := e.url(httpapi.PathToken), e.url(httpapi.PathUserinfo)
		code, verifier := e.codeWithPKCE(t, nil)
		_, body, _ := e.dpopPost(t, httpapi.PathToken, codeParams(code, verifier), key.proof(t, e, http.MethodPost, tokenURL, ""))
		at, _ := body["access_token"].(string)
		proof := key.proof(t, e, http.MethodGet, userinfoURL, at)
		const racers = 50
		statuses := make([]int, racers)
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() { statuses[i], _ = dpopGet(t, userinfoURL, "DPoP", at, proof) })
		}
		wg.Wait()
		ok := 0
		for _, st := range statuses {
			switch st {
			case http.StatusOK:
				ok++
			case http.StatusUnauthorized:
			default:
				t.Fatalf("a replay answered %d", st)
			}
		}
		if ok != 1 {
			t.Fatalf("%d of %d racing uses of one proof were accepted, want exactly 1", ok, racers)
		}
	})
}

// TestDPoP_CodeBoundByDPoPJKT: an authorization request with dpop_jkt binds its code to that
// key (RFC 9449 10): a proof of another key cannot redeem it, and the failed try spends it.
func TestDPoP_CodeBoundByDPoPJKT(t *testing.T) {
	e := newEnv(t)
	key, other := newDPoPKey(t, jose.ES256), newDPoPKey(t, jose.ES256)
	tokenURL := e.url(httpapi.PathToken)
	code, verifier := e.codeWithPKCE(t, url.Values{"dpop_jkt": {key.thumbprint(t)}})
	if st, body, _ := e.dpopPost(t, httpapi.PathToken, codeParams(code, verifier), other.proof(t, e, http.MethodPost, tokenURL, "")); st != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("another key: %d %v, want invalid_grant", st, body)
	}
	code, verifier = e.codeWithPKCE(t, url.Values{"dpop_jkt": {key.thumbprint(t)}})
	if st, body, _ := e.dpopPost(t, httpapi.PathToken, codeParams(code, verifier), ""); st != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("no proof: %d %v, want invalid_grant", st, body)
	}
	code, verifier = e.codeWithPKCE(t, url.Values{"dpop_jkt": {key.thumbprint(t)}})
	if st, body, _ := e.dpopPost(t, httpapi.PathToken, codeParams(code, verifier), key.proof(t, e, http.MethodPost, tokenURL, "")); st != http.StatusOK || body["token_type"] != "DPoP" {
		t.Fatalf("the bound key: %d %v", st, body)
	}
}

// TestDPoP_ServerNonce: with AUTH_DPOP_NONCES=on, a token request whose proof carries no
// nonce is answered 400 use_dpop_nonce with a DPoP-Nonce header, and nothing is spent; the same
// request with that nonce in a new proof succeeds. Resource servers ask for no nonce.
func TestDPoP_ServerNonce(t *testing.T) {
	e := newEnvFrom(t, envSetup{vars: map[string]string{config.EnvDPoPNonces: "on"}})
	key := newDPoPKey(t, jose.ES256)
	tokenURL, userinfoURL := e.url(httpapi.PathToken), e.url(httpapi.PathUserinfo)
	code, verifier := e.codeWithPKCE(t, nil)
	st, body, h := e.dpopPost(t, httpapi.PathToken, codeParams(code, verifier), key.proof(t, e, http.MethodPost, tokenURL, ""))
	nonce := h.Get("DPoP-Nonce")
	if st != http.StatusBadRequest || body["error"] != "use_dpop_nonce" || nonce == "" {
		t.Fatalf("no nonce: %d %v nonce %q, want 400 use_dpop_nonce with DPoP-Nonce", st, body, nonce)
	}
	c := key.claims(e, http.MethodPost, tokenURL, "")
	c["nonce"] = "forged-" + nonce
	if st, body, _ := e.dpopPost(t, httpapi.PathToken, codeParams(code, verifier), key.proofWith(t, "dpop+jwt", c)); st != http.StatusBadRequest || body["error"] != "use_dpop_nonce" {
		t.Fatalf("a forged nonce: %d %v", st, body)
	}
	c = key.claims(e, http.MethodPost, tokenURL, "")
	c["nonce"] = nonce
	st, body, h = e.dpopPost(t, httpapi.PathToken, codeParams(code, verifier), key.proofWith(t, "dpop+jwt", c))
	if st != http.StatusOK || h.Get("DPoP-Nonce") == "" {
		t.Fatalf("with the nonce: %d %v", st, body)
	}
	at := body["access_token"].(string)
	if st, _ := dpopGet(t, userinfoURL, "DPoP", at, key.proof(t, e, http.MethodGet, userinfoURL, at)); st != http.StatusOK {
		t.Fatalf("userinfo without a nonce: %d", st)
	}
	// A nonce lives one period and the next: 11 minutes later it is refused.
	e.clock.Advance(11 * time.Minute)
	c = key.claims(e, http.MethodPost, tokenURL, "")
	c["nonce"] = nonce
	refresh := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {body["refresh_token"].(string)}}
	if st, body, _ := e.dpopPost(t, httpapi.PathToken, refresh, key.proofWith(t, "dpop+jwt", c)); st != http.StatusBadRequest || body["error"] != "use_dpop_nonce" {
		t.Fatalf("an old nonce: %d %v", st, body)
	}
}

// TestDPoP_BoundClientMustSendAProof: a client registered with dpop_bound_access_tokens gets
// invalid_request for a token request without a proof, and its code is not spent.
func TestDPoP_BoundClientMustSendAProof(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c, err := e.app.Store.GetClient(ctx, clientID)
	if err != nil {
		t.Fatal(err)
	}
	c.DPoPBoundAccessTokens = true
	if err := e.app.Store.UpdateClient(ctx, clientID, func(oauth.Client) (oauth.Client, error) { return c, nil }); err != nil {
		t.Fatal(err)
	}
	key := newDPoPKey(t, jose.ES256)
	code, verifier := e.codeWithPKCE(t, nil)
	if st, body := e.exchange(t, code, url.Values{"code_verifier": {verifier}}); st != http.StatusBadRequest || body["error"] != "invalid_request" {
		t.Fatalf("no proof: %d %v, want invalid_request", st, body)
	}
	if st, body, _ := e.dpopPost(t, httpapi.PathToken, codeParams(code, verifier), key.proof(t, e, http.MethodPost, e.url(httpapi.PathToken), "")); st != http.StatusOK {
		t.Fatalf("the code with a proof after the refusal: %d %v", st, body)
	}
}

// TestDPoP_TokenRequestsRecordTheirJTIAtTheCodesHome: in a deployment whose codes and tokens
// carry their home, a token request's proof jti is recorded at the home of the code or refresh
// token it presents (the regional store sends it there: docs/multiregion.md), as the single-use
// write it guards is.
func TestDPoP_TokenRequestsRecordTheirJTIAtTheCodesHome(t *testing.T) {
	e := newEnvFrom(t, envSetup{vars: map[string]string{config.EnvHomeRegion: "eu-1"}})
	key := newDPoPKey(t, jose.ES256)
	tokenURL := e.url(httpapi.PathToken)
	code, verifier := e.codeWithPKCE(t, nil)
	if oauth.HomeOf(code) != "eu-1" {
		t.Fatalf("the code %q names no home", code[:6])
	}
	st, body, _ := e.dpopPost(t, httpapi.PathToken, codeParams(code, verifier), key.proof(t, e, http.MethodPost, tokenURL, ""))
	if st != http.StatusOK {
		t.Fatalf("exchange: %d %v", st, body)
	}
	rt, _ := body["refresh_token"].(string)
	st, body, _ = e.dpopPost(t, httpapi.PathToken, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}},
		key.proof(t, e, http.MethodPost, tokenURL, ""))
	if st != http.StatusOK {
		t.Fatalf("refresh: %d %v", st, body)
	}
	if got := e.writes.onetimeHomes(); len(got) != 2 || got[0] != "eu-1" || got[1] != "eu-1" {
		t.Fatalf("the one-time records named homes %q, want the code's and the refresh token's (eu-1, eu-1)", got)
	}
}
