package lambda_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/go-jose/go-jose/v4"

	"github.com/acmebank/authserver/shared/admin"
	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/dynamo"
)

// The FAPI driver's size: CI runs a few exchanges, which proves the driver and its budget;
// docs/benchmarks.md's figures come from 200:
//
//	go test ./test/lambda -run TestFAPI2Bootstraps -v -fapi.n 200
var (
	fapiOps   = flag.Int("fapi.n", 5, "FAPI 2.0 code exchanges, and as many refreshes, TestFAPI2Bootstraps measures")
	fapiSpans = flag.Bool("fapi.spans", false, "log each measured call's AWS requests, in ms from its first")
)

// networkLatency is what the token function's proxies hold each request (recorders.delay): a
// round trip to DynamoDB or KMS within a region takes a few milliseconds.
const networkLatency = 10 * time.Millisecond

const (
	issuer    = sampleBaseURL + "/v2/authentication/oauth2"
	tokenPath = "/v2/authentication/oauth2/token"
	parPath   = "/v2/authentication/oauth2/par"
)

// fapiClient is a FAPI 2.0 client registered as authctl registers one (profile fapi2,
// private_key_jwt with an ES256 key, PAR, DPoP-bound tokens, ES256 id_tokens), with the DPoP
// key it binds its tokens to and the latest DPoP nonce each function gave it.
type fapiClient struct {
	id     string
	key    *ecdsa.PrivateKey
	dpop   *ecdsa.PrivateKey
	nonces map[string]string
}

func (s *stack) registerFAPI2Client(t *testing.T, ctx context.Context) *fapiClient {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	dk, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Use: "sig", Algorithm: "ES256"}}})
	c, _, err := admin.New(s.store, authn.DefaultPasswordHasher, oauth.SystemClock{}, nil).CreateClient(ctx, admin.ClientSpec{
		Name: "FAPI App", RedirectURIs: []string{sampleRedirectURI}, Scopes: []string{"openid", "email"},
		Profile: oauth.ProfileFAPI2, RequirePKCE: true, RequirePAR: true, DPoPBoundAccessTokens: true,
		IDTokenSignedResponseAlg: "ES256", TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT, JWKS: jwks,
	})
	if err != nil {
		t.Fatalf("register the FAPI 2.0 client: %v", err)
	}
	return &fapiClient{id: c.ID, key: key, dpop: dk, nonces: map[string]string{}}
}

// form is params with the client's private_key_jwt authentication (RFC 7523 2.2, aud the
// issuer as FAPI 2.0 wants it).
func (k *fapiClient) form(t *testing.T, params url.Values) string {
	t.Helper()
	now := time.Now()
	assertion := signES256(t, jose.JSONWebKey{Key: k.key, KeyID: "k1"}, nil, map[string]any{"iss": k.id, "sub": k.id,
		"aud": issuer, "jti": oauth.NewID("j_"), "iat": now.Unix(), "exp": now.Add(time.Minute).Unix()})
	p := maps.Clone(params)
	p.Set("client_id", k.id)
	p.Set("client_assertion_type", oauth.AssertionTypeJWTBearer)
	p.Set("client_assertion", assertion)
	return p.Encode()
}

// fapiCall is one measured request of the client: the answer, and what its one invocation
// cost the function (CPU) and sent to AWS (the DynamoDB and KMS requests the proxies saw).
type fapiCall struct {
	resp     events.APIGatewayV2HTTPResponse
	cpu      time.Duration
	took     time.Duration
	ddb      []call
	kms      []dynamo.Span
	nonceHit bool // the function asked for a new nonce first (an extra invocation, not measured)
}

// post sends params to the function fn at path with the client's assertion and a DPoP proof
// carrying the function's latest nonce; when the function answers use_dpop_nonce it takes the
// new nonce and sends again, as a client does. What is measured is the last invocation.
func (k *fapiClient) post(c *client, rec *recorders, fn, path string, params url.Values) fapiCall {
	t := c.t
	t.Helper()
	var out fapiCall
	for attempt := 0; ; attempt++ {
		hdr := map[string]string{"content-type": "application/x-www-form-urlencoded",
			"dpop": nonceProof(t, k.dpop, sampleBaseURL+path, k.nonces[fn])}
		body := k.form(t, params)
		f := c.fns[fn]
		cpu0, _ := f.spent()
		ddb0, kms0 := rec.ddb.count(), rec.kms.requests()
		start := time.Now()
		out.resp = c.do(fn, "POST", path, "", hdr, body)
		out.took = time.Since(start)
		cpu1, _ := f.spent()
		out.cpu, out.ddb, out.kms = cpu1-cpu0, rec.ddb.callsSince(ddb0), rec.kms.callsSince(kms0)
		if n := header(out.resp, "DPoP-Nonce"); n != "" {
			k.nonces[fn] = n
		}
		var e struct{ Error string }
		_ = json.Unmarshal([]byte(out.resp.Body), &e)
		if e.Error != "use_dpop_nonce" || attempt > 0 {
			return out
		}
		out.nonceHit = true
		for _, c := range out.ddb {
			if c.Op != "GetItem" {
				t.Errorf("%s: the refused request (use_dpop_nonce) sent %s, want no write", fn, c.Op)
			}
		}
	}
}

