package lambda_test

import (
	"context"
	"encoding/base64"
	"maps"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/metrics"
	"github.com/acmebank/authserver/shared/metrics/emftest"
)

// metricKey is the emftest key of metric name of function fn in the harness's stack (the
// template's default Environment, sandbox) with the extra dimensions kv (name, value pairs).
func metricKey(fn, name string, kv ...string) string {
	dims := map[string]string{metrics.DimFunction: fn, metrics.DimEnvironment: "sandbox"}
	for i := 0; i+1 < len(kv); i += 2 {
		dims[kv[i]] = kv[i+1]
	}
	return emftest.Metric{Name: name, Dimensions: dims}.Key()
}

// requireMetrics checks the EMF lines of f's log: every one follows the specification, names
// the AuthServer namespace, and together they count exactly want (no metric missing, none
// more). The process's output reaches the buffer through a pipe after the answer: the check
// waits a little for the lines.
func requireMetrics(t *testing.T, f *function, want map[string]float64) {
	t.Helper()
	var got map[string]float64
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ms, err := emftest.Metrics(f.out.String())
		if err != nil {
			t.Fatalf("%s: an EMF line breaks the specification: %v", f.name, err)
		}
		for _, m := range ms {
			if m.Namespace != metrics.Namespace {
				t.Fatalf("%s: metric %s in namespace %q, want %q", f.name, m.Name, m.Namespace, metrics.Namespace)
			}
		}
		got = emftest.Count(ms)
		if maps.Equal(got, want) || time.Now().After(deadline) {
			break
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("%s's metrics:\n got %v\nwant %v", f.name, got, want)
	}
}

// TestMetrics_TokenRefusalsAreCountedByTheirRFCCode drives the token bootstrap in the
// production configuration with refused requests: a wrong client secret, an unknown grant
// type, a made-up code, no grant type. Each is one EMF line of Refusals with the code the
// client received as Reason, and no value of the requests is in the log.
func TestMetrics_TokenRefusalsAreCountedByTheirRFCCode(t *testing.T) {
	requireFunction(t, "token")
	s := newStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f, rec := s.start(t, ctx, "token")
	defer rec.close()
	defer f.stop()
	c := &client{t: t, ctx: ctx, fns: map[string]*function{"token": f}, cookies: map[string]string{}}
	const wrongSecret = "cs1_wrong-secret-for-the-metrics-test"
	const madeUpCode = "ac_made-up-code-for-the-metrics-test"
	form := map[string]string{"content-type": "application/x-www-form-urlencoded", "authorization": basicAuth}
	wrong := map[string]string{"content-type": "application/x-www-form-urlencoded",
		"authorization": "Basic " + basicOf(sampleClientID, wrongSecret)}
	cases := []struct {
		headers map[string]string
		body    url.Values
		status  int
		code    string
	}{
		{wrong, url.Values{"grant_type": {"authorization_code"}, "code": {madeUpCode}}, 401, "invalid_client"},
		{wrong, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"rt_made-up"}}, 401, "invalid_client"},
		{form, url.Values{"grant_type": {"password"}}, 400, "unsupported_grant_type"},
		{form, url.Values{"grant_type": {"authorization_code"}, "code": {madeUpCode}, "redirect_uri": {sampleRedirectURI}, "code_verifier": {strings.Repeat("v", 43)}}, 400, "invalid_grant"},
		{form, url.Values{}, 400, "invalid_request"},
	}
	want := map[string]float64{}
	for _, tc := range cases {
		r := c.do("token", "POST", "/v2/authentication/oauth2/token", "", tc.headers, tc.body.Encode())
		if r.StatusCode != tc.status || jsonBody(t, r)["error"] != tc.code {
			t.Fatalf("%v: %d %s, want %d %s", tc.body, r.StatusCode, r.Body, tc.status, tc.code)
		}
		want[metricKey("token", metrics.Refusals, metrics.DimReason, tc.code)]++
	}
	requireMetrics(t, f, want)
	for _, v := range []string{wrongSecret, madeUpCode, sampleClientSecret, "rt_made-up"} {
		if strings.Contains(f.out.String(), v) {
			t.Errorf("the token function's log contains %q", v)
		}
	}
	if t.Failed() {
		t.Logf("token log:\n%s", f.out.String())
	}
}

// basicOf is the client_secret_basic header value of id and secret (RFC 6749 2.3.1).
func basicOf(id, secret string) string {
	return base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id) + ":" + url.QueryEscape(secret)))
}
