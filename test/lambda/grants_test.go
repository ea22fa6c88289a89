package lambda_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/acmebank/authserver/shared/receipt"
)

// TestGrantsQuery_ConsentReceiptThroughTheBootstraps runs a grant made with
// grant_management_action=create and account_information details through the built authorize
// and token functions, then the client's query of it through the built grants function, each
// behind the proxies that hold it to its IAM policy in the template: the answer carries a
// consent receipt signed through KMS (local-kms) that verifies against the JWKS the jwks
// function serves, for the grant and the client. This proves the grants role may read the
// client, the key registry and the pairwise salt, store the salt on first use, and sign. The
// customer then downloads the same grant's receipt from the Connected apps page (the
// authorize function, which read or stored the salt when it started): an application/jwt
// attachment verifying against the same JWKS, with the same pairwise subject, within the
// authorize role's policy.
func TestGrantsQuery_ConsentReceiptThroughTheBootstraps(t *testing.T) {
	fns := []string{"authorize", "token", "grants", "jwks"}
	for _, n := range fns {
		requireFunction(t, n)
	}
	s := newStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := &client{t: t, ctx: ctx, fns: map[string]*function{}, cookies: map[string]string{}}
	recs := map[string]*recorders{}
	for _, n := range fns {
		f, rec := s.start(t, ctx, n)
		c.fns[n], recs[n] = f, rec
		defer rec.close()
		defer f.stop()
	}

	const details = `[{"type":"account_information","permissions":["balances"]}]`
	verifier, challenge := pkce()
	q := url.Values{"client_id": {sampleClientID}, "response_type": {"code"}, "redirect_uri": {sampleRedirectURI},
		"scope": {"openid grant_management_query"}, "state": {"st-gm"}, "authorization_details": {details},
		"grant_management_action": {"create"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}.Encode()
	r := c.do("authorize", "GET", "/v2/authentication/oauth2/authorize", q, nil, "")
	if r.StatusCode != 200 || !strings.Contains(r.Body, `name="password"`) {
		t.Fatalf("authorize: %d, want the login page: %.500s", r.StatusCode, r.Body)
	}
	r = c.submit(r.Body, url.Values{"username": {sampleUsername}, "password": {samplePassword}})
	for i := 0; i < 3 && (r.StatusCode == 302 || r.StatusCode == 303); i++ {
		loc, _ := url.Parse(header(r, "Location"))
		if !strings.HasSuffix(loc.Path, "/oauth2/authorize") {
			break
		}
		r = c.do("authorize", "GET", loc.Path, loc.RawQuery, nil, "")
	}
	r = c.secondStep(r)
	if r.StatusCode != 200 || !decisionOK.MatchString(r.Body) {
		t.Fatalf("sign-in: %d, want the consent page: %.800s", r.StatusCode, r.Body)
	}
	r = c.submit(r.Body, url.Values{"decision": {"allow"}})
	loc, err := url.Parse(header(r, "Location"))
	if err != nil || loc.Query().Get("code") == "" {
		t.Fatalf("consent: %d %q, want a redirect with a code", r.StatusCode, header(r, "Location"))
	}
	formHdr := map[string]string{"content-type": "application/x-www-form-urlencoded", "authorization": basicAuth}
	r = c.do("token", "POST", "/v2/authentication/oauth2/token", "", formHdr, url.Values{
		"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")}, "redirect_uri": {sampleRedirectURI}, "code_verifier": {verifier}}.Encode())
	tok := jsonBody(t, r)
	access, _ := tok["access_token"].(string)
	grantID, _ := tok["grant_id"].(string)
	if r.StatusCode != 200 || access == "" || grantID == "" {
		t.Fatalf("token: %d, want an access token and a grant_id: %v", r.StatusCode, tok["grant_id"])
	}

	r = c.do("grants", "GET", "/v2/authentication/oauth2/grants/"+grantID, "", map[string]string{"authorization": "Bearer " + access}, "")
	body := jsonBody(t, r)
	jws, _ := body["consent_receipt"].(string)
	if r.StatusCode != 200 || jws == "" {
		t.Fatalf("grants query: %d, want 200 with a consent_receipt: %.500s", r.StatusCode, r.Body)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal([]byte(c.do("jwks", "GET", "/v2/authentication/oauth2/.well-known/jwks.json", "", nil, "").Body), &set); err != nil {
		t.Fatal(err)
	}
	verify := func(jws string) map[string]any {
		t.Helper()
		sig, err := jose.ParseSignedCompact(jws, []jose.SignatureAlgorithm{jose.RS256, jose.PS256, jose.ES256})
		if err != nil {
			t.Fatal(err)
		}
		keys := set.Key(sig.Signatures[0].Protected.KeyID)
		if len(keys) != 1 {
			t.Fatalf("the receipt's kid %q is not in the JWKS", sig.Signatures[0].Protected.KeyID)
		}
		payload, err := sig.Verify(keys[0])
		if err != nil {
			t.Fatalf("the receipt does not verify against the JWKS: %v", err)
		}
		var claims map[string]any
		if err := json.Unmarshal(payload, &claims); err != nil {
			t.Fatal(err)
		}
		if typ := sig.Signatures[0].Protected.ExtraHeaders[jose.HeaderType]; typ != receipt.Type || claims["grant_id"] != grantID || claims["client_id"] != sampleClientID {
			t.Errorf("receipt typ %v grant_id %v client_id %v, want %s %s %s", typ, claims["grant_id"], claims["client_id"], receipt.Type, grantID, sampleClientID)
		}
		return claims
	}
	claims := verify(jws)

	// The customer's download, in the browser session of the sign-in above.
	r = c.do("authorize", "GET", "/v2/authentication/oauth2/account/apps/receipt", url.Values{"grant": {grantID}}.Encode(), nil, "")
	if r.StatusCode != 200 || header(r, "Content-Type") != "application/jwt" || !strings.Contains(header(r, "Content-Disposition"), grantID) {
		t.Fatalf("receipt download: %d %q %q, want 200 application/jwt, an attachment named with the grant: %.300s",
			r.StatusCode, header(r, "Content-Type"), header(r, "Content-Disposition"), r.Body)
	}
	body2 := r.Body
	if r.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(body2)
		if err != nil {
			t.Fatal(err)
		}
		body2 = string(b)
	}
	if downloaded := verify(body2); downloaded["sub"] != claims["sub"] {
		t.Errorf("the downloaded receipt's sub %v, want the grant API's %v", downloaded["sub"], claims["sub"])
	}

	for n, rec := range recs {
		s.checkIAM(t, n, rec)
	}
	for n, f := range c.fns {
		if strings.Contains(f.out.String(), access) {
			t.Errorf("%s's log contains the access token", n)
		}
	}
}
