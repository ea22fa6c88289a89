// Package app wires a whole service from a configuration: the store and key adapters it names
// (the embedded store or DynamoDB, local keys or KMS), the token domain, and every HTTP handler
// on one mux. The local server, authctl and the tests use it; the Lambda functions do not
// (each main wires only what its function uses, with shared/boot).
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/acmebank/authserver/shared/boot"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/backend"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/pages"
	"github.com/acmebank/authserver/shared/store/embedded"
	"github.com/acmebank/authserver/shared/web"
)

// App is a wired service.
type App struct {
	Config  config.Config
	Log     *slog.Logger
	Store   oauth.Store
	Keys    keys.Backend
	Signer  *keys.Signer
	Service *oauth.Service
	Clock   oauth.Clock
	// Audit is the sink of security events (OpenAudit), written whatever the log level.
	Audit *slog.Logger

	closers []func() error
}

// New builds the adapters cfg names and the domain over them. It opens no network
// connection: AWS clients connect on first use.
func New(ctx context.Context, cfg config.Config, log *slog.Logger) (*App, error) {
	a := &App{Config: cfg, Log: log, Clock: oauth.SystemClock{}}
	audit, closeAudit, err := boot.OpenAudit(cfg.AuditLog)
	if err != nil {
		return nil, err
	}
	if a.Audit = audit; closeAudit != nil {
		a.closers = append(a.closers, closeAudit)
	}
	if a.Store, err = a.openStore(ctx); err != nil {
		a.Close()
		return nil, err
	}
	if a.Keys, err = a.openKeys(ctx); err != nil {
		a.Close()
		return nil, err
	}
	a.assemble()
	return a, nil
}

// Assemble builds the domain over adapters made elsewhere (tests that count AWS calls, tools
// that already hold a store).
func Assemble(cfg config.Config, store oauth.Store, backend keys.Backend, log *slog.Logger) *App {
	a := &App{Config: cfg, Log: log, Clock: oauth.SystemClock{}, Store: store, Keys: backend}
	audit, closeAudit, err := boot.OpenAudit(cfg.AuditLog)
	if err != nil { // a file that cannot be opened: the audit still goes somewhere
		log.Error("audit log", slog.Any("err", err))
		audit, closeAudit = boot.NewAuditLogger(os.Stdout), nil
	}
	if a.Audit = audit; closeAudit != nil {
		a.closers = append(a.closers, closeAudit)
	}
	a.assemble()
	return a
}

func (a *App) assemble() {
	a.Signer = keys.NewSigner(a.Store, a.Keys, a.Clock, a.Config.KeyCacheTTL)
	a.Service = boot.Service(a.Config, a.Store, a.Signer, a.Log, a.Audit)
}

func (a *App) openStore(ctx context.Context) (oauth.Store, error) {
	st, closeFn, err := openStore(ctx, a.Config, a.Log)
	if err != nil {
		return nil, err
	}
	if closeFn != nil {
		a.closers = append(a.closers, closeFn)
	}
	return st, nil
}

// OpenStore opens the store cfg names: DynamoDB (no connection until the first call) or the
// embedded store under the data directory, which must then be closed with the returned
// function (nil for DynamoDB). The local server, the functions and the admin tool share it.
func OpenStore(ctx context.Context, cfg config.Config) (oauth.Store, func() error, error) {
	return openStore(ctx, cfg, boot.Logger(cfg))
}

// openStore is OpenStore with the logger the AWS SDK's own lines go to (as JSON, like ours).
func openStore(ctx context.Context, cfg config.Config, log *slog.Logger) (oauth.Store, func() error, error) {
	switch cfg.Store {
	case "dynamodb":
		st, err := boot.OpenDynamo(ctx, cfg, log)
		if err != nil {
			return nil, nil, err
		}
		return st, nil, nil
	default:
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return nil, nil, fmt.Errorf("data directory: %w", err)
		}
		s, err := embedded.OpenWith(cfg.DataDir, embedded.Options{NoSync: cfg.NoSync, MaxPendingBytes: int64(cfg.PendingMB) << 20})
		if err != nil {
			return nil, nil, fmt.Errorf("open embedded store: %w", err)
		}
		return s, s.Close, nil
	}
}

