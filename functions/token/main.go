// Command token is the Lambda function of the token endpoint: the authorization_code and
// refresh_token grants, with id_tokens signed by the key backend (KMS).
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
	meter := boot.Metrics(cfg, "token")           // EMF on stdout: exchanges, refusals, sign-ins (docs/operations.md)
	audit, _, err := boot.OpenAudit(cfg.AuditLog) // stdout: CloudWatch, apart from the service log
	if err != nil {
		boot.Fatal(err)
	}
	keyBackend, err := backend.Open(ctx, cfg, log) // KMS: the id_token's signature
	if err != nil {
		boot.Fatal(err)
	}
	signer := keys.NewSigner(store, keyBackend, oauth.SystemClock{}, cfg.KeyCacheTTL)
	nonces, err := backend.OpenNonces(ctx, cfg, store, log) // DPoP nonce keys: read from the table, unwrapped by KMS, at start
	if err != nil {
		boot.Fatal(err)
	}
	h, err := wire.Token(wire.Deps{Config: cfg, Store: store, Signer: signer, Nonces: nonces, Log: log, Audit: meter.Audit(audit)})
	if err != nil {
		boot.Fatal(err)
	}
	boot.ServeHTTP(httpapi.HSTS(meter.Refusals(h)))
}
