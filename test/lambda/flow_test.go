package lambda_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
	"github.com/pquerna/otp/totp"

	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/metrics"
)

// client is a user agent and an OAuth client in one, speaking to the bootstraps through
// HTTP API (payload 2.0) events.
type client struct {
	t       *testing.T
	ctx     context.Context
	fns     map[string]*function
	cookies map[string]string
	seq     int
}

// event builds the HTTP API event API Gateway would send for the request.
func (c *client) event(method, rawPath, query string, headers map[string]string, body string) []byte {
	c.seq++
	h := map[string]string{"host": "auth.bank.example", "user-agent": "harness/1.0", "x-forwarded-proto": "https", "x-forwarded-for": "203.0.113.10"}
	for k, v := range headers {
		h[strings.ToLower(k)] = v
	}
	var cookies []string
	for k, v := range c.cookies {
		cookies = append(cookies, k+"="+v)
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: method + " " + rawPath, RawPath: rawPath, RawQueryString: query,
		Cookies: cookies, Headers: h, Body: body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			AccountID: "123456789012", APIID: "abcdef1234", DomainName: "auth.bank.example", DomainPrefix: "auth",
			RequestID: fmt.Sprintf("flow-%d", c.seq), RouteKey: method + " " + rawPath, Stage: "$default",
			Time: time.Now().UTC().Format("02/Jan/2006:15:04:05 -0700"), TimeEpoch: time.Now().UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: rawPath, Protocol: "HTTP/1.1", SourceIP: "203.0.113.10", UserAgent: "harness/1.0"},
		},
	}
	if q, err := url.ParseQuery(query); err == nil && query != "" {
		ev.QueryStringParameters = map[string]string{}
		for k := range q {
			ev.QueryStringParameters[k] = q.Get(k)
		}
	}
	b, err := json.Marshal(ev)
	if err != nil {
		c.t.Fatal(err)
	}
	return b
}

// do sends a request to the named function and keeps the cookies it sets.
func (c *client) do(fn, method, rawPath, query string, headers map[string]string, body string) events.APIGatewayV2HTTPResponse {
	c.t.Helper()
	f, ok := c.fns[fn]
	if !ok {
		c.t.Fatalf("function %s is not running", fn)
	}
	o, err := f.invoke(c.ctx, c.event(method, rawPath, query, headers, body))
	if err != nil {
		c.t.Fatal(err)
	}
	r := httpResponse(c.t, o)
	// API Gateway serves https only: every HTTP function's main wraps its handler in HSTS.
	if got := header(r, "Strict-Transport-Security"); got != httpapi.StrictTransportSecurity {
		c.t.Errorf("%s %s %s: Strict-Transport-Security %q, want %q", fn, method, rawPath, got, httpapi.StrictTransportSecurity)
	}
	for _, sc := range r.Cookies {
		if ck, err := http.ParseSetCookie(sc); err == nil {
			if ck.MaxAge < 0 || ck.Value == "" {
				delete(c.cookies, ck.Name)
			} else {
				c.cookies[ck.Name] = ck.Value
			}
		}
	}
	return r
}

var (
	formTag    = regexp.MustCompile(`(?s)<form[^>]*action="([^"]*)"[^>]*>(.*?)</form>`)
	hiddenTag  = regexp.MustCompile(`<input[^>]*type="hidden"[^>]*>`)
	attrPat    = regexp.MustCompile(`(\w+)="([^"]*)"`)
	decisionOK = regexp.MustCompile(`name="decision" value="allow"`)
)

// submit posts the first form of page, its hidden fields with extra, to the authorize function,
// as the browser would.
func (c *client) submit(page string, extra url.Values) events.APIGatewayV2HTTPResponse {
	c.t.Helper()
	action, vals := form(c.t, page)
	for k, v := range extra {
		vals[k] = v
	}
	u, err := url.Parse(action)
	if err != nil {
		c.t.Fatalf("form action %q: %v", action, err)
	}
	p := u.Path
	if p == "" {
		p = "/v2/authentication/oauth2/authorize"
	}
	return c.do("authorize", "POST", p, u.RawQuery, map[string]string{"content-type": "application/x-www-form-urlencoded"}, vals.Encode())
}

