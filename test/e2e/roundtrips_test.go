package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"testing"

	"golang.org/x/oauth2"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/go-jose/go-jose/v4"

	"github.com/acmebank/authserver/shared/app"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/keys/kmskey"
	"github.com/acmebank/authserver/shared/keys/kmstest"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/dynamo"
)

// newAWSEnv is the service as deployed: the DynamoDB store on DynamoDB Local and the KMS key
// backend on local-kms, both through the real SDK clients, each with a call counter (KMS's in
// the transport in front of its client, which also injects the KMS failures).
func newAWSEnv(t *testing.T) (*env, *kmstest.Transport, *dynamo.CallCounter) {
	t.Helper()
	return newAWSEnvWith(t, nil)
}

// newAWSEnvWith is newAWSEnv with more AUTH_* variables.
func newAWSEnvWith(t *testing.T, extra map[string]string) (*env, *kmstest.Transport, *dynamo.CallCounter) {
	t.Helper()
	ddbCalls := dynamo.NewCallCounter()
	e, kmsCalls := newInstrumentedAWSEnv(t, awsEnvSetup{vars: extra, apiOptions: []func(*middleware.Stack) error{ddbCalls.Register}})
	return e, kmsCalls, ddbCalls
}

// awsEnvSetup is what the AWS-backed envs of these tests differ in: more AUTH_* variables,
// the indexes' projection ("": the table's own) and the middleware that counts or meters the
// DynamoDB client's requests.
type awsEnvSetup struct {
	vars       map[string]string
	projection types.ProjectionType
	apiOptions []func(*middleware.Stack) error
}

// newInstrumentedAWSEnv is an env over a new table in DynamoDB Local, through a client with
// s's middleware, and local-kms through the counting transport it returns.
func newInstrumentedAWSEnv(t *testing.T, s awsEnvSetup) (*env, *kmstest.Transport) {
	t.Helper()
	endpoint := dynamoLocalEndpoint(t)
	ctx := context.Background()
	kmsClient, kmsCalls := kmstest.New(t)
	base, err := dynamo.NewClient(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	ddb := dynamodb.New(base.Options(), func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, s.apiOptions...) })
	table := fmt.Sprintf("e2e-aws-%d", time.Now().UnixNano())
	if s.projection != "" {
		def := dynamo.TableDefinition(table)
		for i := range def.GlobalSecondaryIndexes {
			def.GlobalSecondaryIndexes[i].Projection = &types.Projection{ProjectionType: s.projection}
		}
		if _, err := ddb.CreateTable(ctx, def); err != nil {
			t.Fatal(err)
		}
	}
	if err := dynamo.CreateTable(ctx, ddb, table); err != nil { // waits for it and enables TTL
		t.Fatal(err)
	}
	backend := kmskey.New(kmsClient, kmskey.Options{})
	vars := map[string]string{config.EnvStore: "dynamodb", config.EnvTable: table, config.EnvKeyBackend: "kms",
		config.EnvClientCacheTTL: "30s"}
	maps.Copy(vars, s.vars)
	e := newEnvFrom(t, envSetup{
		vars: vars,
		build: func(cfg config.Config, log *slog.Logger) (*app.App, error) {
			return app.Assemble(cfg, dynamo.New(ddb, table), backend, log)
		},
	})
	return e, kmsCalls
}

