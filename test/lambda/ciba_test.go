package lambda_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/acmebank/authserver/shared/ciba/appbackend"
	"github.com/acmebank/authserver/shared/ciba/eventbridge"
	"github.com/acmebank/authserver/shared/oauth"
)

// The harness's app backend: its id and its ES256 key, whose public half the stack trusts
// (the CibaAppIssuer and CibaAppJwks parameters).
const harnessAppBackend = "https://app-backend.bank.example"

var harnessAppKey, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)

func init() {
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &harnessAppKey.PublicKey, KeyID: "harness-app", Algorithm: "ES256", Use: "sig"}}})
	if err != nil {
		panic(err)
	}
	templateParams["CibaAppIssuer"] = harnessAppBackend
	templateParams["CibaAppJwks"] = string(jwks)
	samples["bcdecision"] = []sampleCase{
		// The sample's signature is no key's: refused, nothing written.
		{"bcdecision.json", wantOAuthError(401, "invalid_token")},
	}
}

// decisionToken is the harness app backend's approval of ref by uid.
func decisionToken(t *testing.T, ref, uid string) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: harnessAppKey},
		(&jose.SignerOptions{}).WithType(appbackend.TokenType).WithHeader("kid", "harness-app"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	claims, _ := json.Marshal(map[string]any{"iss": harnessAppBackend, "aud": sampleBaseURL + "/v2/authentication/oauth2",
		"iat": now.Unix(), "exp": now.Add(2 * time.Minute).Unix(), "jti": oauth.NewID("jti_"), "ref": ref, "sub": uid,
		"decision": "approved", "amr": []string{"hwk", "face", "mfa"}, "auth_time": now.Add(-5 * time.Second).Unix()})
	jws, err := signer.Sign(claims)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := jws.CompactSerialize()
	return out
}

// TestCIBA_ThroughTheBootstraps: the CIBA flow of the AWS deployment, through the built
// backchannel, bcdecision and token bootstraps with the template's environment and IAM: the
// client's request publishes one event (the recorder answers PutEvents; the call is checked
// against the backchannel function's policy, and carries the ref, never the auth_req_id); the
// app backend's signed approval of that ref is recorded (204); the client's poll gets tokens.
func TestCIBA_ThroughTheBootstraps(t *testing.T) {
	for _, n := range []string{"backchannel", "bcdecision", "token"} {
		requireFunction(t, n)
	}
	s := newStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := &client{t: t, ctx: ctx, fns: map[string]*function{}, cookies: map[string]string{}}
	recs := map[string]*recorders{}
	for _, n := range []string{"backchannel", "bcdecision", "token"} {
		f, rec := s.start(t, ctx, n)
		c.fns[n], recs[n] = f, rec
		defer rec.close()
		defer f.stop()
	}
	form := map[string]string{"content-type": "application/x-www-form-urlencoded"}
	creds := url.Values{"client_id": {sampleClientID}, "client_secret": {sampleClientSecret}}

	// 1. The client's request: an auth_req_id, and one event for the app backend.
	p := url.Values{"scope": {"openid"}, "login_hint": {sampleUsername}, "binding_message": {"W4SP-42"}}
	for k, v := range creds {
		p[k] = v
	}
	r := c.do("backchannel", "POST", "/v2/authentication/oauth2/bc-authorize", "", form, p.Encode())
	var started struct {
		AuthReqID string `json:"auth_req_id"`
	}
	if err := json.Unmarshal([]byte(r.Body), &started); r.StatusCode != 200 || err != nil || started.AuthReqID == "" {
		t.Fatalf("backchannel: %d %s", r.StatusCode, r.Body)
	}
	entries := recs["backchannel"].events.Entries()
	if len(entries) != 1 {
		t.Fatalf("%d events published, want 1", len(entries))
	}
	if strings.Contains(entries[0].Detail, started.AuthReqID) {
		t.Fatal("the event carries the auth_req_id")
	}
	var detail eventbridge.Detail
	if err := json.Unmarshal([]byte(entries[0].Detail), &detail); err != nil || detail.Ref != oauth.BackchannelRequestID(started.AuthReqID) || detail.UID != "u-1001" {
		t.Fatalf("event detail %s: %v", entries[0].Detail, err)
	}
	s.checkIAM(t, "backchannel", recs["backchannel"])

	// 2. Polled before the decision: authorization_pending.
	poll := url.Values{"grant_type": {oauth.GrantTypeCIBA}, "auth_req_id": {started.AuthReqID}}
	for k, v := range creds {
		poll[k] = v
	}
	if r := c.do("token", "POST", "/v2/authentication/oauth2/token", "", form, poll.Encode()); r.StatusCode != 400 || !strings.Contains(r.Body, "authorization_pending") {
		t.Fatalf("poll before the decision: %d %s", r.StatusCode, r.Body)
	}

	// 3. The app backend's approval.
	r = c.do("bcdecision", "POST", "/v2/authentication/oauth2/bc-authorize/decision", "", map[string]string{"content-type": "application/jwt"},
		decisionToken(t, detail.Ref, detail.UID))
	if r.StatusCode != 204 {
		t.Fatalf("bcdecision: %d %s", r.StatusCode, r.Body)
	}
	s.checkIAM(t, "bcdecision", recs["bcdecision"])

	// 4. The poll after the interval: tokens.
	time.Sleep(5*time.Second + 500*time.Millisecond)
	r = c.do("token", "POST", "/v2/authentication/oauth2/token", "", form, poll.Encode())
	if tok := tokenResponse(t, r); tok["access_token"] == nil {
		t.Fatalf("poll after the approval: %d %s", r.StatusCode, r.Body)
	}
	s.checkIAM(t, "token", recs["token"])
}
