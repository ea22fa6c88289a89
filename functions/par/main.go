// Command par is the Lambda function of pushed authorization requests (RFC 9126): an
// authenticated client posts its authorization request, and gets the request_uri the
// authorize function takes it by.
package main

import (
	"context"

	"github.com/acmebank/authserver/shared/boot"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/keys/backend"
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
	meter := boot.Metrics(cfg, "par")             // EMF on stdout: exchanges, refusals, sign-ins (docs/operations.md)
	audit, _, err := boot.OpenAudit(cfg.AuditLog) // stdout: CloudWatch, apart from the service log
	if err != nil {
		boot.Fatal(err)
	}
	nonces, err := backend.OpenNonces(ctx, cfg, store, log) // DPoP nonce keys: read from the table, unwrapped by KMS, at start
	if err != nil {
		boot.Fatal(err)
	}
	h, err := wire.PAR(wire.Deps{Config: cfg, Store: store, Nonces: nonces, Log: log, Audit: meter.Audit(audit)})
	if err != nil {
		boot.Fatal(err)
	}
	boot.ServeHTTP(httpapi.HSTS(meter.Refusals(h)))
}
