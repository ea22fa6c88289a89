// Command authorize is the Lambda function of the authorization endpoint: the login and
// consent pages and the redirect back to the client.
package main

import (
	"context"

	"github.com/acmebank/authserver/shared/boot"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/web"
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
	audit, _, err := boot.OpenAudit(cfg.AuditLog) // stdout: CloudWatch, apart from the service log
	if err != nil {
		boot.Fatal(err)
	}
	// signs nothing: id_tokens come from the token function
	h, err := web.Authorize(wire.Deps{Config: cfg, Store: store, Log: log, Audit: audit}, nil)
	if err != nil {
		boot.Fatal(err)
	}
	boot.ServeHTTP(httpapi.HSTS(h))
}
