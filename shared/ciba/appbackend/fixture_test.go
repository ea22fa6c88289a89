package appbackend_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awseb "github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/smithy-go/middleware"
	"github.com/go-jose/go-jose/v4"

	"github.com/acmebank/authserver/shared/ciba"
	"github.com/acmebank/authserver/shared/ciba/appbackend"
	"github.com/acmebank/authserver/shared/ciba/eventbridge"
	"github.com/acmebank/authserver/shared/ciba/eventbridge/ebtest"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/oauth/rar"
	"github.com/acmebank/authserver/shared/store/dynamo"
	"github.com/acmebank/authserver/shared/store/embedded"
)

const (
	issuer     = "https://auth.bank.example/v2/authentication/oauth2"
	appBackend = "https://app-backend.bank.example"
	clientID   = "cl_shop"
	payment    = `[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"123.50"},"creditorName":"Merchant A","creditorAccount":{"iban":"DE02100100109307118603"}}]`
)

// fixture is the CIBA use case over the embedded store, reaching the customer through the
// EventBridge device against the PutEvents recorder, and the callback over it, trusting the
// app backend's two keys (ES256 "app-es", PS256 "app-ps").
type fixture struct {
	t        *testing.T
	st       oauth.Store
	emb      *embedded.Store     // the embedded store (digest), nil on DynamoDB
	calls    *dynamo.CallCounter // DynamoDB's requests, nil on the embedded store
	rec      *ebtest.Recorder
	svc      *ciba.Service
	callback *appbackend.Callback
	now      time.Time
	es       *ecdsa.PrivateKey
	ps       *rsa.PrivateKey
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := newFixtureOn(t, st)
	f.emb = st
	return f
}

// onBothStores runs run on the embedded store and on DynamoDB Local (skipped without
// DYNAMODB_LOCAL_ENDPOINT, failed under CI=true).
func onBothStores(t *testing.T, run func(t *testing.T, f *fixture)) {
	t.Run("embedded", func(t *testing.T) { run(t, newFixture(t)) })
	t.Run("dynamodb", func(t *testing.T) {
		ep := os.Getenv("DYNAMODB_LOCAL_ENDPOINT")
		if ep == "" {
			if os.Getenv("CI") == "true" {
				t.Fatal("DYNAMODB_LOCAL_ENDPOINT is unset under CI")
			}
			t.Skip("DYNAMODB_LOCAL_ENDPOINT is not set")
		}
		counter := dynamo.NewCallCounter()
		client := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(ep),
			Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""),
			APIOptions:  []func(*middleware.Stack) error{counter.Register}})
		table := fmt.Sprintf("appbackend-%d", time.Now().UnixNano())
		if err := dynamo.CreateTable(context.Background(), client, table); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
		})
		f := newFixtureOn(t, dynamo.New(client, table))
		f.calls = counter
		run(t, f)
	})
}

