package lambda_test

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// The load driver's size. CI runs a few flows per signing mode, which proves the driver and
// the figures it reports; docs/scale.md's figures come from a longer run, with the emulators
// started as scripts/test.sh starts them:
//
//	go test ./test/lambda -run TestLoad -v -load.flows 300
var (
	loadFlows = flag.Int("load.flows", 3, "complete flows per signing mode TestLoad runs through the bootstraps")
	loadModes = flag.String("load.modes", "kms-sign,data-key", "the template SigningMode values TestLoad deploys, comma-separated")
)

// loadFunctions are the functions a complete flow goes through.
var loadFunctions = []string{"authorize", "token", "jwks", "userinfo", "authorizer", "revoke"}

// TestLoad_CompleteFlowsThroughTheBootstraps runs complete flows through the built bootstraps
// in the production configuration (DynamoDB Local, local-kms), one instance per function as
// Lambda runs one invocation at a time per instance, and reports per function the inputs of
// the cost model (docs/scale.md): invocations, CPU time and duration per invocation, peak
// memory, and the DynamoDB and KMS requests per invocation. A flow is: authorize (login page),
// login, consent, code exchange with openid, JWKS, the authorizer on a bank route, userinfo,
// refresh, revocation of the refresh token. In data-key mode it also proves that no
// id_token costs a KMS Sign: the token function decrypts its key once and signs in memory.
func TestLoad_CompleteFlowsThroughTheBootstraps(t *testing.T) {
	for _, n := range loadFunctions {
		requireFunction(t, n)
	}
	for _, mode := range strings.Split(*loadModes, ",") {
		t.Run(mode, func(t *testing.T) { runLoad(t, mode, *loadFlows) })
	}
}

