// Package app wires a whole service from a configuration: the store and key adapters it names
// (the embedded store or DynamoDB, local keys or KMS), the token domain, and every HTTP handler
// on one mux, each built by the constructor its Lambda function calls (shared/wire,
// web.Authorize). The local server, authctl and the tests use it; the Lambda functions do not.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/boot"
	"github.com/acmebank/authserver/shared/ciba"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/backend"
	"github.com/acmebank/authserver/shared/logout"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/outbound"
	"github.com/acmebank/authserver/shared/store/embedded"
	"github.com/acmebank/authserver/shared/web"
	"github.com/acmebank/authserver/shared/wire"
	"github.com/acmebank/authserver/shared/wire/registerwire"
)

// App is a wired service.
type App struct {
	Config  config.Config
	Log     *slog.Logger
	Store   oauth.Store
	Keys    keys.Backend
	Signer  *keys.Signer
	Service *oauth.Service
	// Authn is what the user's authentication is built from when the pages are served
	// (Mux), and Users that authentication once built.
	Authn authn.Deps
	Users *authn.Service
	Clock oauth.Clock
	// Audit is the sink of security events (OpenAudit), written whatever the log level.
	Audit *slog.Logger
	// NonceKeys wraps the DPoP nonce keys when AUTH_DPOP_NONCES is on (nil when off); the
	// Rotator makes them with it.
	NonceKeys oauth.NonceKeyWrapper
	// LogoutSender delivers back-channel logout tokens; nil is the configuration's
	// (web.AuthorizeWith). Tests set one that trusts their receivers.
	LogoutSender *logout.Sender
	// CIBADevice reaches a CIBA request's customer; nil is the bank app page (ciba.PageDevice).
	// Tests set the EventBridge device against a recorder, as the AWS deployment reaches them.
	CIBADevice ciba.Device

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
	st, closeStore, err := boot.OpenStore(ctx, cfg, log, OpenEmbedded)
	if err != nil {
		a.Close()
		return nil, err
	}
	if a.Store = st; closeStore != nil {
		a.closers = append(a.closers, closeStore)
	}
	if a.Keys, err = a.openKeys(ctx); err != nil {
		a.Close()
		return nil, err
	}
	if err := a.assemble(); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// Assemble builds the domain over adapters made elsewhere (tests that count AWS calls, tools
// that already hold a store).
func Assemble(cfg config.Config, store oauth.Store, backend keys.Backend, log *slog.Logger) (*App, error) {
	a := &App{Config: cfg, Log: log, Clock: oauth.SystemClock{}, Store: store, Keys: backend}
	audit, closeAudit, err := boot.OpenAudit(cfg.AuditLog)
	if err != nil { // a file that cannot be opened: the audit still goes somewhere
		log.Error("audit log", slog.Any("err", err))
		audit, closeAudit = boot.NewAuditLogger(os.Stdout), nil
	}
	if a.Audit = audit; closeAudit != nil {
		a.closers = append(a.closers, closeAudit)
	}
	if err := a.assemble(); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

func (a *App) assemble() (err error) {
	a.Signer = keys.NewSigner(a.Store, a.Keys, a.Clock, a.Config.KeyCacheTTL)
	nonces, err := a.openNonces()
	if err != nil {
		return err
	}
	if a.Service, err = boot.Service(a.Config, a.Store, a.Signer, nonces, a.Log, a.Audit); err != nil {
		return err
	}
	a.Authn = authn.DepsFromConfig(a.Config, a.Store, a.Log, a.Audit)
	return nil
}

// OpenEmbedded opens the embedded store under cfg's data directory, creating the directory: the
// embedded opener the local server and authctl hand to boot.OpenStore.
func OpenEmbedded(cfg config.Config) (oauth.Store, func() error, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("data directory: %w", err)
	}
	s, err := embedded.OpenWith(cfg.DataDir, embedded.Options{NoSync: cfg.NoSync, MaxPendingBytes: int64(cfg.PendingMB) << 20})
	if err != nil {
		return nil, nil, fmt.Errorf("open embedded store: %w", err)
	}
	return s, s.Close, nil
}

func (a *App) openKeys(ctx context.Context) (keys.Backend, error) {
	return backend.Open(ctx, a.Config, a.Log)
}

// openNonces returns the DPoP server nonces when AUTH_DPOP_NONCES is on (nil when off). The
// app makes the first nonce key itself if the store has none (the local server has no stack
// whose InitialKey run makes it); the Rotator makes the next ones.
func (a *App) openNonces() (oauth.DPoPNonces, error) {
	if !a.Config.DPoPNonces {
		return nil, nil
	}
	ctx := context.Background()
	w, err := backend.NonceWrapper(ctx, a.Config, a.Log)
	if err != nil {
		return nil, err
	}
	if _, err := oauth.RotateNonceKeys(ctx, a.Store, w, a.Clock.Now()); err != nil {
		return nil, err
	}
	ring, err := oauth.NewNonceKeyring(ctx, a.Store, w, a.Log, a.Clock.Now())
	if err != nil {
		return nil, fmt.Errorf("DPoP nonces: %w", err)
	}
	a.NonceKeys = w
	return ring, nil
}

// Rotator returns the key rotation over the app's registry and backend, and of the DPoP nonce
// keys when they are on.
func (a *App) Rotator() *keys.Rotator {
	r := keys.NewRotator(a.Store, a.Keys, a.Config.KeyPolicy(), a.Clock, a.Log)
	if a.NonceKeys != nil {
		r.WithNonceKeys(a.Store, a.NonceKeys)
	}
	return r
}

// Close releases the store.
func (a *App) Close() error {
	var errs []error
	for _, c := range a.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

// Deps are the app's adapters and token domain, for the endpoints' constructors (shared/wire,
// web.Authorize): the same constructors the Lambda functions call. The endpoints share the
// app's one token domain.
func (a *App) Deps() wire.Deps {
	var device ciba.Device = ciba.PageDevice{Log: a.Log} // locally the bank app page lists the requests
	if a.CIBADevice != nil {
		device = a.CIBADevice
	}
	return wire.Deps{Config: a.Config, Store: a.Store, Signer: a.Signer, Log: a.Log, Audit: a.Audit, Tokens: a.Service,
		CIBADevice: device,
		// Decisions taken on the local server (the bank app page) ping ping clients as the
		// AWS callback's do.
		CIBAPinger: ciba.NewHTTPPinger(outbound.Options{AllowPrivate: a.Config.JWKSURIAllowPrivate})}
}

// Mux serves every endpoint on its fixed path, as the local server and the tests do.
func (a *App) Mux() (*http.ServeMux, error) {
	d := a.Deps()
	users, err := authn.New(a.Authn)
	if err != nil {
		return nil, err
	}
	a.Users = users
	authorize := func(d wire.Deps) (http.Handler, error) { return web.AuthorizeWith(d, users, a.LogoutSender) }
	// The bank app page stands in for the bank's mobile app, CIBA's authentication device: on
	// the local server only (no Lambda function mounts web.BankApp).
	bankApp := func(d wire.Deps) (http.Handler, error) {
		if d.CIBADevice == nil {
			d.CIBADevice = ciba.PageDevice{Log: d.Log}
		}
		requests, err := wire.CIBA(d)
		if err != nil {
			return nil, err
		}
		return web.BankApp(d, users, requests)
	}
	m := http.NewServeMux()
	for _, e := range []struct {
		build func(wire.Deps) (http.Handler, error)
		paths []string
	}{
		{authorize, []string{httpapi.PathAuthorize, httpapi.PathAssets, httpapi.PathApps, httpapi.PathAppsReceipt, httpapi.PathLogout}},
		{wire.Token, []string{httpapi.PathToken}},
		{wire.PAR, []string{httpapi.PathPAR}},
		{wire.Revoke, []string{httpapi.PathRevoke, httpapi.PathRevokeLegacy}},
		{wire.Keys, []string{httpapi.PathJWKS, httpapi.PathDiscovery}},
		{wire.Userinfo, []string{httpapi.PathUserinfo}},
		{wire.Introspect, []string{httpapi.PathIntrospect}},
		{wire.Grants, []string{httpapi.PathGrants + "/"}},
		{registerwire.Register, []string{httpapi.PathRegister, httpapi.PathRegister + "/"}},
		{wire.Backchannel, []string{httpapi.PathBackchannel}},
		{bankApp, []string{web.PathBankApp}},
	} {
		h, err := e.build(d)
		if err != nil {
			return nil, err
		}
		for _, p := range e.paths {
			m.Handle(p, h)
		}
	}
	// The bank's app backend's decision callback (CIBA), when an app backend is configured:
	// the node tests of the CIBA grant decide through it as the AWS deployment does.
	if a.Config.CIBAAppBackend() {
		h, err := wire.BCDecision(d)
		if err != nil {
			return nil, err
		}
		m.Handle(httpapi.PathBCDecision, h)
	}
	return m, nil
}
