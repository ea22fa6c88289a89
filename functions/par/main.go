// Command par is the Lambda function of pushed authorization requests (RFC 9126): an
// authenticated client posts its authorization request, and gets the request_uri the
// authorize function takes it by.
package main

import (
	"context"

	"github.com/acmebank/authserver/shared/boot"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
)

func main() {
	ctx := context.Background()
	cfg, err := config.FromEnv()
	if err != nil {
		boot.Fatal(err)
	}
	log := boot.Logger(cfg)
	store, err := boot.Dynamo(ctx, cfg, log)
	if err != nil {
		boot.Fatal(err)
	}
	audit, _, err := boot.OpenAudit(cfg.AuditLog) // stdout: CloudWatch, apart from the service log
	if err != nil {
		boot.Fatal(err)
	}
	svc := boot.Service(cfg, store, nil, log, audit)
	boot.ServeHTTP(httpapi.HSTS(httpapi.WithClientAddress(&httpapi.PARHandler{Service: svc, Log: log})))
}