func runLoad(t *testing.T, mode string, flows int) {
	s := newStackIn(t, mode)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := &client{t: t, ctx: ctx, fns: map[string]*function{}, cookies: map[string]string{}}
	recs := map[string]*recorders{}
	for _, n := range loadFunctions {
		f, rec := s.start(t, ctx, n)
		c.fns[n], recs[n] = f, rec
		defer rec.close()
		defer f.stop()
	}
	began := time.Now()
	for range flows {
		c.cookies = map[string]string{} // each flow is another browser
		code, verifier, nonce := c.signIn()
		formHdr := map[string]string{"content-type": "application/x-www-form-urlencoded", "authorization": basicAuth}
		tok := tokenResponse(t, c.do("token", "POST", "/v2/authentication/oauth2/token", "", formHdr, url.Values{
			"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {sampleRedirectURI}, "code_verifier": {verifier}}.Encode()))
		idToken, _ := tok["id_token"].(string)
		r := c.do("jwks", "GET", "/v2/authentication/oauth2/.well-known/jwks.json", "", nil, "")
		verifyIDToken(t, idToken, r.Body, nonce)
		access, _ := tok["access_token"].(string)
		checkAuthorizer(t, c, access, true)
		r = c.do("userinfo", "GET", "/v2/authentication/oauth2/userinfo", "", map[string]string{"authorization": "Bearer " + access}, "")
		if r.StatusCode != 200 {
			t.Fatalf("userinfo: %d %s", r.StatusCode, r.Body)
		}
		refresh, _ := tok["refresh_token"].(string)
		tok2 := tokenResponse(t, c.do("token", "POST", "/v2/authentication/oauth2/token", "", formHdr,
			url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}}.Encode()))
		if _, ok := tok2["id_token"].(string); !ok {
			t.Fatalf("refresh with openid gave no id_token: %v", tok2)
		}
		r = c.do("revoke", "POST", "/v2/authentication/token/revoke", "", formHdr,
			url.Values{"token": {tok2["refresh_token"].(string)}, "token_type_hint": {"refresh_token"}}.Encode())
		if r.StatusCode != 200 {
			t.Fatalf("revoke: %d %s", r.StatusCode, r.Body)
		}
		if t.Failed() {
			return
		}
	}
	elapsed := time.Since(began)

	// Every id_token (an exchange and a refresh per flow) is one KMS Sign in kms-sign mode and
	// none in data-key mode, where the token function's only KMS request is its key's Decrypt.
	k := recs["token"].kms
	switch mode {
	case "kms-sign":
		if got := k.count("kms:Sign"); got != 2*flows {
			t.Errorf("kms-sign: %d KMS Sign requests for %d id_tokens", got, 2*flows)
		}
	case "data-key":
		if sign, dec := k.count("kms:Sign"), k.count("kms:Decrypt"); sign != 0 || dec != 1 {
			t.Errorf("data-key: %d KMS Sign and %d Decrypt requests for %d id_tokens, want 0 and 1 (per instance)", sign, dec, 2*flows)
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "%d complete flows, signing mode %s, %.1f s (%.1f ms per flow, sequential)\n", flows, mode, elapsed.Seconds(), ms(elapsed)/float64(flows))
	fmt.Fprintf(&b, "| function | invocations | CPU ms/inv | duration p50 | p95 | p99 ms | peak RSS MiB | DynamoDB req/inv | items read/inv | items written/inv (in transactions) | KMS req/inv |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, n := range loadFunctions {
		f := c.fns[n]
		cpu, inv := f.cpuPerInvocation()
		f.mu.Lock()
		d := slices.Clone(f.durations)
		f.mu.Unlock()
		rss, err := f.peakRSS()
		if err != nil {
			t.Fatal(err)
		}
		if inv == 0 || len(d) != inv || cpu <= 0 || rss <= 0 {
			t.Errorf("%s: no figures (%d invocations, %d durations, CPU %v, RSS %d)", n, inv, len(d), cpu, rss)
			continue
		}
		slices.Sort(d)
		kmsReqs := recs[n].kms.total()
		reads, writes, tx := recs[n].ddb.items()
		per := func(n int) float64 { return float64(n) / float64(inv) }
		fmt.Fprintf(&b, "| %s | %d | %.2f | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f (%.2f) | %.3f |\n", n, inv, ms(cpu),
			ms(pct(d, 50)), ms(pct(d, 95)), ms(pct(d, 99)), float64(rss)/(1<<20),
			per(recs[n].ddb.count()), per(reads), per(writes), per(tx), per(kmsReqs))
		s.checkIAM(t, n, recs[n])
	}
	t.Log("\n" + b.String())
}

// pct is the p-th percentile of sorted durations (nearest rank).
func pct(sorted []time.Duration, p int) time.Duration {
	i := (p*len(sorted) + 99) / 100
	return sorted[max(i-1, 0)]
}

// signIn drives the authorize bootstrap through the login and consent pages as a browser
// would, for the sample user and client with openid, and returns the code, its PKCE verifier
// and the nonce.
func (c *client) signIn() (code, verifier, nonce string) {
	c.t.Helper()
	verifier, challenge := pkce()
	state, nonce := "st-"+verifier[:8], "n-"+verifier[8:16]
	q := url.Values{"client_id": {sampleClientID}, "response_type": {"code"}, "redirect_uri": {sampleRedirectURI},
		"scope": {"openid email profile"}, "state": {state}, "nonce": {nonce},
		"code_challenge": {challenge}, "code_challenge_method": {"S256"},
		// The complete three-page flow each time: an earlier flow's grant would otherwise let
		// the consent page be skipped (remembered consent).
		"prompt": {"consent"}}.Encode()
	return c.authorizeCode(q, state), verifier, nonce
}

// authorizeCode sends the browser to the authorize bootstrap with the authorization request
// query q, signs the sample user in, allows on the consent page, and returns the code of the
// redirect to the client, which must carry state.
func (c *client) authorizeCode(q, state string) string {
	t := c.t
	t.Helper()
	r := c.do("authorize", "GET", "/v2/authentication/oauth2/authorize", q, nil, "")
	post := c.submit
	r = post(r.Body, url.Values{"username": {sampleUsername}, "password": {samplePassword}})
	for i := 0; i < 3 && (r.StatusCode == 302 || r.StatusCode == 303); i++ {
		loc, _ := url.Parse(header(r, "Location"))
		r = c.do("authorize", "GET", loc.Path, loc.RawQuery, nil, "")
	}
	if !decisionOK.MatchString(r.Body) {
		t.Fatalf("login: %d, want the consent page: %.500s", r.StatusCode, r.Body)
	}
	r = post(r.Body, url.Values{"decision": {"allow"}})
	loc, err := url.Parse(header(r, "Location"))
	if err != nil || loc.Query().Get("state") != state || loc.Query().Get("code") == "" {
		t.Fatalf("consent: %d %q, want a redirect with the code and state", r.StatusCode, header(r, "Location"))
	}
	return loc.Query().Get("code")
}
