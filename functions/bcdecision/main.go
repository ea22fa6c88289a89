// Command bcdecision is the Lambda function of the bank's app backend's callback (CIBA, issue
// 31): POST /bc-authorize/decision with the customer's decision as a token the app backend
// signs (docs/api.md, "The bank's app backend: the contract"). It reads the request, records
// the token's jti and the decision, and pings a ping client; it signs nothing (no key backend)
// and links no AWS client but DynamoDB's.
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
	meter := boot.Metrics(cfg, "bcdecision")      // EMF on stdout: refusals (docs/operations.md)
	audit, _, err := boot.OpenAudit(cfg.AuditLog) // stdout: CloudWatch, apart from the service log
	if err != nil {
		boot.Fatal(err)
	}
	h, err := wire.BCDecision(wire.Deps{Config: cfg, Store: store, Log: log, Audit: meter.Audit(audit)})
	if err != nil {
		boot.Fatal(err)
	}
	boot.ServeHTTP(httpapi.HSTS(meter.Refusals(h)))
}