var totpSecret = regexp.MustCompile(`<code class="secret" id="totp-secret">([A-Z2-7 ]+)</code>`)

// secondStep passes the set-up of an authenticator app when the page is it: the code of the
// key shown, then on past the recovery codes. Any other page is returned as it is.
func (c *client) secondStep(r events.APIGatewayV2HTTPResponse) events.APIGatewayV2HTTPResponse {
	c.t.Helper()
	m := totpSecret.FindStringSubmatch(r.Body)
	if m == nil {
		return r
	}
	code, err := totp.GenerateCode(strings.ReplaceAll(m[1], " ", ""), time.Now())
	if err != nil {
		c.t.Fatal(err)
	}
	r = c.submit(r.Body, url.Values{"code": {code}})
	if !strings.Contains(r.Body, `class="codes"`) {
		c.t.Fatalf("authenticator set-up: %d, want the recovery codes: %.500s", r.StatusCode, r.Body)
	}
	return c.submit(r.Body, nil)
}

// form reads the first form of a page: its action and hidden fields.
func form(t *testing.T, page string) (string, url.Values) {
	t.Helper()
	m := formTag.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no form on the page: %.500s", page)
	}
	vals := url.Values{}
	for _, in := range hiddenTag.FindAllString(m[2], -1) {
		attrs := map[string]string{}
		for _, a := range attrPat.FindAllStringSubmatch(in, -1) {
			attrs[a[1]] = html.UnescapeString(a[2])
		}
		vals.Set(attrs["name"], attrs["value"])
	}
	return html.UnescapeString(m[1]), vals
}

func pkce() (verifier, challenge string) {
	b := make([]byte, 32)
	rand.Read(b)
	verifier = base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(verifier))
	return verifier, base64.RawURLEncoding.EncodeToString(sum[:])
}

var basicAuth = "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(sampleClientID)+":"+url.QueryEscape(sampleClientSecret)))

