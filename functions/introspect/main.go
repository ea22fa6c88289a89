// Command introspect is the Lambda function of token introspection (RFC 7662), for resource
// servers that are not behind API Gateway's authorizer.
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
	boot.ServeHTTP(httpapi.HSTS(&httpapi.IntrospectHandler{Service: svc, Log: log, ResourceServers: cfg.IntrospectionClients}))
}
