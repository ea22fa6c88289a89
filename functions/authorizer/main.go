// Command authorizer is the Lambda authorizer of the bank API routes (HTTP API, payload 2.0,
// simple responses): bearer token, one DynamoDB read, certificate binding, the route's scopes.
// It needs only the token table: no signing keys, no pages, no embedded store.
package main

import (
	"context"

	"github.com/acmebank/authserver/shared/authorizer"
	"github.com/acmebank/authserver/shared/boot"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/oauth"
)

func main() {
	cfg, err := config.FromEnv()
	if err != nil {
		boot.Fatal(err)
	}
	log := boot.Logger(cfg)
	store, err := boot.Dynamo(context.Background(), cfg, log)
	if err != nil {
		boot.Fatal(err)
	}
	// Validating a token needs the grants alone: one GetItem per call; a DPoP proof adds,
	// once the token is found valid, the PutItem that records its jti.
	tokens := &oauth.Service{Grants: store, Replay: store, Clock: oauth.SystemClock{}}
	az := authorizer.New(tokens, cfg.RouteScopes, log)
	az.Origins = cfg.Origins()
	boot.Start(az.HandleEvent)
}
