package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/acmebank/authserver/shared/httpapi"
)

// authorizerEvent is a sample event of events/ (what API Gateway sends the authorizer
// function) carrying token.
func authorizerEvent(t *testing.T, file, token string) events.APIGatewayV2CustomAuthorizerV2Request {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "events", file))
	if err != nil {
		t.Fatal(err)
	}
	var ev events.APIGatewayV2CustomAuthorizerV2Request
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	ev.Headers["authorization"] = "Bearer " + token
	ev.IdentitySource = []string{"Bearer " + token}
	return ev
}

// TestAuthorizer_RevocationOnBothPaths issues tokens through the real flow, revokes them
// through each documented revocation path, and asks the authorizer function's handler about
// them with API Gateway's events: a revoked access token, and the access token of a grant
// whose refresh token was revoked, are denied at once.
func TestAuthorizer_RevocationOnBothPaths(t *testing.T) {
	e := newEnv(t)
	az, err := e.app.Authorizer()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	allowed := func(token string) bool {
		t.Helper()
		resp, err := az.HandleEvent(ctx, authorizerEvent(t, "authorizer.json", token))
		if err != nil {
			t.Fatal(err)
		}
		return resp.IsAuthorized
	}
	for _, path := range []string{httpapi.PathRevoke, httpapi.PathRevokeLegacy} {
		t.Run("access token revoked on "+path, func(t *testing.T) {
			access, _ := e.apiTokens(t, "openid email")
			keep, _ := e.apiTokens(t, "openid email")
			if !allowed(access) {
				t.Fatal("fresh token denied")
			}
			e.apiRevoke(t, path, access)
			if allowed(access) {
				t.Error("revoked access token still allowed")
			}
			if !allowed(keep) {
				t.Error("revoking one token denied another grant's token")
			}
		})
		t.Run("refresh token revoked on "+path, func(t *testing.T) {
			access, refresh := e.apiTokens(t, "openid email")
			if !allowed(access) {
				t.Fatal("fresh token denied")
			}
			e.apiRevoke(t, path, refresh)
			if allowed(access) {
				t.Error("access token of a revoked grant still allowed")
			}
		})
	}
}

// TestAuthorizer_ContextFromTheFlow checks what the integration receives for a token of the
// real flow: the user's ids from the seed, the client and the granted scope.
func TestAuthorizer_ContextFromTheFlow(t *testing.T) {
	e := newEnv(t)
	az, err := e.app.Authorizer()
	if err != nil {
		t.Fatal(err)
	}
	access, _ := e.apiTokens(t, "openid bank:transfers.write")
	resp, err := az.HandleEvent(context.Background(), authorizerEvent(t, "authorizer-deprecated-invoice.json", access))
	if err != nil || !resp.IsAuthorized {
		t.Fatalf("isAuthorized=%v err=%v", resp.IsAuthorized, err)
	}
	want := map[string]any{"uid": "uid-alice", "companyProfileId": "cp-1", "companyUserId": "cu-1", "client_id": clientID,
		"scope": "openid bank:transfers.write"}
	for k, v := range want {
		if resp.Context[k] != v {
			t.Errorf("context[%s] = %v, want %v", k, resp.Context[k], v)
		}
	}
}
