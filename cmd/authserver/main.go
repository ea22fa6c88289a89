// Command authserver runs the whole service on one port with no AWS: the embedded store and a
// local signing key under the data directory (or DynamoDB, when configured). It is what a
// newcomer starts first:
//
//	go run ./cmd/authserver
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/acmebank/authserver/shared/app"
	"github.com/acmebank/authserver/shared/boot"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/oauth"
)

func main() {
	err := run(os.Args[1:])
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "authserver:", err)
	}
	os.Exit(exitCode(err))
}

// exitCode is 0 for a clean stop and for -h/--help (the usage was asked for and printed), 1
// for any other error.
func exitCode(err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 1
}

func run(args []string) error { return runWith(args, os.Stdout, os.Stderr) }

// runWith is run with the streams of the demo credentials (stdout) and the usage (stderr).
func runWith(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("authserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	lookup := settingFlags(fs, os.LookupEnv)
	pprofAddr := fs.String("pprof", "", "serve net/http/pprof on this address (e.g. 127.0.0.1:6060) for profiling under load; off by default")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: authserver [flags]\n\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprintln(fs.Output())
		_ = config.Usage(fs.Output())
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.FromLookup(lookup)
	if err != nil {
		return err
	}
	if v, _ := lookup(config.EnvBaseURL); v == "" {
		// The base URL defaults to the listen address, https when the server has a certificate.
		scheme := "http://"
		if cfg.TLSCert != "" {
			scheme = "https://"
		}
		base := scheme + cfg.Addr
		if cfg, err = config.FromLookup(func(k string) (string, bool) {
			if k == config.EnvBaseURL {
				return base, true
			}
			return lookup(k)
		}); err != nil {
			return err
		}
	}
	log := boot.Logger(cfg)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// Every setting is checked before anything is seeded or printed: a bad setting fails here,
	// before the demo credentials are shown for a server that will not start.
	a, err := app.New(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer a.Close()
	if err := ensureTable(ctx, a); err != nil {
		return err
	}
	if err := checkSigningKeys(ctx, a); err != nil {
		return err
	}
	mux, err := a.Mux()
	if err != nil {
		return err
	}
	if err := mountHealth(mux, a, log); err != nil {
		return err
	}
	if err := a.MountBankAPI(mux, app.APIOptions{Upstream: cfg.APIUpstream, Deprecation: cfg.DeprecationDate, Sunset: cfg.DeprecationSunset}); err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           serverHandler(ctx, a, log, mux),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
	}
	if cfg.TLSCert != "" {
		if srv.TLSConfig, err = app.TLSConfig(cfg.TLSCert, cfg.TLSKey, cfg.ClientCA); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	if *pprofAddr != "" {
		if err := servePprof(*pprofAddr, log); err != nil {
			return err
		}
	}
	// The rotation creates the first signing key before prepare checks what the store lacks.
	if _, err := a.Rotator().Rotate(ctx); err != nil {
		return fmt.Errorf("signing keys: %w", err)
	}
	if err := prepare(ctx, a, cfg.Seed, stdout); err != nil {
		return err
	}
	go maintain(ctx, a, rotateEvery, sweepEvery)
	log.Info("listening", slog.String("addr", ln.Addr().String()), slog.String("issuer", cfg.Issuer), slog.String("store", cfg.Store),
		slog.Bool("tls", cfg.TLSCert != ""), slog.Bool("mtls", cfg.ClientCA != ""))
	errc := make(chan error, 1)
	go func() {
		if srv.TLSConfig != nil {
			errc <- srv.ServeTLS(ln, "", "") // the certificate is in TLSConfig; ServeTLS adds HTTP/2
			return
		}
		errc <- srv.Serve(ln)
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// settingFlags defines on fs a flag for each declared setting that has one (config.Settings)
// and returns the lookup to load the configuration with once fs is parsed: a flag given
// overrides its variable in env; a flag not given leaves the variable, or the default, alone.
func settingFlags(fs *flag.FlagSet, env func(string) (string, bool)) func(string) (string, bool) {
	flags, flagOf := map[string]*string{}, map[string]string{}
	for _, s := range config.Settings() {
		if s.Flag != "" {
			flagOf[s.Name] = s.Flag
			def := s.Default // shown by the usage; a derived default (the base URL's) is in the settings list
			if s.DefaultDoc != "" {
				def = ""
			}
			flags[s.Name] = fs.String(s.Flag, def, strings.ReplaceAll(s.Doc, "`", "")+" (env "+s.Name+")")
		}
	}
	return func(k string) (string, bool) {
		given := false
		fs.Visit(func(f *flag.Flag) { given = given || f.Name == flagOf[k] })
		if f := flags[k]; f != nil && given {
			return *f, true
		}
		return env(k)
	}
}

// serverHandler is what the local server puts in front of the mux: per-address rate limits
// (unless AUTH_RATE_LIMIT=false), Strict-Transport-Security on every response when the base URL
// is https, and the access log.
func serverHandler(ctx context.Context, a *app.App, log *slog.Logger, mux http.Handler) http.Handler {
	h := mux
	if a.Config.RateLimit {
		h = httpapi.NewRateLimiter(httpapi.DefaultRateLimits(a.Config.Lifetimes.Request), h)
	}
	if a.Config.Secure() {
		h = httpapi.HSTS(h)
	}
	return withAccessLog(ctx, log, h)
}

// withAccessLog wraps h in the access log when log writes at info. Below that level
// (AUTH_LOG_LEVEL=warn, as in the load benchmarks) the access log would still wrap every
// response writer and build its attributes for a line never written, so it is left out; the
// level is fixed for the process's life.
func withAccessLog(ctx context.Context, log *slog.Logger, h http.Handler) http.Handler {
	if !log.Enabled(ctx, slog.LevelInfo) {
		return h
	}
	return app.AccessLog(log, h)
}

// servePprof serves the runtime profiles on their own listener, never on the service's port, so
// they are opt-in and can stay on loopback while the service is measured.
func servePprof(addr string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("pprof listener: %w", err)
	}
	m := http.NewServeMux()
	m.HandleFunc("/debug/pprof/", pprof.Index)
	m.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	m.HandleFunc("/debug/pprof/profile", pprof.Profile)
	m.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	m.HandleFunc("/debug/pprof/trace", pprof.Trace)
	log.Info("pprof", slog.String("addr", ln.Addr().String()))
	go func() { _ = (&http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second}).Serve(ln) }()
	return nil
}

// Maintenance intervals: the key rotation checks its schedule every few minutes; expired items
// of the embedded store go every sweepEvery, so a flood's requests are gone within a minute of
// their expiry (each sweep deletes in small batches: embedded.Store.GarbageCollect).
const (
	rotateEvery = 5 * time.Minute
	sweepEvery  = 30 * time.Second
)

// maintain runs the key rotation every rotateEvery and, on the embedded store, removes expired
// items every sweepEvery, until ctx ends.
func maintain(ctx context.Context, a *app.App, rotateEvery, sweepEvery time.Duration) {
	rotate := time.NewTicker(rotateEvery)
	defer rotate.Stop()
	gc, _ := a.Store.(collector)
	sweeps := make(<-chan time.Time) // never ready: no store to sweep
	if gc != nil {
		t := time.NewTicker(sweepEvery)
		defer t.Stop()
		sweeps = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-rotate.C:
			if _, err := a.Rotator().Rotate(ctx); err != nil {
				a.Log.Error("key rotation", slog.Any("err", err))
			}
		case <-sweeps:
			sweep(gc, a.Log, time.Now())
		}
	}
}

// collector is a store that deletes its expired items itself (the embedded store; DynamoDB's
// TTL does it for its items).
type collector interface {
	GarbageCollect(time.Time) (int, error)
}

// sweep removes the items expired at now.
func sweep(gc collector, log *slog.Logger, now time.Time) {
	if n, err := gc.GarbageCollect(now); err != nil {
		log.Error("garbage collection", slog.Any("err", err))
	} else if n > 0 {
		log.Debug("garbage collection", slog.Int("removed", n))
	}
}

// checkSigningKeys refuses a start whose key registry names signing keys the key backend no
// longer has (a data directory restored without keys/, say): that server would fail every
// openid exchange with a 500, each spending its code.
func checkSigningKeys(ctx context.Context, a *app.App) error {
	err := keys.CheckBackend(ctx, a.Store, a.Keys)
	if err == nil || a.Config.KeyBackend == "kms" {
		return err
	}
	return fmt.Errorf("%w\nrestore %s from the backup the store came from (keys and store go together), or move %s away to start empty",
		err, filepath.Join(a.Config.DataDir, "keys"), a.Config.DataDir)
}

// mountHealth adds the liveness and readiness endpoints (docs/operations.md) to mux.
func mountHealth(mux *http.ServeMux, a *app.App, log *slog.Logger) error {
	health := &httpapi.Health{Clock: a.Clock, Timeout: 2 * time.Second, Log: log}
	if health.Store, _ = a.Store.(oauth.WriteChecker); health.Store == nil {
		return fmt.Errorf("store %s cannot answer readiness checks", a.Config.Store)
	}
	health.Register(mux)
	return nil
}
