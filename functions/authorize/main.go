// Command authorize is the Lambda function of the authorization endpoint: the login and
// consent pages and the redirect back to the client, signed by the key backend (KMS) when the
// request asked for JARM.
package main

import (
	"context"

	"github.com/acmebank/authserver/shared/boot"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/backend"
	"github.com/acmebank/authserver/shared/oauth"
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
	meter := boot.Metrics(cfg, "authorize")       // EMF on stdout: exchanges, refusals, sign-ins (docs/operations.md)
	audit, _, err := boot.OpenAudit(cfg.AuditLog) // stdout: CloudWatch, apart from the service log
	if err != nil {
		boot.Fatal(err)
	}
	keyBackend, err := backend.Open(ctx, cfg, log) // KMS: JARM responses (response_mode=jwt), the Connected apps page's consent receipts
	if err != nil {
		boot.Fatal(err)
	}
	signer := keys.NewSigner(store, keyBackend, oauth.SystemClock{}, cfg.KeyCacheTTL)
	h, err := web.Authorize(wire.Deps{Config: cfg, Store: store, Signer: signer, Log: log, Audit: meter.Audit(audit)}, nil)
	if err != nil {
		boot.Fatal(err)
	}
	boot.ServeHTTP(httpapi.HSTS(meter.Refusals(h)))
}