func (a *App) openKeys(ctx context.Context) (keys.Backend, error) {
	return backend.Open(ctx, a.Config, a.Log)
}

// Rotator returns the key rotation over the app's registry and backend.
func (a *App) Rotator() *keys.Rotator {
	return keys.NewRotator(a.Store, a.Keys, a.Config.KeyPolicy(), a.Clock, a.Log)
}

// Close releases the store.
func (a *App) Close() error {
	var errs []error
	for _, c := range a.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

// AuthorizeRoutes serves the authorization endpoint, its pages and their stylesheet (the
// authorize function).
func (a *App) AuthorizeRoutes() (http.Handler, error) {
	pg, err := pages.New(httpapi.PathAssets)
	if err != nil {
		return nil, err
	}
	ah, err := web.NewAuthorizeHandler(a.Service, pg, a.Log, a.Config.Secure())
	if err != nil {
		return nil, err
	}
	m := http.NewServeMux()
	m.Handle(httpapi.PathAuthorize, ah)
	m.Handle(httpapi.PathAssets, &web.AssetsHandler{Pages: pg})
	return httpapi.WithClientAddress(m), nil
}

// TokenHandler serves the token endpoint (the token function).
func (a *App) TokenHandler() http.Handler {
	return httpapi.WithClientAddress(&httpapi.TokenHandler{Service: a.Service, Log: a.Log})
}

// PARHandler serves pushed authorization requests (the par function).
func (a *App) PARHandler() http.Handler {
	return httpapi.WithClientAddress(&httpapi.PARHandler{Service: a.Service, Log: a.Log})
}

// RevokeRoutes serves revocation on both documented paths (the revoke function).
func (a *App) RevokeRoutes() http.Handler {
	h := &httpapi.RevokeHandler{Service: a.Service, Log: a.Log}
	m := http.NewServeMux()
	m.Handle(httpapi.PathRevoke, h)
	m.Handle(httpapi.PathRevokeLegacy, h)
	return httpapi.WithClientAddress(m)
}

// KeysRoutes serves the JWKS and the discovery document (the jwks function).
func (a *App) KeysRoutes() http.Handler {
	m := http.NewServeMux()
	m.Handle(httpapi.PathJWKS, &httpapi.JWKSHandler{Keys: a.Store, Clock: a.Clock, MaxAge: a.Config.JWKSMaxAge,
		RefreshEvery: a.Config.KeyCacheTTL, Log: a.Log})
	m.Handle(httpapi.PathDiscovery, httpapi.NewDiscoveryHandler(httpapi.Provider{BaseURL: a.Config.BaseURL, Issuer: a.Config.Issuer,
		MTLSBaseURL: a.Config.MTLSBaseURL, Locales: pages.Locales, RequirePAR: a.Config.RequirePAR, IDTokenAlgs: a.Config.IDTokenAlgs}))
	return m
}

// Mux serves every endpoint on its fixed path, as the local server and the tests do.
func (a *App) Mux() (*http.ServeMux, error) {
	authorize, err := a.AuthorizeRoutes()
	if err != nil {
		return nil, err
	}
	m := http.NewServeMux()
	m.Handle(httpapi.PathAuthorize, authorize)
	m.Handle(httpapi.PathAssets, authorize)
	m.Handle(httpapi.PathToken, a.TokenHandler())
	m.Handle(httpapi.PathPAR, a.PARHandler())
	revoke := a.RevokeRoutes()
	m.Handle(httpapi.PathRevoke, revoke)
	m.Handle(httpapi.PathRevokeLegacy, revoke)
	keys := a.KeysRoutes()
	m.Handle(httpapi.PathJWKS, keys)
	m.Handle(httpapi.PathDiscovery, keys)
	m.Handle(httpapi.PathUserinfo, a.UserinfoHandler())
	m.Handle(httpapi.PathIntrospect, a.IntrospectHandler())
	return m, nil
}