// TestCodeFlow_ThroughTheBootstraps runs a whole authorization code flow through the built
// bootstraps in the production configuration (DynamoDB Local, local-kms): the rotatekeys
// bootstrap creates the first KMS key (newStack), then login, consent, code exchange with
// PKCE, the id_token (signed by KMS) verified with go-oidc against the jwks function's
// answer, the authorizer, userinfo and introspection, revocation of the access token on the
// OAuth path, refresh, revocation of the refresh token on the legacy path, and the revoked
// tokens refused. Every function's DynamoDB and KMS requests are checked against its IAM
// statements, and its init time, peak RSS and CPU per invocation are logged (-v).
func TestCodeFlow_ThroughTheBootstraps(t *testing.T) {
	for _, n := range []string{"authorize", "token", "revoke"} {
		requireFunction(t, n)
	}
	s := newStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := &client{t: t, ctx: ctx, fns: map[string]*function{}, cookies: map[string]string{}}
	recs := map[string]*recorders{}
	for _, n := range []string{"authorize", "token", "revoke", "jwks", "userinfo", "introspect", "authorizer"} {
		if !present(n) {
			t.Logf("%s not there yet: its steps of the flow are skipped", n)
			continue
		}
		f, rec := s.start(t, ctx, n)
		c.fns[n], recs[n] = f, rec
		defer rec.close()
		defer f.stop()
	}

	// 1. The client sends the user to authorize: the login page.
	verifier, challenge := pkce()
	state, nonce := "st-"+verifier[:8], "n-"+verifier[8:16]
	q := url.Values{"client_id": {sampleClientID}, "response_type": {"code"}, "redirect_uri": {sampleRedirectURI},
		"scope": {"openid email profile phone bank:transfers:write"}, "state": {state}, "nonce": {nonce},
		"code_challenge": {challenge}, "code_challenge_method": {"S256"}}.Encode()
	r := c.do("authorize", "GET", "/v2/authentication/oauth2/authorize", q, nil, "")
	if r.StatusCode != 200 || !strings.Contains(r.Body, `name="password"`) {
		t.Fatalf("authorize: %d, want the login page: %.500s", r.StatusCode, r.Body)
	}

	// 1b. JARM: with response_mode=jwt, prompt=none's login_required comes back as one signed
	// response parameter, signed through KMS (the authorize function's key backend).
	silent := c.do("authorize", "GET", "/v2/authentication/oauth2/authorize", q+"&prompt=none&response_mode=jwt", nil, "")
	if jarm, _ := url.Parse(header(silent, "Location")); silent.StatusCode != 303 || jarm == nil || strings.Count(jarm.Query().Get("response"), ".") != 2 || jarm.Query().Get("error") != "" {
		t.Fatalf("authorize with response_mode=jwt and prompt=none: %d %q, want a JARM response", silent.StatusCode, header(silent, "Location"))
	}

	// 2. The user signs in, then allows.
	post := c.submit
	follow := func(r events.APIGatewayV2HTTPResponse) events.APIGatewayV2HTTPResponse {
		for i := 0; i < 3 && (r.StatusCode == 302 || r.StatusCode == 303); i++ {
			loc, _ := url.Parse(header(r, "Location"))
			if !strings.HasSuffix(loc.Path, "/oauth2/authorize") {
				return r
			}
			r = c.do("authorize", "GET", loc.Path, loc.RawQuery, nil, "")
		}
		return r
	}
	// A wrong password first: the login page again (this also drives the failure counters,
	// so their DynamoDB writes are checked against the policy too).
	r = follow(post(r.Body, url.Values{"username": {sampleUsername}, "password": {"wrong " + samplePassword}}))
	if !strings.Contains(r.Body, `name="password"`) || strings.Contains(header(r, "Location"), "code=") {
		t.Fatalf("wrong password: %d, want the login page again: %.500s", r.StatusCode, r.Body)
	}
	r = follow(post(r.Body, url.Values{"username": {sampleUsername}, "password": {samplePassword}}))
	// The transfers scope needs strong authentication: the sample user, who has no second
	// factor, sets up an authenticator app (the factor's writes are checked against the
	// policy too).
	r = c.secondStep(r)
	if r.StatusCode != 200 || !decisionOK.MatchString(r.Body) {
		t.Fatalf("login: %d, want the consent page: %.800s", r.StatusCode, r.Body)
	}
	r = post(r.Body, url.Values{"decision": {"allow"}})
	if r.StatusCode != 302 && r.StatusCode != 303 {
		t.Fatalf("consent: %d, want a redirect to the client: %.500s", r.StatusCode, r.Body)
	}
	loc, err := url.Parse(header(r, "Location"))
	if err != nil || !strings.HasPrefix(loc.String(), sampleRedirectURI+"?") {
		t.Fatalf("consent redirected to %q, want %s", header(r, "Location"), sampleRedirectURI)
	}
	code := loc.Query().Get("code")
	if loc.Query().Get("state") != state || !strings.HasPrefix(code, "ac_") {
		t.Fatalf("redirect %s: want code and state %s", loc, state)
	}

	// 3. The client exchanges the code (form body, client_secret_basic).
	formHdr := map[string]string{"content-type": "application/x-www-form-urlencoded", "authorization": basicAuth}
	r = c.do("token", "POST", "/v2/authentication/oauth2/token", "", formHdr, url.Values{
		"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {sampleRedirectURI}, "code_verifier": {verifier}}.Encode())
	tok := tokenResponse(t, r)
	idToken, _ := tok["id_token"].(string)
	access, refresh := tok["access_token"].(string), tok["refresh_token"].(string)
	if meta, _ := tok["metadata"].(map[string]any); meta["uid"] != "u-1001" || meta["companyProfileId"] != "cp-42" || meta["companyUserId"] != "cu-7" {
		t.Errorf("metadata %v", tok["metadata"])
	}

	// 3b. The exchange's audit line names the API Gateway request it answered (request_id, the
	// access log's $context.requestId), as every line written while serving a request does.
	exchangeID := fmt.Sprintf("flow-%d", c.seq)
	requireRequestIDs(t, c.fns["token"], "grant_issued", exchangeID)

	// 4. The id_token verifies with the published JWKS (a key written by the rotation, read
	// by another process from the registry in DynamoDB).
	if _, ok := c.fns["jwks"]; ok {
		r = c.do("jwks", "GET", "/v2/authentication/oauth2/.well-known/jwks.json", "", nil, "")
		verifyIDToken(t, idToken, r.Body, nonce)
	}

	// 5. The access token works on the API (authorizer, userinfo, introspection).
	if _, ok := c.fns["authorizer"]; ok {
		checkAuthorizer(t, c, access, true)
	}
	if _, ok := c.fns["userinfo"]; ok {
		r = c.do("userinfo", "GET", "/v2/authentication/oauth2/userinfo", "", map[string]string{"authorization": "Bearer " + access}, "")
		if r.StatusCode != 200 || jsonBody(t, r)["sub"] != "u-1001" {
			t.Errorf("userinfo: %d %s", r.StatusCode, r.Body)
		}
	}

	if _, ok := c.fns["introspect"]; ok {
		r = c.do("introspect", "POST", "/v2/authentication/oauth2/token/introspect", "", formHdr, url.Values{"token": {access}}.Encode())
		if r.StatusCode != 200 || jsonBody(t, r)["active"] != true || jsonBody(t, r)["sub"] != "u-1001" {
			t.Errorf("introspect of a live access token: %d %s, want active true", r.StatusCode, r.Body)
		}
		// RFC 9701: the same answer as a JWT signed through KMS (the introspect function's
		// key backend), its typ token-introspection+jwt.
		jwtHdr := map[string]string{"accept": "application/token-introspection+jwt"}
		for k, v := range formHdr {
			jwtHdr[k] = v
		}
		r = c.do("introspect", "POST", "/v2/authentication/oauth2/token/introspect", "", jwtHdr, url.Values{"token": {access}}.Encode())
		parts := strings.Split(r.Body, ".")
		hdr, _ := base64.RawURLEncoding.DecodeString(parts[0])
		var claims map[string]any
		if len(parts) == 3 {
			payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
			_ = json.Unmarshal(payload, &claims)
		}
		ti, _ := claims["token_introspection"].(map[string]any)
		if r.StatusCode != 200 || header(r, "Content-Type") != "application/token-introspection+jwt" ||
			!strings.Contains(string(hdr), `"typ":"token-introspection+jwt"`) || ti["active"] != true {
			t.Errorf("JWT introspection of a live access token: %d %s %.300s, want a signed token-introspection+jwt", r.StatusCode, header(r, "Content-Type"), r.Body)
		}
	}

	// 5b. Revoke the access token on the OAuth path (RFC 7009): it stops working at once.
	r = c.do("revoke", "POST", "/v2/authentication/oauth2/token/revoke", "", formHdr, url.Values{"token": {access}, "token_type_hint": {"access_token"}}.Encode())
	if r.StatusCode != 200 {
		t.Fatalf("revoke on the OAuth path: %d %s", r.StatusCode, r.Body)
	}
	if _, ok := c.fns["authorizer"]; ok {
		checkAuthorizer(t, c, access, false)
	}
	if _, ok := c.fns["introspect"]; ok {
		r = c.do("introspect", "POST", "/v2/authentication/oauth2/token/introspect", "", formHdr, url.Values{"token": {access}}.Encode())
		if r.StatusCode != 200 || jsonBody(t, r)["active"] != false {
			t.Errorf("introspect of a revoked access token: %d %s, want active false", r.StatusCode, r.Body)
		}
	}

	// 6. Refresh (JSON body, client_secret_post): a new pair; the old refresh token is spent.
	jsonHdr := map[string]string{"content-type": "application/json"}
	refreshBody := func(rt string) string {
		b, _ := json.Marshal(map[string]string{"grant_type": "refresh_token", "refresh_token": rt, "client_id": sampleClientID, "client_secret": sampleClientSecret})
		return string(b)
	}
	tok2 := tokenResponse(t, c.do("token", "POST", "/v2/authentication/oauth2/token", "", jsonHdr, refreshBody(refresh)))
	access2, refresh2 := tok2["access_token"].(string), tok2["refresh_token"].(string)
	if refresh2 == refresh || access2 == access {
		t.Error("refresh returned the same tokens")
	}

	// 7. Revoke the new refresh token on the legacy path: 200, and it no longer refreshes.
	r = c.do("revoke", "POST", "/v2/authentication/token/revoke", "", formHdr, url.Values{"token": {refresh2}, "token_type_hint": {"refresh_token"}}.Encode())
	if r.StatusCode != 200 {
		t.Fatalf("revoke: %d %s", r.StatusCode, r.Body)
	}
	r = c.do("token", "POST", "/v2/authentication/oauth2/token", "", jsonHdr, refreshBody(refresh2))
	if r.StatusCode != 400 || jsonBody(t, r)["error"] != "invalid_grant" {
		t.Errorf("refresh with a revoked token: %d %s, want 400 invalid_grant", r.StatusCode, r.Body)
	}
	// Revoking the refresh token revokes the access token issued with it (decision 1).
	if _, ok := c.fns["authorizer"]; ok {
		checkAuthorizer(t, c, access2, false)
	}
	if _, ok := c.fns["introspect"]; ok {
		r = c.do("introspect", "POST", "/v2/authentication/oauth2/token/introspect", "", formHdr, url.Values{"token": {access2}}.Encode())
		if r.StatusCode != 200 || jsonBody(t, r)["active"] != false {
			t.Errorf("introspect after revocation: %d %s, want active false", r.StatusCode, r.Body)
		}
	}

	// A replayed code is refused (and would revoke what it issued: RFC 6749 4.1.2).
	r = c.do("token", "POST", "/v2/authentication/oauth2/token", "", formHdr, url.Values{
		"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {sampleRedirectURI}, "code_verifier": {verifier}}.Encode())
	if r.StatusCode != 400 || jsonBody(t, r)["error"] != "invalid_grant" {
		t.Errorf("replayed code: %d %s, want 400 invalid_grant", r.StatusCode, r.Body)
	}

	// 7b. The flow's metrics (EMF lines, docs/operations.md): the token function counted both
	// exchanges and the two invalid_grant refusals; the authorize function the wrong password,
	// the right one and the authenticator app's set-up.
	requireMetrics(t, c.fns["token"], map[string]float64{
		metricKey("token", metrics.Exchanges, metrics.DimGrantType, "authorization_code"): 1,
		metricKey("token", metrics.Exchanges, metrics.DimGrantType, "refresh_token"):      1,
		metricKey("token", metrics.Refusals, metrics.DimReason, "invalid_grant"):          2,
	})
	requireMetrics(t, c.fns["authorize"], map[string]float64{
		metricKey("authorize", metrics.SignIns, metrics.DimFactor, "password", metrics.DimResult, metrics.ResultFailure): 1,
		metricKey("authorize", metrics.SignIns, metrics.DimFactor, "password", metrics.DimResult, metrics.ResultSuccess): 1,
		metricKey("authorize", metrics.SignIns, metrics.DimFactor, "totp", metrics.DimResult, metrics.ResultSuccess):     1,
	})

	// 8. No secret in any function's log (the metric lines among them).
	secrets := map[string]string{"code": code, "access token": access, "refresh token": refresh, "refreshed access token": access2,
		"refreshed refresh token": refresh2, "client secret": sampleClientSecret, "password": samplePassword, "code verifier": verifier}
	if idToken != "" {
		secrets["id_token"] = idToken
	}
	for n, f := range c.fns {
		logs := f.out.String()
		for what, v := range secrets {
			if strings.Contains(logs, v) {
				t.Errorf("%s's log contains the %s", n, what)
			}
		}
	}
	for n, rec := range recs {
		s.checkIAM(t, n, rec)
		report(t, n, bootstrap(t, n), c.fns[n])
	}
	if t.Failed() {
		for n, f := range c.fns {
			t.Logf("%s log:\n%s", n, f.out.String())
		}
	}
}

func tokenResponse(t *testing.T, r events.APIGatewayV2HTTPResponse) map[string]any {
	t.Helper()
	if r.StatusCode != 200 {
		t.Fatalf("token: %d %s", r.StatusCode, r.Body)
	}
	if !strings.Contains(header(r, "Cache-Control"), "no-store") {
		t.Errorf("token response Cache-Control %q, want no-store", header(r, "Cache-Control"))
	}
	tok := jsonBody(t, r)
	a, _ := tok["access_token"].(string)
	rt, _ := tok["refresh_token"].(string)
	if !strings.HasPrefix(a, "at_") || !strings.HasPrefix(rt, "rt_") || !(strings.EqualFold(fmt.Sprint(tok["token_type"]), "bearer") || tok["token_type"] == "DPoP") {
		// The response's shape, not its tokens: test output is a log too.
		t.Fatalf("token response: access_token prefix %.3q, refresh_token prefix %.3q, token_type %v", a, rt, tok["token_type"])
	}
	return tok
}

// verifyIDToken verifies the id_token as a relying party does, with go-oidc, against the keys
// of the jwks function's answer (parsed by go-jose), and checks its kid is one of them.
func verifyIDToken(t *testing.T, idToken, jwksBody, nonce string) {
	t.Helper()
	if idToken == "" {
		t.Fatal("no id_token for an openid request")
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal([]byte(jwksBody), &set); err != nil {
		t.Fatalf("jwks: %v", err)
	}
	jws, err := jose.ParseSigned(idToken, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatalf("id_token: %v", err)
	}
	if kid := jws.Signatures[0].Header.KeyID; len(set.Key(kid)) != 1 {
		t.Fatalf("id_token kid %q is not in the JWKS", kid)
	}
	pubs := make([]crypto.PublicKey, 0, len(set.Keys))
	for _, k := range set.Keys {
		pubs = append(pubs, k.Key)
	}
	v := oidc.NewVerifier(sampleBaseURL+"/v2/authentication/oauth2", &oidc.StaticKeySet{PublicKeys: pubs},
		&oidc.Config{ClientID: sampleClientID, SupportedSigningAlgs: []string{oidc.RS256}})
	tok, err := v.Verify(context.Background(), idToken)
	if err != nil {
		t.Fatalf("id_token does not verify with the JWKS: %v", err)
	}
	var claims struct{ Sub, Nonce string }
	if err := tok.Claims(&claims); err != nil {
		t.Fatal(err)
	}
	if claims.Sub != "u-1001" || tok.Nonce != nonce {
		t.Errorf("id_token sub %v nonce %v", claims.Sub, tok.Nonce)
	}
}

func checkAuthorizer(t *testing.T, c *client, token string, want bool) {
	t.Helper()
	ev := map[string]any{}
	if err := json.Unmarshal(readEvent(t, "authorizer.json"), &ev); err != nil {
		t.Fatal(err)
	}
	ev["identitySource"] = []string{"Bearer " + token}
	ev["headers"].(map[string]any)["authorization"] = "Bearer " + token
	b, _ := json.Marshal(ev)
	o, err := c.fns["authorizer"].invoke(c.ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	wantAuthorizer(want)(t, o)
	if want {
		var r events.APIGatewayV2CustomAuthorizerSimpleResponse
		_ = json.Unmarshal(o.body, &r)
		// The template maps exactly these keys into the backend's X-Auth-* headers.
		want := map[string]string{"uid": "u-1001", "companyProfileId": "cp-42", "companyUserId": "cu-7", "client_id": sampleClientID}
		for k, v := range want {
			if r.Context[k] != v {
				t.Errorf("authorizer context %s = %v, want %s", k, r.Context[k], v)
			}
		}
		if s, _ := r.Context["scope"].(string); !strings.Contains(s, "openid") {
			t.Errorf("authorizer context scope = %v, want the granted scopes", r.Context["scope"])
		}
	}
}

// requireRequestIDs checks f's log: every line it wrote while serving an event carries a
// request_id of one of the harness's events, and the audit line of event carries want.
func requireRequestIDs(t *testing.T, f *function, event, want string) {
	t.Helper()
	// The process's output reaches the buffer through a pipe, after the answer: wait for the
	// line a little.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && !strings.Contains(f.out.String(), `"event":"`+event+`"`); {
		time.Sleep(20 * time.Millisecond)
	}
	found := false
	for _, line := range strings.Split(f.out.String(), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) != nil {
			continue // the runtime's own lines
		}
		id, _ := l["request_id"].(string)
		if l["log"] == "audit" && !strings.HasPrefix(id, "flow-") {
			t.Errorf("%s: an audit line without the request's id: %s", f.name, line)
		}
		if l["log"] == "audit" && l["event"] == event {
			found = true
			if id != want {
				t.Errorf("%s: the %s audit line names request %q, want %q", f.name, event, id, want)
			}
		}
	}
	if !found {
		t.Errorf("%s: no %s audit line in its log", f.name, event)
	}
}
