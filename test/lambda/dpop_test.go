package lambda_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/acmebank/authserver/shared/oauth"
)

// dpopProof is a DPoP proof (RFC 9449 4.2) of key for method and URL, with ath when a token
// is given.
func dpopProof(t *testing.T, key *ecdsa.PrivateKey, method, u, token string) string {
	t.Helper()
	claims := map[string]any{"jti": oauth.NewID("j_"), "htm": method, "htu": u, "iat": time.Now().Unix()}
	if token != "" {
		sum := sha256.Sum256([]byte(token))
		claims["ath"] = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	return signES256(t, key, dpopHeader(), claims)
}

// dpopHeader is a DPoP proof's header: typ dpop+jwt and the public key as jwk.
func dpopHeader() *jose.SignerOptions {
	return (&jose.SignerOptions{EmbedJWK: true}).WithType("dpop+jwt")
}

// signES256 is claims signed with key (an *ecdsa.PrivateKey, or a jose.JSONWebKey to name
// its kid) as a compact JWS with the header opts.
func signES256(t *testing.T, key any, opts *jose.SignerOptions, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, opts)
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

// TestDPoPFlow_ThroughTheBootstraps: the token, userinfo and authorizer functions, with the
// template's environment and IAM, bind tokens to a DPoP key and check its proofs: each proof's
// jti is one conditional PutItem REPLAY#, which their policies must allow (the recorders fail
// the test on any access the template does not grant), a replayed proof is refused, and a
// made-up token with a valid proof is refused with no write.
func TestDPoPFlow_ThroughTheBootstraps(t *testing.T) {
	for _, n := range []string{"authorize", "token", "userinfo", "authorizer"} {
		requireFunction(t, n)
	}
	s := newStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := &client{t: t, ctx: ctx, fns: map[string]*function{}, cookies: map[string]string{}}
	recs := map[string]*recorders{}
	for _, n := range []string{"authorize", "token", "userinfo", "authorizer"} {
		f, rec := s.start(t, ctx, n)
		c.fns[n], recs[n] = f, rec
		defer rec.close()
		defer f.stop()
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	code, verifier, _ := c.signIn()
	const tokenPath, userinfoPath = "/v2/authentication/oauth2/token", "/v2/authentication/oauth2/userinfo"
	hdr := map[string]string{"content-type": "application/x-www-form-urlencoded", "authorization": basicAuth,
		"dpop": dpopProof(t, key, "POST", sampleBaseURL+tokenPath, "")}
	r := c.do("token", "POST", tokenPath, "", hdr, url.Values{
		"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {sampleRedirectURI}, "code_verifier": {verifier}}.Encode())
	tok := tokenResponse(t, r)
	if tok["token_type"] != "DPoP" {
		t.Fatalf("token_type %v, want DPoP", tok["token_type"])
	}
	access := tok["access_token"].(string)

	proof := dpopProof(t, key, "GET", sampleBaseURL+userinfoPath, access)
	get := map[string]string{"authorization": "DPoP " + access, "dpop": proof}
	if r := c.do("userinfo", "GET", userinfoPath, "", get, ""); r.StatusCode != 200 {
		t.Fatalf("userinfo with the proof: %d %s", r.StatusCode, r.Body)
	}
	if r := c.do("userinfo", "GET", userinfoPath, "", get, ""); r.StatusCode != 401 {
		t.Fatalf("userinfo with the same proof again: %d, want 401", r.StatusCode)
	}
	if r := c.do("userinfo", "GET", userinfoPath, "", map[string]string{"authorization": "Bearer " + access}, ""); r.StatusCode != 401 {
		t.Fatalf("userinfo as Bearer: %d, want 401", r.StatusCode)
	}

	// A made-up token with a valid proof of a key of the caller's is refused, and the userinfo
	// function writes nothing for it (no REPLAY# item: the jti is recorded only for a live,
	// bound token).
	madeUp := oauth.NewID("at_")
	before := recs["userinfo"].ddb.writes()
	if r := c.do("userinfo", "GET", userinfoPath, "", map[string]string{"authorization": "DPoP " + madeUp,
		"dpop": dpopProof(t, key, "GET", sampleBaseURL+userinfoPath, madeUp)}, ""); r.StatusCode != 401 {
		t.Fatalf("userinfo with a made-up token: %d, want 401", r.StatusCode)
	}
	if n := recs["userinfo"].ddb.writes() - before; n != 0 {
		t.Fatalf("userinfo made %d DynamoDB writes for a made-up token", n)
	}

	// The bank API's authorizer: the proof names the API's URL on API Gateway's host.
	authorizeToken := func(access, proof string) bool {
		ev := map[string]any{}
		if err := json.Unmarshal(readEvent(t, "authorizer.json"), &ev); err != nil {
			t.Fatal(err)
		}
		ev["identitySource"] = []string{"DPoP " + access}
		h := ev["headers"].(map[string]any)
		h["authorization"], h["dpop"] = "DPoP "+access, proof
		b, _ := json.Marshal(ev)
		o, err := c.fns["authorizer"].invoke(ctx, b)
		if err != nil || o.errType != "" {
			t.Fatalf("authorizer: %v %s", err, o.body)
		}
		var out struct {
			IsAuthorized bool `json:"isAuthorized"`
		}
		_ = json.Unmarshal(o.body, &out)
		return out.IsAuthorized
	}
	authorize := func(proof string) bool { return authorizeToken(access, proof) }
	apiURL := "https://abcdef1234.execute-api.eu-west-1.amazonaws.com/v2/bank/accounts"
	before = recs["authorizer"].ddb.writes()
	if authorizeToken(madeUp, dpopProof(t, key, "GET", apiURL, madeUp)) {
		t.Fatal("the authorizer accepted a made-up token")
	}
	if n := recs["authorizer"].ddb.writes() - before; n != 0 {
		t.Fatalf("the authorizer made %d DynamoDB writes for a made-up token", n)
	}
	proof = dpopProof(t, key, "GET", apiURL, access)
	if !authorize(proof) {
		t.Fatal("the authorizer refused the bound token with its proof")
	}
	if authorize(proof) {
		t.Fatal("the authorizer accepted a replayed proof")
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if authorize(dpopProof(t, other, "GET", apiURL, access)) {
		t.Fatal("the authorizer accepted a proof of another key")
	}
	for n, rec := range recs {
		s.checkIAM(t, n, rec)
	}
}
