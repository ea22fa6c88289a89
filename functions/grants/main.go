// Command grants is the Lambda function of the grant management endpoint (Grant Management for
// OAuth 2.0): a client's query (GET) and revocation (DELETE) of one of its grants at
// /grants/{grant_id}, with an access token checked as the authorizer checks it; the query's
// consent receipt is signed by the key backend (KMS).
package main

import (
	"context"

	"github.com/acmebank/authserver/shared/boot"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/backend"
	"github.com/acmebank/authserver/shared/oauth"
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
	meter := boot.Metrics(cfg, "grants")          // EMF on stdout: exchanges, refusals, sign-ins (docs/operations.md)
	audit, _, err := boot.OpenAudit(cfg.AuditLog) // stdout: CloudWatch, apart from the service log
	if err != nil {
		boot.Fatal(err)
	}
	keyBackend, err := backend.Open(ctx, cfg, log) // KMS: consent receipts (docs/api.md)
	if err != nil {
		boot.Fatal(err)
	}
	signer := keys.NewSigner(store, keyBackend, oauth.SystemClock{}, cfg.KeyCacheTTL)
	h, err := wire.Grants(wire.Deps{Config: cfg, Store: store, Signer: signer, Log: log, Audit: meter.Audit(audit)})
	if err != nil {
		boot.Fatal(err)
	}
	boot.ServeHTTP(httpapi.HSTS(meter.Refusals(h)))
}
