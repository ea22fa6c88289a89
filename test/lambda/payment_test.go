package lambda_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/acmebank/authserver/internal/webauthntest"
)

// mustHost is the host of a URL (the pages' relying party ID is the base URL's host).
func mustHost(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		t.Fatalf("no host in %q", raw)
	}
	return u.Hostname()
}

// samplePayment is a payment_initiation detail (RFC 9396) the sample client may ask for.
const samplePayment = `[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"42.00"},` +
	`"creditorName":"Merchant C","creditorAccount":{"iban":"DE02100100109307118603"}}]`

// TestPaymentFlow_ThroughTheBootstraps runs a payment through the built authorize, token and
// authorizer functions, each behind the DynamoDB proxy that holds it to its IAM policy in the
// template: the authorization request carries authorization_details, the customer signs in
// strongly and confirms the payment with a passkey over its details (dynamic linking), the exchange gives a token with the details and no refresh token, and
// the authorizer lets its first call through with the details in its context (the backend's
// X-Auth-Payment) and refuses the second, which proves the authorizer's role may mark the
// grant consumed.
func TestPaymentFlow_ThroughTheBootstraps(t *testing.T) {
	for _, n := range []string{"authorize", "token", "authorizer"} {
		requireFunction(t, n)
	}
	s := newStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := &client{t: t, ctx: ctx, fns: map[string]*function{}, cookies: map[string]string{}}
	recs := map[string]*recorders{}
	for _, n := range []string{"authorize", "token", "authorizer"} {
		f, rec := s.start(t, ctx, n)
		c.fns[n], recs[n] = f, rec
		defer rec.close()
		defer f.stop()
	}

	verifier, challenge := pkce()
	q := url.Values{"client_id": {sampleClientID}, "response_type": {"code"}, "redirect_uri": {sampleRedirectURI},
		"scope": {"openid bank:transfers:write"}, "state": {"st-pay"}, "authorization_details": {samplePayment},
		"code_challenge": {challenge}, "code_challenge_method": {"S256"}}.Encode()
	r := c.do("authorize", "GET", "/v2/authentication/oauth2/authorize", q, nil, "")
	if r.StatusCode != 200 || !strings.Contains(r.Body, `name="password"`) {
		t.Fatalf("authorize: %d, want the login page: %.500s", r.StatusCode, r.Body)
	}
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
	r = c.secondStep(follow(c.submit(r.Body, url.Values{"username": {sampleUsername}, "password": {samplePassword}})))
	if r.StatusCode != 200 || !strings.Contains(r.Body, "<title>Confirm a payment") || !strings.Contains(r.Body, "Merchant C") {
		t.Fatalf("sign-in: %d, want the payment's confirmation page showing the payee: %.800s", r.StatusCode, r.Body)
	}
	// Dynamic linking: the customer adds a passkey (they hold none yet), then confirms the
	// payment with an assertion over the challenge the page derived from its details.
	passkey := webauthntest.New(t, mustHost(t, sampleBaseURL), sampleBaseURL)
	if !strings.Contains(r.Body, `value="payment_passkey"`) {
		r = c.submit(r.Body, url.Values{"action": {"passkey_offer"}})
		r = c.submit(r.Body, url.Values{"action": {"passkey_register"}, "credential": {passkey.Create(t, r.Body)}})
		if r.StatusCode != 200 || !strings.Contains(r.Body, `value="payment_passkey"`) {
			t.Fatalf("adding a passkey: %d, want the payment's confirmation: %.800s", r.StatusCode, r.Body)
		}
	}
	r = c.submit(r.Body, url.Values{"action": {"payment_passkey"}, "credential": {passkey.Get(t, r.Body)}})
	loc, err := url.Parse(header(r, "Location"))
	if err != nil || (r.StatusCode != 302 && r.StatusCode != 303) || loc.Query().Get("code") == "" {
		t.Fatalf("confirmation: %d %q, want a redirect with a code: %.500s", r.StatusCode, header(r, "Location"), r.Body)
	}

	formHdr := map[string]string{"content-type": "application/x-www-form-urlencoded", "authorization": basicAuth}
	r = c.do("token", "POST", "/v2/authentication/oauth2/token", "", formHdr, url.Values{
		"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")}, "redirect_uri": {sampleRedirectURI}, "code_verifier": {verifier}}.Encode())
	if r.StatusCode != 200 || !strings.Contains(header(r, "Cache-Control"), "no-store") {
		t.Fatalf("token: %d (Cache-Control %q)", r.StatusCode, header(r, "Cache-Control"))
	}
	tok := jsonBody(t, r)
	if a, _ := tok["access_token"].(string); !strings.HasPrefix(a, "at_") {
		t.Fatal("token response without an access token")
	}
	if _, ok := tok["refresh_token"]; ok {
		t.Errorf("a payment grant got a refresh token")
	}
	details, _ := json.Marshal(tok["authorization_details"])
	if !sameJSON(t, details, []byte(samplePayment)) {
		t.Errorf("token response authorization_details %s, want %s", details, samplePayment)
	}

	call := func() events.APIGatewayV2CustomAuthorizerSimpleResponse {
		ev := map[string]any{}
		if err := json.Unmarshal(readEvent(t, "authorizer.json"), &ev); err != nil {
			t.Fatal(err)
		}
		access := tok["access_token"].(string)
		ev["identitySource"] = []string{"Bearer " + access}
		ev["headers"].(map[string]any)["authorization"] = "Bearer " + access
		b, _ := json.Marshal(ev)
		o, err := c.fns["authorizer"].invoke(ctx, b)
		if err != nil || o.errType != "" {
			t.Fatalf("authorizer: %v %s %s", err, o.errType, o.body)
		}
		var resp events.APIGatewayV2CustomAuthorizerSimpleResponse
		if err := json.Unmarshal(o.body, &resp); err != nil {
			t.Fatalf("not a simple authorizer response: %s", o.body)
		}
		return resp
	}
	first := call()
	if !first.IsAuthorized {
		t.Fatalf("the payment token's first call refused: %+v", first)
	}
	header, _ := first.Context["payment"].(string)
	raw, err := base64.RawURLEncoding.DecodeString(header)
	if err != nil || !sameJSON(t, raw, []byte(samplePayment)) {
		t.Errorf("authorizer context payment %q decodes to %s (%v), want the details", header, raw, err)
	}
	if second := call(); second.IsAuthorized {
		t.Errorf("the payment token's second call was let through: %+v", second)
	}

	// Every DynamoDB and KMS access of each function, the authorizer's consumption of the
	// grant among them, is one its policy in the template allows; no token in any log.
	for n, rec := range recs {
		s.checkIAM(t, n, rec)
	}
	for n, f := range c.fns {
		if strings.Contains(f.out.String(), tok["access_token"].(string)) {
			t.Errorf("%s's log contains the access token", n)
		}
	}
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}
