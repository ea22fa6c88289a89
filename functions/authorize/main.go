// Command authorize is the Lambda function of the authorization endpoint: the login and
// consent pages and the redirect back to the client.
package main

import (
	"context"
	"net/http"

	"github.com/acmebank/authserver/shared/boot"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/pages"
	"github.com/acmebank/authserver/shared/web"
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
	pg, err := pages.New(httpapi.PathAssets)
	if err != nil {
		boot.Fatal(err)
	}
	svc := boot.Service(cfg, store, nil, log, audit) // signs nothing: id_tokens come from the token function
	ah, err := web.NewAuthorizeHandler(svc, pg, log, cfg.Secure())
	if err != nil {
		boot.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(httpapi.PathAuthorize, ah)
	mux.Handle(httpapi.PathAssets, &web.AssetsHandler{Pages: pg})
	boot.ServeHTTP(httpapi.HSTS(httpapi.WithClientAddress(mux)))
}
