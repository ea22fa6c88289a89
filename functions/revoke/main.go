// Command revoke is the Lambda function of token revocation (RFC 7009), on both documented
// paths.
package main

import (
	"context"
	"net/http"

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
	revoke := &httpapi.RevokeHandler{Service: svc, Log: log}
	mux := http.NewServeMux()
	mux.Handle(httpapi.PathRevoke, revoke)
	mux.Handle(httpapi.PathRevokeLegacy, revoke)
	boot.ServeHTTP(httpapi.HSTS(httpapi.WithClientAddress(mux)))
}