// cacheRefill reports whether a DynamoDB request is a warm function's refill of what it
// caches for a while (the client, AUTH_CLIENT_CACHE_TTL; the key registry and the DPoP nonce
// keys, AUTH_KEY_CACHE_TTL), which an operation pays only when the cache has expired: a read
// of CLIENT# or KEYS# items alone.
func cacheRefill(c call) bool {
	if c.Op != "GetItem" && c.Op != "BatchGetItem" {
		return false
	}
	for _, pk := range c.PKs {
		if !strings.HasPrefix(pk, "CLIENT#") && !strings.HasPrefix(pk, "KEYS#") {
			return false
		}
	}
	return len(c.PKs) > 0
}

// shape is the request's operation and the item types it names, sorted:
// "TransactWriteItems CODE# REPLAY# REPLAY#".
func (c call) shape() string {
	types := make([]string, 0, len(c.PKs))
	for _, pk := range c.PKs {
		types = append(types, itemType(pk))
	}
	slices.Sort(types)
	return strings.Join(append([]string{c.Op}, types...), " ")
}

// opBudget is what one kind of operation must send to AWS with a warm function.
type opBudget struct {
	ddb map[string]int // DynamoDB requests by shape (call.shape), cache refills aside
	kms map[string]int // KMS requests by operation
	// ddbTrips are the sequential DynamoDB round trips (requests whose time ranges, from the
	// proxy receiving the request to its answering it, do not overlap), cache refills aside;
	// awsTrips the same over the DynamoDB and KMS requests together.
	ddbTrips, awsTrips int
}

// opStats gathers the measured calls of one kind of operation.
type opStats struct {
	name    string
	calls   []fapiCall
	refills int
	// ddbTrips and awsTrips are each call's sequential round trips (check sets them).
	ddbTrips, awsTrips []int
}

// check holds every call to the budget and counts the cache refills beside it. The requests
// must be exactly the budget's in every call. Their sequential round trips must be the
// budget's in most calls (the median) and at most one more in any: requests the function
// sends together can be seen one after the other when the machine stalls the function between
// the two sends (a shared, loaded machine), while requests it sends one after the other can
// never be seen together, so code that waits for one answer before the next request always
// shows the extra round trip.
func (o *opStats) check(t *testing.T, want opBudget) {
	t.Helper()
	var ddbTrips, awsTrips []int
	for i, fc := range o.calls {
		ddb := map[string]int{}
		var steady []dynamo.Span
		for _, c := range fc.ddb {
			if cacheRefill(c) {
				o.refills++
				continue
			}
			ddb[c.shape()]++
			steady = append(steady, c.Span)
		}
		kms := map[string]int{}
		for _, s := range fc.kms {
			kms[s.Op]++
		}
		if !maps.Equal(ddb, want.ddb) || !maps.Equal(kms, want.kms) {
			t.Errorf("%s %d: DynamoDB %v and KMS %v (cache refills aside), want %v and %v: %+v", o.name, i, ddb, kms, want.ddb, want.kms, fc.ddb)
		}
		ddbTrips = append(ddbTrips, dynamo.SequentialRoundTrips(steady))
		if *fapiSpans {
			t0 := fc.ddb[0].Start
			var b strings.Builder
			for _, sp := range append(slices.Clone(steady), fc.kms...) {
				fmt.Fprintf(&b, " %s[%.1f,%.1f]", sp.Op, ms(sp.Start.Sub(t0)), ms(sp.End.Sub(t0)))
			}
			t.Logf("%s %d:%s", o.name, i, b.String())
		}
		awsTrips = append(awsTrips, dynamo.SequentialRoundTrips(append(steady, fc.kms...)))
	}
	for _, c := range []struct {
		what  string
		trips []int
		want  int
	}{{"DynamoDB", ddbTrips, want.ddbTrips}, {"AWS (DynamoDB and KMS)", awsTrips, want.awsTrips}} {
		if len(c.trips) == 0 {
			continue
		}
		sorted := slices.Sorted(slices.Values(c.trips))
		if med, most := sorted[len(sorted)/2], sorted[len(sorted)-1]; med != c.want || most > c.want+1 {
			t.Errorf("%s: sequential %s round trips per call %v (median %d, max %d), want %d in most calls, never more than %d",
				o.name, c.what, c.trips, med, most, c.want, c.want+1)
		}
	}
	o.ddbTrips, o.awsTrips = ddbTrips, awsTrips
}

