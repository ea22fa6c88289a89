// Command jwks is the Lambda function that publishes the signing keys (JWKS) and the OpenID
// discovery document, from the key registry, with no call to KMS.
package main

import (
	"context"

	"github.com/acmebank/authserver/shared/boot"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/wire"
)

func main() {
	ctx := context.Background()
	cfg, err := config.FromEnv()
	if err != nil {
		boot.Fatal(err)
	}
	log := boot.Logger(cfg)
	store, _, err := boot.OpenStore(ctx, cfg, log, nil) // DynamoDB: no Lambda function links the embedded store
	if err != nil {
		boot.Fatal(err)
	}
	// The JWKS comes from the key registry in the store: no KMS call.
	h, err := wire.Keys(wire.Deps{Config: cfg, Store: store, Log: log})
	if err != nil {
		boot.Fatal(err)
	}
	boot.ServeHTTP(httpapi.HSTS(h))
}