func newFixtureOn(t *testing.T, st oauth.Store) *fixture {
	t.Helper()
	rec := ebtest.New()
	t.Cleanup(rec.Close)
	f := &fixture{t: t, st: st, rec: rec, now: time.Now().UTC().Truncate(time.Second)}
	clock := oauth.ClockFunc(func() time.Time { return f.now })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	registry, err := rar.Shipped()
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := oauth.New(oauth.Deps{Clients: st, Interactions: st, Grants: st, Replay: st, Clock: clock, Log: log,
		Issuer: issuer, Lifetimes: config.Defaults().Lifetimes, AuthorizationDetails: registry})
	if err != nil {
		t.Fatal(err)
	}
	eb := awseb.New(awseb.Options{Region: "eu-west-1", BaseEndpoint: aws.String(rec.URL()),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")})
	device, err := eventbridge.New(eb, "authserver-ciba")
	if err != nil {
		t.Fatal(err)
	}
	f.svc, err = ciba.New(ciba.Deps{Tokens: tokens, Requests: st, Users: st, Limits: st, Keys: st, Device: device, Clock: clock, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := st.CreateClient(ctx, oauth.Client{ID: clientID, Name: "Shop", Scopes: []string{"openid", "profile"},
		RedirectURIs: []string{"https://shop.example/cb"}, GrantTypes: []string{oauth.GrantTypeCIBA},
		BackchannelTokenDeliveryMode: oauth.CIBAModePoll, AuthorizationDetailsTypes: []string{rar.TypePaymentInitiation}}); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"alice", "bob"} {
		if err := st.CreateUser(ctx, oauth.User{UID: "u_" + u, Username: u, CreatedAt: f.now}); err != nil {
			t.Fatal(err)
		}
	}
	if f.es, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		t.Fatal(err)
	}
	if f.ps, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: &f.es.PublicKey, KeyID: "app-es", Algorithm: string(jose.ES256), Use: "sig"},
		{Key: &f.ps.PublicKey, KeyID: "app-ps", Algorithm: string(jose.PS256), Use: "sig"},
	}})
	f.callback, err = appbackend.New(appbackend.Deps{Issuer: appBackend, Audience: issuer, JWKS: jwks,
		Requests: f.svc, Clock: clock, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// start is a request of the shop for user (with details, if any); it returns the reference
// the event gave the app backend ("" when no event was published).
func (f *fixture) start(user, details string) string {
	f.t.Helper()
	c, err := f.st.GetClient(context.Background(), clientID)
	if err != nil {
		f.t.Fatal(err)
	}
	before := len(f.rec.Entries())
	p := url.Values{"scope": {"openid"}, "login_hint": {user}, "binding_message": {"W4SCT"}}
	if details != "" {
		p.Set("authorization_details", details)
	}
	if _, err := f.svc.Start(context.Background(), &c, p); err != nil {
		f.t.Fatalf("start: %v", err)
	}
	got := f.rec.Entries()
	if len(got) == before {
		return ""
	}
	var d eventbridge.Detail
	if err := json.Unmarshal([]byte(got[len(got)-1].Detail), &d); err != nil {
		f.t.Fatal(err)
	}
	return d.Ref
}

// claims are a valid approval of ref by alice, at f.now, with strong authentication.
func (f *fixture) claims(ref string) map[string]any {
	return map[string]any{
		"iss": appBackend, "aud": issuer, "iat": f.now.Unix(), "exp": f.now.Add(2 * time.Minute).Unix(),
		"jti": oauth.NewID("jti_"), "ref": ref, "sub": "u_alice", "decision": "approved",
		"amr": []string{"hwk", "face", "mfa"}, "auth_time": f.now.Add(-10 * time.Second).Unix(),
	}
}

// sign is claims signed as the app backend: with its ES256 key and typ ciba-decision+jwt.
func (f *fixture) sign(claims map[string]any) string {
	return f.signWith(jose.ES256, f.es, "app-es", appbackend.TokenType, claims)
}

func (f *fixture) signWith(alg jose.SignatureAlgorithm, key any, kid, typ string, claims map[string]any) string {
	f.t.Helper()
	opts := (&jose.SignerOptions{}).WithHeader(jose.HeaderKey("kid"), kid)
	if typ != "" {
		opts = opts.WithType(jose.ContentType(typ))
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		f.t.Fatal(err)
	}
	body, _ := json.Marshal(claims)
	jws, err := s.Sign(body)
	if err != nil {
		f.t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// digest is the SHA-256 of the whole store: equal digests, nothing written.
func (f *fixture) digest() [32]byte {
	f.t.Helper()
	var b bytes.Buffer
	if f.emb == nil {
		f.t.Fatal("digest: only the embedded store is digested")
	}
	if _, err := f.emb.Backup(&b); err != nil {
		f.t.Fatal(err)
	}
	return sha256.Sum256(b.Bytes())
}

// state is the stored state of the request ref.
func (f *fixture) state(ref string) oauth.BackchannelRequest {
	f.t.Helper()
	r, err := f.st.GetBackchannelRequest(context.Background(), ref, f.now)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func detailsHash(details string) string {
	return base64.RawURLEncoding.EncodeToString(oauth.DetailsHash(json.RawMessage(details)))
}
