package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/acmebank/authserver/shared/wire"
)

// TestUserinfo_LambdaEventCertificateBinding sends the userinfo function's handler API
// Gateway's event (events/userinfo.json) through the same adapter the function uses: on the
// connect host API Gateway puts the verified client certificate in
// requestContext.authentication.clientCert, and a bound token is accepted only with it.
func TestUserinfo_LambdaEventCertificateBinding(t *testing.T) {
	m := newMTLSEnv(t)
	r := m.exchangeOver(t, m.client(&m.certA), m.code(t, url.Values{"scope": {"openid email"}}), mtlsSecretCreds)
	if r.status != http.StatusOK {
		t.Fatalf("token over mTLS answered %d: %s", r.status, r.raw)
	}
	access := r.json["access_token"].(string)
	userinfo, err := wire.Userinfo(m.app.Deps())
	if err != nil {
		t.Fatal(err)
	}
	adapter := httpadapter.NewV2(userinfo)
	tests := []struct {
		name   string
		cert   []byte
		status int
	}{
		{"certificate of the binding", m.certA.certPEM, http.StatusOK},
		{"another certificate", m.certB.certPEM, http.StatusUnauthorized},
		{"no certificate (public host)", nil, http.StatusUnauthorized},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("..", "..", "events", "userinfo.json"))
			if err != nil {
				t.Fatal(err)
			}
			var ev events.APIGatewayV2HTTPRequest
			if err := json.Unmarshal(b, &ev); err != nil {
				t.Fatal(err)
			}
			ev.Headers["authorization"] = "Bearer " + access
			ev.RequestContext.Authentication.ClientCert.ClientCertPem = string(tc.cert)
			resp, err := adapter.ProxyWithContext(context.Background(), ev)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, resp.Body)
			}
			if tc.status == http.StatusOK && !strings.Contains(resp.Body, `"email":"alice@example.com"`) {
				t.Errorf("body %s", resp.Body)
			}
			h := http.Header{}
			for k, v := range resp.Headers {
				h.Set(k, v)
			}
			if tc.status != http.StatusOK && !strings.Contains(h.Get("WWW-Authenticate"), `error="invalid_token"`) {
				t.Errorf("headers %v", resp.Headers)
			}
		})
	}
}
