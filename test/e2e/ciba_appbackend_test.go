package e2e

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awseb "github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/go-jose/go-jose/v4"

	"github.com/acmebank/authserver/shared/ciba/appbackend"
	"github.com/acmebank/authserver/shared/ciba/eventbridge"
	"github.com/acmebank/authserver/shared/ciba/eventbridge/ebtest"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
)

const e2eAppBackend = "https://app-backend.bank.example"

// appBackendEnv is the local server with the bank's app backend configured (its id and the
// public half of key) and its CIBA requests published, as in AWS, through the EventBridge
// device, here to the PutEvents recorder.
func appBackendEnv(t *testing.T, key *ecdsa.PrivateKey) (*env, *ebtest.Recorder) {
	t.Helper()
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "app-1", Algorithm: "ES256", Use: "sig"}}})
	e := newEnvFrom(t, envSetup{vars: map[string]string{config.EnvCIBAAppIssuer: e2eAppBackend, config.EnvCIBAAppJWKS: string(jwks)}})
	rec := ebtest.New()
	t.Cleanup(rec.Close)
	device, err := eventbridge.New(awseb.New(awseb.Options{Region: "eu-west-1", BaseEndpoint: aws.String(rec.URL()),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")}), "authserver-ciba")
	if err != nil {
		t.Fatal(err)
	}
	e.app.CIBADevice = device
	e.serve()
	return e, rec
}

// storeDigest is the SHA-256 of the whole embedded store: equal digests, nothing written.
func storeDigest(t *testing.T, e *env) [32]byte {
	t.Helper()
	st, ok := e.app.Store.(interface {
		Backup(io.Writer) (int64, error)
	})
	if !ok {
		t.Fatalf("the store %T cannot be backed up", e.app.Store)
	}
	var b bytes.Buffer
	if _, err := st.Backup(&b); err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b.Bytes())
}

// postDecision posts a decision token to the callback as the app backend does.
func (e *env) postDecision(t *testing.T, contentType, token string) (int, map[string]any, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.url(httpapi.PathBCDecision), strings.NewReader(token))
	req.Header.Set("Content-Type", contentType)
	return do(t, req)
}

// TestAppBackend_StartEventCallbackGrant: over HTTP on the local server, a client's backchannel
// request publishes one event with the ref (never the auth_req_id); the app backend's signed
// approval of that ref is 204; refused callbacks (another content type, a token signed by
// another key, GET) write nothing; the client's poll after the interval gets tokens for alice;
// the same approval again is refused.
func TestAppBackend_StartEventCallbackGrant(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	e, rec := appBackendEnv(t, key)
	id, secret := e.cibaClient(t)
	st, body, _ := e.post(t, httpapi.PathBackchannel, url.Values{"client_id": {id}, "client_secret": {secret},
		"scope": {"openid email"}, "login_hint": {username}, "binding_message": {"W4SCT"}}, false, false)
	authReqID, _ := body["auth_req_id"].(string)
	if st != 200 || authReqID == "" {
		t.Fatalf("backchannel: %d %v", st, body)
	}
	entries := rec.Entries()
	if len(entries) != 1 || entries[0].Source != eventbridge.Source || entries[0].DetailType != eventbridge.DetailType {
		t.Fatalf("events %+v, want one CIBA event", entries)
	}
	if strings.Contains(entries[0].Detail, authReqID) {
		t.Fatal("the event carries the auth_req_id")
	}
	var d eventbridge.Detail
	if err := json.Unmarshal([]byte(entries[0].Detail), &d); err != nil || d.UID != e.uidOf(t, username) || d.BindingMessage != "W4SCT" {
		t.Fatalf("event detail %s: %v", entries[0].Detail, err)
	}

	sign := func(k *ecdsa.PrivateKey, kid string) string {
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithType(appbackend.TokenType).WithHeader("kid", kid))
		if err != nil {
			t.Fatal(err)
		}
		now := e.clock.Now()
		claims, _ := json.Marshal(map[string]any{"iss": e2eAppBackend, "aud": e.app.Config.Issuer, "iat": now.Unix(),
			"exp": now.Add(time.Minute).Unix(), "jti": oauth.NewID("jti_"), "ref": d.Ref, "sub": d.UID, "decision": "approved",
			"amr": []string{"hwk", "face", "mfa"}, "auth_time": now.Unix()})
		jws, err := s.Sign(claims)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := jws.CompactSerialize()
		return out
	}
	before := storeDigest(t, e)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if st, body, _ := e.postDecision(t, "application/json", sign(key, "app-1")); st != 400 || body["error"] != "invalid_request" {
		t.Errorf("a token posted as application/json: %d %v, want 400 invalid_request", st, body)
	}
	if st, body, h := e.postDecision(t, "application/jwt", sign(other, "app-1")); st != 401 || body["error"] != "invalid_token" ||
		!strings.Contains(h.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("a token of another key: %d %v %q, want 401 invalid_token with its challenge", st, body, h.Get("WWW-Authenticate"))
	}
	if resp, err := http.Get(e.url(httpapi.PathBCDecision)); err != nil || resp.StatusCode != 405 {
		t.Errorf("GET the callback: %v %v, want 405", resp, err)
	}
	if storeDigest(t, e) != before {
		t.Fatal("a refused callback wrote to the store")
	}

	approval := sign(key, "app-1")
	if st, body, _ := e.postDecision(t, "application/jwt", approval); st != 204 {
		t.Fatalf("the approval: %d %v", st, body)
	}
	if st, body, _ := e.postDecision(t, "application/jwt", approval); st != 404 && st != 409 {
		t.Errorf("the approval again: %d %v, want refused", st, body)
	}
	e.clock.Advance(cibaTestInterval * time.Second)
	st, tok := e.cibaPoll(t, id, secret, authReqID)
	at, _ := tok["access_token"].(string)
	if st != 200 || !e.tokenValid(at) {
		t.Fatalf("the poll after the approval: %d %v", st, tok)
	}
}