// TestKMSFailure_NoUsableHalfGrant: when KMS keeps failing the signature, the exchange answers
// 503 temporarily_unavailable, leaves no live grant behind, and the retried code is reuse
// (DESIGN.md decision 7). A refresh signs before it writes: one that cannot sign answers 503
// and changes nothing, so the grant's tokens keep working and the retry after the 503 gets a
// new pair; the refresh token presented once more after that is reuse and revokes the grant.
func TestKMSFailure_NoUsableHalfGrant(t *testing.T) {
	e, kmsTr, _ := newAWSEnv(t)
	ctx := context.Background()
	liveGrants := func() int {
		recs, err := e.app.Store.ListGrants(ctx, oauth.GrantFilter{UID: "uid-alice"}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return len(recs)
	}
	// failSigns makes every attempt of the next signature fail. The test client makes one
	// attempt per call (its retries are off, so counts are exact); the test checks it was used.
	const attempts = 1
	failSigns := func(f kmstest.Fault, op func()) {
		t.Helper()
		before := kmsTr.Calls("Sign")
		kmsTr.Fail("Sign", f, attempts)
		op()
		if n := kmsTr.Calls("Sign") - before; n != attempts {
			t.Fatalf("%d Sign attempts, want %d", n, attempts)
		}
	}
	code := e.code(t, url.Values{"scope": {"openid email"}})
	var st int
	var body map[string]any
	var h http.Header
	failSigns(kmstest.Throttling, func() {
		st, body, h = e.post(t, httpapi.PathToken, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI}}, false, false)
	})
	if st != 503 || body["error"] != "temporarily_unavailable" || h.Get("Retry-After") == "" {
		t.Fatalf("exchange while KMS throttles: %d %v", st, body)
	}
	if n := liveGrants(); n != 0 {
		t.Fatalf("%d live grants after a failed exchange", n)
	}
	if st, body := e.exchange(t, code, nil); st != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("retried code %d %v", st, body)
	}

	tok := e.tokens(t, "openid email")
	failSigns(kmstest.Internal, func() {
		st, body, h = e.post(t, httpapi.PathToken, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)}}, false, false)
	})
	if st != 503 || body["error"] != "temporarily_unavailable" || h.Get("Retry-After") == "" {
		t.Fatalf("refresh while KMS fails: %d %v Retry-After=%q, want 503 temporarily_unavailable with Retry-After", st, body, h.Get("Retry-After"))
	}
	if !e.tokenValid(tok["access_token"].(string)) {
		t.Fatal("a refresh that failed to sign ended the grant's access token")
	}
	st, fresh := e.refresh(t, tok["refresh_token"].(string), nil)
	if st != 200 || fresh["id_token"] == nil {
		t.Fatalf("the retry after the 503: %d %v, want 200 with an id_token", st, fresh)
	}
	if n := liveGrants(); n != 1 {
		t.Fatalf("%d live grants after the retried refresh, want 1", n)
	}
	e.refreshRefused(t, tok["refresh_token"].(string), "the spent refresh token once more")
	if e.tokenValid(fresh["access_token"].(string)) || liveGrants() != 0 {
		t.Fatal("reuse of the spent refresh token did not revoke the grant")
	}
}

