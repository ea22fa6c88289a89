// Command jwks is the Lambda function that publishes the signing keys (JWKS) and the OpenID
// discovery document, from the key registry, with no call to KMS.
package main

import (
	"context"
	"net/http"

	"github.com/acmebank/authserver/shared/boot"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/pages"
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
	// The JWKS comes from the key registry in the store: no KMS call.
	mux := http.NewServeMux()
	mux.Handle(httpapi.PathJWKS, &httpapi.JWKSHandler{Keys: store, Clock: oauth.SystemClock{}, MaxAge: cfg.JWKSMaxAge,
		RefreshEvery: cfg.KeyCacheTTL, Log: log})
	mux.Handle(httpapi.PathDiscovery, httpapi.NewDiscoveryHandler(httpapi.Provider{BaseURL: cfg.BaseURL, Issuer: cfg.Issuer,
		MTLSBaseURL: cfg.MTLSBaseURL, Locales: pages.Locales, RequirePAR: cfg.RequirePAR, IDTokenAlgs: cfg.IDTokenAlgs}))
	boot.ServeHTTP(httpapi.HSTS(mux))
}
