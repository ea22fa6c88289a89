// Command register is the Lambda function of dynamic client registration (RFC 7591) and its
// management (RFC 7592): POST /register, and GET, PUT and DELETE /register/{client_id}. It
// reads and writes clients and takes initial access tokens; it signs nothing (no key backend).
package main

import (
	"context"

	"github.com/acmebank/authserver/shared/boot"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/wire"
	"github.com/acmebank/authserver/shared/wire/registerwire"
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
	meter := boot.Metrics(cfg, "register")        // EMF on stdout: refusals (docs/operations.md)
	audit, _, err := boot.OpenAudit(cfg.AuditLog) // stdout: CloudWatch, apart from the service log
	if err != nil {
		boot.Fatal(err)
	}
	h, err := registerwire.Register(wire.Deps{Config: cfg, Store: store, Log: log, Audit: meter.Audit(audit)})
	if err != nil {
		boot.Fatal(err)
	}
	boot.ServeHTTP(httpapi.HSTS(meter.Refusals(h)))
}