// TestRoundTrips_AWSCallsPerOperation runs the service as deployed — DynamoDB (DynamoDB Local)
// and KMS (local-kms, through the real SDK) — and counts every AWS request each
// operation sends once the function is warm (DESIGN.md decision 3): a code exchange is one
// conditional update, then one transaction beside one Sign; a refresh is one read, one Sign,
// then one transaction that spends the token and writes the new pair; validating an access
// token is one read; serving the JWKS is none.
func TestRoundTrips_AWSCallsPerOperation(t *testing.T) {
	e, kmsCalls, ddbCalls := newAWSEnv(t)
	// Requests sent together must overlap however the machine schedules them: with a network's
	// latency they do (see SetLatency), so the sequential round trips are the code's.
	ddbCalls.SetLatency(10 * time.Millisecond)

	// Warm up as a running function would be: the client, the current key and the JWKS cached.
	warm := e.tokens(t, "openid email")
	e.refresh(t, warm["refresh_token"].(string), nil)
	getJWKS := func() {
		req, _ := http.NewRequest(http.MethodGet, e.url(httpapi.PathJWKS), nil)
		if st, _, _ := do(t, req); st != 200 {
			t.Fatalf("jwks %d", st)
		}
	}
	getJWKS()

	measure := func(name string, wantDDB, wantKMS map[string]int, op func()) {
		t.Helper()
		ddbCalls.Reset()
		kmsCalls.Reset()
		op()
		if got := ddbCalls.Calls(); !maps.Equal(got, wantDDB) {
			t.Errorf("%s: DynamoDB requests %v, want %v", name, got, wantDDB)
		}
		if got := kmsCalls.Counts(); !maps.Equal(got, wantKMS) {
			t.Errorf("%s: KMS requests %v, want %v", name, got, wantKMS)
		}
		t.Logf("%s: DynamoDB %v, KMS %v", name, ddbCalls.Calls(), kmsCalls.Counts())
	}
	none := map[string]int{}
	code := e.code(t, url.Values{"scope": {"openid email"}})
	var tok map[string]any
	measure("code exchange", map[string]int{"UpdateItem": 1, "TransactWriteItems": 1}, map[string]int{"Sign": 1}, func() {
		var st int
		if st, tok = e.exchange(t, code, nil); st != 200 {
			t.Fatalf("exchange %d %v", st, tok)
		}
	})
	var fresh map[string]any
	measure("refresh", map[string]int{"GetItem": 1, "TransactWriteItems": 1}, map[string]int{"Sign": 1}, func() {
		var st int
		if st, fresh = e.refresh(t, tok["refresh_token"].(string), nil); st != 200 {
			t.Fatalf("refresh %d %v", st, fresh)
		}
	})
	measure("access token validation", map[string]int{"GetItem": 1}, none, func() {
		if !e.tokenValid(fresh["access_token"].(string)) {
			t.Fatal("the refreshed access token is not valid")
		}
	})
	measure("JWKS (warm)", none, none, getJWKS)
	measure("revoke refresh token", map[string]int{"GetItem": 2, "TransactWriteItems": 1}, none, func() {
		if st := e.revoke(t, httpapi.PathRevoke, fresh["refresh_token"].(string), nil); st != 200 {
			t.Fatalf("revoke %d", st)
		}
	})
	if e.tokenValid(fresh["access_token"].(string)) {
		t.Fatal("the access token survived the revocation")
	}

	// A refresh that keeps its token (rotation off, a fapi2 client's default) costs the same:
	// one read, one Sign, one transaction.
	e.setRotation(t, oauth.RotationOff)
	kept := e.tokens(t, "openid email")
	measure("refresh that keeps its token", map[string]int{"GetItem": 1, "TransactWriteItems": 1}, map[string]int{"Sign": 1}, func() {
		if st, body := e.refresh(t, kept["refresh_token"].(string), nil); st != 200 || body["refresh_token"] != kept["refresh_token"] {
			t.Fatalf("refresh %d %v, want the same refresh token", st, body)
		}
	})
	e.setRotation(t, "")
	e.tokens(t, "openid") // the client cached again

	// At the token endpoint the proof's jti is recorded in the write that consumes the code:
	// one TransactWriteItems (the code's update and the jti's conditional put) with a GetItem
	// of the code sent at the same time (a transaction returns no item), then the issuance.
	// Two sequential round trips, as without DPoP.
	key := newDPoPKey(t, jose.ES256)
	code, verifier := e.codeWithPKCE(t, url.Values{"scope": {"openid email"}})
	measure("code exchange with DPoP", map[string]int{"GetItem": 1, "TransactWriteItems": 2}, map[string]int{"Sign": 1}, func() {
		var st int
		if st, tok, _ = e.dpopPost(t, httpapi.PathToken, codeParams(code, verifier), key.proof(t, e, http.MethodPost, e.url(httpapi.PathToken), "")); st != 200 {
			t.Fatalf("exchange with DPoP %d %v", st, tok)
		}
	})
	if n := ddbCalls.RoundTrips(); n != 2 {
		t.Errorf("code exchange with DPoP: %d sequential DynamoDB round trips (%+v), want 2", n, ddbCalls.Spans())
	}
	// At a resource the jti is written only once the token is found live and bound to the
	// proof's key: the GetItem, then the PutItem, never at once (a refused request writes
	// nothing: TestResources_RefusedDPoPRequestWritesNothing).
	at := tok["access_token"].(string)
	measure("DPoP-bound token validation (userinfo)", map[string]int{"GetItem": 1, "PutItem": 1}, none, func() {
		u := e.url(httpapi.PathUserinfo)
		if st, _ := dpopGet(t, u, "DPoP", at, key.proof(t, e, http.MethodGet, u, at)); st != 200 {
			t.Fatalf("userinfo with DPoP %d", st)
		}
	})
	spans := ddbCalls.Spans()
	if len(spans) != 2 || spans[0].Op != "GetItem" || spans[1].Op != "PutItem" || spans[1].Start.Before(spans[0].End) {
		t.Errorf("DPoP-bound token validation: requests %+v, want the GetItem answered before the PutItem is sent", spans)
	}

	// A FAPI 2.0 client (private_key_jwt and DPoP): the assertion's and the proof's jtis are
	// both recorded in the code's consuming transaction, and in the refresh's one; each is two
	// sequential DynamoDB round trips, as a plain exchange and refresh are.
	fapi := e.registerFAPI2KeyedClient(t)
	fapiKey := newDPoPKey(t, jose.ES256)
	fapiCode, fapiVerifier := e.fapiPushAndAuthorize(t, fapi, fapiKey)
	fapiToken := func(params url.Values) (int, map[string]any) {
		return e.clientPost(t, httpapi.PathToken, fapi.assertionFor(t, e, e.app.Config.Issuer), params,
			fapiKey.proof(t, e, http.MethodPost, e.url(httpapi.PathToken), ""))
	}
	var fapiTok map[string]any
	measure("FAPI code exchange (private_key_jwt + DPoP)", map[string]int{"GetItem": 1, "TransactWriteItems": 2}, map[string]int{"Sign": 1}, func() {
		var st int
		if st, fapiTok = fapiToken(codeParams(fapiCode, fapiVerifier)); st != 200 {
			t.Fatalf("FAPI exchange %d %v", st, fapiTok)
		}
	})
	if n := ddbCalls.RoundTrips(); n != 2 {
		t.Errorf("FAPI code exchange: %d sequential DynamoDB round trips (%+v), want 2", n, ddbCalls.Spans())
	}
	measure("FAPI refresh (private_key_jwt + DPoP)", map[string]int{"GetItem": 1, "TransactWriteItems": 1}, map[string]int{"Sign": 1}, func() {
		if st, body := fapiToken(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {fapiTok["refresh_token"].(string)}}); st != 200 {
			t.Fatalf("FAPI refresh %d %v", st, body)
		}
	})
	if n := ddbCalls.RoundTrips(); n != 2 {
		t.Errorf("FAPI refresh: %d sequential DynamoDB round trips (%+v), want 2", n, ddbCalls.Spans())
	}

	// A pushed request (PAR at the decision): opening its page reads the pushed request, never
	// deletes it; the decision spends the request_uri (one conditional PutItem at its home) and
	// deletes the pushed request, besides what the decision of a plain request costs.
	decide := func(b *browser) {
		if loc := b.decide(e, "allow"); loc.Query().Get("code") == "" {
			t.Fatalf("redirect %s without a code", loc.Redacted())
		}
	}
	// prompt=consent: the grants above would let the consent page be skipped (remembered
	// consent), and these are the figures of the page's decision.
	plain := newBrowser(t)
	plain.open(e.authorizeURL(url.Values{"prompt": {"consent"}}))
	plain.login(e, username, password)
	measure("decision of a plain request", map[string]int{"GetItem": 4, "PutItem": 1, "DeleteItem": 1}, none, func() { decide(plain) })
	// A sign-in whose consent is remembered: the password's reads and the session, the user's
	// grants listed by one Query of GSI1 (no Scan), the grant relied on read again, and the
	// code issued as the decision above issues it.
	remembered := newBrowser(t)
	remembered.open(e.authorizeURL(nil))
	measure("sign-in with a remembered consent", map[string]int{"GetItem": 5, "Query": 1, "PutItem": 3, "UpdateItem": 3, "DeleteItem": 2}, none, func() {
		if resp := remembered.login(e, username, password); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("a sign-in with a remembered consent answered %d", resp.StatusCode)
		}
	})
	p := pushedParams(oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier()))
	p.Set("prompt", "consent")
	st, pushedBody := e.push(t, p)
	uri, _ := pushedBody["request_uri"].(string)
	if st != http.StatusCreated || uri == "" {
		t.Fatalf("push: %d %v", st, pushedBody)
	}
	pushed := newBrowser(t)
	measure("open a pushed request's page", map[string]int{"GetItem": 1, "PutItem": 1}, none, func() {
		if resp := pushed.open(e.parURL(uri)); resp.StatusCode != http.StatusOK {
			t.Fatalf("open: %d", resp.StatusCode)
		}
	})
	pushed.login(e, username, password)
	measure("decision of a pushed request", map[string]int{"GetItem": 4, "PutItem": 2, "DeleteItem": 2}, none, func() { decide(pushed) })
}

// dynamoLocalEndpoint is DYNAMODB_LOCAL_ENDPOINT: the test skips without it, and fails under
// CI, where .ci/run starts DynamoDB Local.
func dynamoLocalEndpoint(t *testing.T) string {
	t.Helper()
	endpoint := os.Getenv("DYNAMODB_LOCAL_ENDPOINT")
	if endpoint == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("DYNAMODB_LOCAL_ENDPOINT is unset under CI")
		}
		t.Skip("DYNAMODB_LOCAL_ENDPOINT is unset; start DynamoDB Local with scripts/dynamodb-local.sh")
	}
	return endpoint
}
