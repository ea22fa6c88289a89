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
	keyBackend, err := backend.Open(ctx, cfg, log) // KMS: the id_token's signature
	if err != nil {
		boot.Fatal(err)
	}
	signer := keys.NewSigner(store, keyBackend, oauth.SystemClock{}, cfg.KeyCacheTTL)
	svc := boot.Service(cfg, store, signer, log, audit)
	boot.ServeHTTP(httpapi.HSTS(httpapi.WithClientAddress(&httpapi.TokenHandler{Service: svc, Log: log})))
}