// tally is how many calls had each number of round trips: "2×19 3×1" (19 calls of 2, one of 3).
func tally(trips []int) string {
	n := map[int]int{}
	for _, v := range trips {
		n[v]++
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%d×%d", k, n[k]))
	}
	return strings.Join(parts, " ")
}

// summary is one line of the report: CPU per invocation, duration, AWS requests per operation.
func (o *opStats) summary() string {
	if len(o.calls) == 0 {
		return o.name + ": none"
	}
	var cpu time.Duration
	var took []time.Duration
	ops := map[string]int{}
	kmsOps := map[string]int{}
	nonceHits := 0
	for _, fc := range o.calls {
		cpu += fc.cpu
		took = append(took, fc.took)
		for _, c := range fc.ddb {
			ops[c.Op]++
		}
		for _, s := range fc.kms {
			kmsOps[s.Op]++
		}
		if fc.nonceHit {
			nonceHits++
		}
	}
	slices.Sort(took)
	n := float64(len(o.calls))
	per := func(m map[string]int) string {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(m[k])/n))
		}
		return strings.Join(parts, ", ")
	}
	return fmt.Sprintf("%-8s %4d: CPU %5.2f ms/invocation, duration p50 %5.1f p99 %5.1f ms; per call DynamoDB {%s} (cache refills %d in all), KMS {%s}; "+
		"sequential round trips (trips×calls, refills aside) DynamoDB %s, with KMS %s; nonce retries %d",
		o.name, len(o.calls), ms(cpu)/n, ms(pct(took, 50)), ms(pct(took, 99)), per(ops), o.refills, per(kmsOps),
		tally(o.ddbTrips), tally(o.awsTrips), nonceHits)
}

