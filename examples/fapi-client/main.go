// Command fapi-client runs the FAPI 2.0 flow by hand against the authorization server and
// prints every message: discovery, the pushed authorization request (private_key_jwt and a
// DPoP proof), the URL for the user's browser, the checks of the redirect (state, iss), the
// token request (PKCE, private_key_jwt, DPoP), the id_token and UserInfo. docs/fapi-by-hand.md
// walks through it.
//
//	go run ./examples/fapi-client --issuer http://127.0.0.1:8080/v2/authentication/oauth2 \
//	  --client-id budget-app --key client-key.pem --redirect-uri http://127.0.0.1:4499/callback
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/acmebank/authserver/examples/fapi-client/fapiclient"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(fapiclient.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
