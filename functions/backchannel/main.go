// Command backchannel is the Lambda function of the backchannel authentication endpoint
// (OpenID CIBA Core 1.0 7): an authenticated client names a customer, who is asked on the
// bank's app (the Device) to approve; the client then polls the token function.
package main

import (
	"context"

	"github.com/acmebank/authserver/shared/boot"
	"github.com/acmebank/authserver/shared/ciba"
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
	meter := boot.Metrics(cfg, "backchannel")
	audit, _, err := boot.OpenAudit(cfg.AuditLog)
	if err != nil {
		boot.Fatal(err)
	}
	// The device: the EventBridge event the bank's app backend consumes (package
	// ciba/eventbridge, branch h-b) replaces this log-only device when merged.
	device := ciba.PageDevice{Log: log}
	h, err := wire.Backchannel(wire.Deps{Config: cfg, Store: store, Log: log, Audit: meter.Audit(audit), CIBADevice: device})
	if err != nil {
		boot.Fatal(err)
	}
	boot.ServeHTTP(httpapi.HSTS(meter.Refusals(h)))
}
