package seed

import (
	"context"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/oauth"
)

// TestLoad_RequireSignedRequestObject: a private_key_jwt seed client with
// require_signed_request_object is stored with it (RFC 9101 10.5); a secret client with it is
// refused and stores nothing, as authctl refuses it.
func TestLoad_RequireSignedRequestObject(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	hasher := authn.PasswordHasher{Time: 1, MemoryKiB: 64, Threads: 1}
	const jwks = `{"keys":[{"kty":"EC","crv":"P-256","kid":"k1","use":"sig",
		"x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}`
	f, err := Parse([]byte(`{"clients":[{"client_id":"tpp","name":"TPP","redirect_uris":["https://tpp.example/cb"],"scopes":["openid"],
		"token_endpoint_auth_method":"private_key_jwt","jwks":` + jwks + `,"require_signed_request_object":true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ctx, st, f, hasher, time.Now()); err != nil {
		t.Fatal(err)
	}
	if c, err := st.GetClient(ctx, "tpp"); err != nil || !c.RequireSignedRequestObject {
		t.Fatalf("stored %+v, %v; want require_signed_request_object", c, err)
	}
	f, err = Parse([]byte(`{"clients":[{"client_id":"plain","client_secret":"0123456789abcdef0123456789abcdef","name":"Plain",
		"redirect_uris":["https://p.example/cb"],"scopes":["openid"],"require_signed_request_object":true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ctx, st, f, hasher, time.Now()); err == nil {
		t.Fatal("a secret client requiring signed request objects was loaded")
	}
	if _, err := st.GetClient(ctx, "plain"); err != oauth.ErrNotFound {
		t.Fatalf("the refused client: %v, want not found", err)
	}
}