// TestFAPI2Bootstraps_ExchangeAndRefreshAreTwoSequentialDynamoDBRoundTrips drives FAPI 2.0
// flows through the par, authorize and token bootstraps in the production configuration the
// template gives a FAPI deployment (DPoPNonces=Enabled, KMS Sign mode; DynamoDB Local,
// local-kms): a client registered with the fapi2 profile pushes its request with
// private_key_jwt and a DPoP proof carrying the PAR function's nonce, the user signs in and
// allows, and the client exchanges the code with private_key_jwt and a DPoP proof carrying the
// token function's nonce, then refreshes. Each exchange and each refresh, once the function is
// warm, must send exactly: DynamoDB GetItem (the code) beside one TransactWriteItems (the
// code's consumption and the assertion's and the proof's jtis), then one TransactWriteItems
// (the issuance) beside one KMS Sign (the ES256 id_token): two sequential round trips; a
// refresh GetItem (the token), KMS Sign, then one TransactWriteItems (the grant, the refresh
// token kept, the new access token, the two jtis): two sequential DynamoDB round trips, three
// with the Sign. The requests are asserted with the item types they name (call.shape). "Sequential"
// is counted on what the token function's proxies see: requests whose time ranges, from the
// proxy receiving a request to its starting the answer, do not overlap
// (dynamo.SequentialRoundTrips); the proxies hold each request networkLatency, as the network
// in a region does, and a call may show one round trip more when the machine stalls the
// function between two requests it sends together (opStats.check). A warm function's cache
// refills (GetItem of its client or KEYS# items once their TTL runs out) are counted aside.
// It logs (-v) the token function's init time and CPU, peak RSS, and per exchange and per
// refresh the CPU of the invocation, its duration (with the held network time) and the AWS
// requests. LAMBDA_BINARIES_DIR measures another commit's token bootstrap the same way.
func TestFAPI2Bootstraps_ExchangeAndRefreshAreTwoSequentialDynamoDBRoundTrips(t *testing.T) {
	names := []string{"par", "authorize", "token"}
	for _, n := range append(names, "rotatekeys") {
		requireFunction(t, n)
	}
	s := newStackWith(t, map[string]string{"SigningMode": "kms-sign", "DPoPNonces": "Enabled"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	k := s.registerFAPI2Client(t, ctx)
	c := &client{t: t, ctx: ctx, fns: map[string]*function{}, cookies: map[string]string{}}
	recs := map[string]*recorders{}
	for _, n := range names {
		f, rec := s.start(t, ctx, n)
		c.fns[n], recs[n] = f, rec
		defer rec.close()
		defer f.stop()
	}
	recs["token"].delay(networkLatency)
	if e := envIn(t, s.params, "token", nil)["AUTH_DPOP_NONCES"]; e != "on" {
		t.Fatalf("the template gives the token function AUTH_DPOP_NONCES=%q with DPoPNonces=Enabled, want on", e)
	}

	// flow pushes, signs in, exchanges and refreshes once, and returns the two measured calls.
	flow := func() (exchange, refresh fapiCall) {
		verifier, challenge := pkce()
		state := "st-" + verifier[:8]
		c.cookies = map[string]string{} // each flow is another browser
		push := k.post(c, recs["par"], "par", parPath, url.Values{"response_type": {"code"}, "redirect_uri": {sampleRedirectURI},
			"scope": {"openid email"}, "state": {state}, "nonce": {"n-" + verifier[8:16]},
			"code_challenge": {challenge}, "code_challenge_method": {"S256"},
			"prompt": {"consent"}}) // each flow shows the consent page: the earlier flows' grants would let it be skipped
		uri, _ := jsonBody(t, push.resp)["request_uri"].(string)
		if push.resp.StatusCode != 201 || uri == "" {
			t.Fatalf("PAR: %d %s", push.resp.StatusCode, push.resp.Body)
		}
		code := c.authorizeCode(url.Values{"client_id": {k.id}, "request_uri": {uri}}.Encode(), state)
		exchange = k.post(c, recs["token"], "token", tokenPath, url.Values{"grant_type": {"authorization_code"}, "code": {code},
			"redirect_uri": {sampleRedirectURI}, "code_verifier": {verifier}})
		tok := tokenResponse(t, exchange.resp)
		if tok["token_type"] != "DPoP" || tok["id_token"] == nil {
			t.Fatalf("the FAPI exchange gave %v, want DPoP-bound tokens and an id_token", tok)
		}
		refresh = k.post(c, recs["token"], "token", tokenPath, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)}})
		if again := tokenResponse(t, refresh.resp); again["refresh_token"] != tok["refresh_token"] {
			t.Fatalf("the fapi2 client's refresh rotated its token (%v), want it kept (the profile's default)", again)
		}
		return exchange, refresh
	}

	// The first flow warms the functions (client, key registry, the nonces): its figures are
	// the cold ones, reported apart.
	coldExchange, coldRefresh := flow()
	exchanges, refreshes := &opStats{name: "exchange"}, &opStats{name: "refresh"}
	began := time.Now()
	for range *fapiOps {
		e, r := flow()
		exchanges.calls = append(exchanges.calls, e)
		refreshes.calls = append(refreshes.calls, r)
		if t.Failed() {
			break
		}
	}
	elapsed := time.Since(began)

	exchanges.check(t, opBudget{ddb: map[string]int{"GetItem CODE#": 1, "TransactWriteItems CODE# REPLAY# REPLAY#": 1,
		"TransactWriteItems GRANT# TOKEN# TOKEN#": 1}, kms: map[string]int{"Sign": 1}, ddbTrips: 2, awsTrips: 2})
	refreshes.check(t, opBudget{ddb: map[string]int{"GetItem TOKEN#": 1, "TransactWriteItems GRANT# REPLAY# REPLAY# TOKEN# TOKEN#": 1}, kms: map[string]int{"Sign": 1}, ddbTrips: 2, awsTrips: 3})
	// A warm function refills each cache at most once per its TTL (30 s for the client, 1 min
	// for the key registry and the nonce keys, the template's); three per 30 s and kind of
	// operation bounds it: more would be a cache that stopped caching.
	if limit := 3 * (1 + int(elapsed/(30*time.Second))); exchanges.refills+refreshes.refills > limit {
		t.Errorf("%d cache refills in %v of exchanges and refreshes, want at most %d", exchanges.refills+refreshes.refills, elapsed.Round(time.Second), limit)
	}

	f := c.fns["token"]
	rss, err := f.peakRSS()
	if err != nil {
		t.Fatal(err)
	}
	bin := bootstrap(t, "token")
	t.Logf("FAPI 2.0 (ES256, private_key_jwt, DPoP with nonces, kms-sign), token bootstrap %s\n"+
		"token    init %.1f ms (CPU %.1f ms), peak RSS %.1f MiB; first exchange CPU %.2f ms, first refresh %.2f ms (cold)\n%s\n%s\n%d flows in %.1f s",
		bin, ms(f.initDuration()), ms(f.initCPU), float64(rss)/(1<<20), ms(coldExchange.cpu), ms(coldRefresh.cpu),
		exchanges.summary(), refreshes.summary(), len(exchanges.calls), elapsed.Seconds())
	// Every function's requests against its template policy: the authorize function's
	// decision on a pushed request spends the request_uri (PutItem REPLAY#request_uri:…).
	for _, n := range []string{"par", "authorize", "token"} {
		s.checkIAM(t, n, recs[n])
	}
	if t.Failed() {
		t.Logf("token log:\n%.20000s", f.out.String())
	}
}
