// Package boot holds the small pieces the Lambda functions' mains share: the logger, the
// DynamoDB store, the token domain over a store, and the start of the Lambda runtime. Each main
// calls the pieces it needs, so what a function links, and depends on, is what its main shows.
// boot imports neither the pages nor the embedded store nor a key backend (signing functions
// open theirs with shared/keys/backend): functions/deps_test.go holds each function to that.
package boot

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/lambda"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/acmebank/authserver/shared/awslog"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/dynamo"
	"github.com/acmebank/authserver/shared/store/regional"
)

// Logger returns the JSON (or text) slog logger the configuration asks for, on stderr.
func Logger(cfg config.Config) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if strings.EqualFold(cfg.LogFormat, "text") {
		return slog.New(slog.NewTextHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, opts))
}

// Dynamo opens the DynamoDB store (no connection until the first call), with the AWS SDK's own
// log lines going through log. A Lambda function has no other store: AUTH_STORE must say
// dynamodb. In a multi-region deployment (AUTH_HOME_REGION set) it is this region's replica of
// the global table, with the single-use writes of codes and tokens issued elsewhere sent to
// their home region's replica (shared/store/regional, docs/multiregion.md).
func Dynamo(ctx context.Context, cfg config.Config, log *slog.Logger) (oauth.Store, error) {
	if cfg.Store != "dynamodb" {
		return nil, fmt.Errorf("configuration: %s=%q: a Lambda function needs dynamodb", config.EnvStore, cfg.Store)
	}
	local, err := OpenDynamo(ctx, cfg, log)
	if err != nil || cfg.HomeRegion == "" {
		return local, err
	}
	peers := map[string]oauth.Store{}
	for _, region := range cfg.PeerRegions {
		client, err := dynamo.NewClient(ctx, cfg.DynamoEndpoint, awslog.Option(log), awsconfig.WithRegion(region))
		if err != nil {
			return nil, fmt.Errorf("dynamodb client for %s: %w", region, err)
		}
		peers[region] = dynamo.New(client, cfg.Table) // a global table's replicas share its name
	}
	return regional.New(cfg.HomeRegion, local, peers)
}

// OpenDynamo opens the DynamoDB store cfg names, whatever AUTH_STORE says (the local server and
// authctl in DynamoDB mode).
func OpenDynamo(ctx context.Context, cfg config.Config, log *slog.Logger) (*dynamo.Store, error) {
	client, err := dynamo.NewClient(ctx, cfg.DynamoEndpoint, awslog.Option(log))
	if err != nil {
		return nil, fmt.Errorf("dynamodb client: %w", err)
	}
	return dynamo.New(client, cfg.Table), nil
}

// Service is the token domain over a store. signer is nil for the functions that sign no
// id_token (everything but the token endpoint); audit receives the security events.
func Service(cfg config.Config, store oauth.Store, signer oauth.IDTokenSigner, log, audit *slog.Logger) *oauth.Service {
	clock := oauth.SystemClock{}
	return &oauth.Service{
		Clients:      oauth.NewClientCache(store, cfg.ClientCacheTTL, clock),
		Users:        store,
		Interactions: store,
		Grants:       store,
		Signer:       signer,
		Clock:        clock,
		Issuer:       cfg.Issuer,
		Lifetimes:    cfg.Lifetimes,
		Passwords:    oauth.PasswordHasher{Time: cfg.Argon2Time, MemoryKiB: cfg.Argon2MemoryKiB, Threads: 1},
		LoginPolicy:  oauth.LoginPolicy{MaxFailures: cfg.LoginMaxFailures, Window: cfg.LoginFailWindow},
		Hashing:      oauth.NewHashGate(passwordConcurrency(cfg), oauth.DefaultHashWait),
		Log:          log,
		Audit:        audit,
		Home:         cfg.HomeRegion,
		RequirePAR:   cfg.RequirePAR,
		Replay:       store,
		DPoPNonces:   cfg.DPoPNonces(),
		Origins:      cfg.Origins(),
		Factors:      store,
		Passkeys:     passkeys(cfg, log),
		SCA:          cfg.SCA,
	}
}

// passkeys is the WebAuthn relying party of the pages at the base URL. A host that cannot be
// one (an IP address: browsers refuse them as RP IDs) turns passkeys off, said in the log;
// locally, use http://localhost:8080 as the base URL to try them.
func passkeys(cfg config.Config, log *slog.Logger) *oauth.Passkeys {
	p, err := oauth.NewPasskeys(cfg.BaseURL, cfg.PasskeyRPID, "Acme Bank")
	if err != nil {
		if log != nil {
			if host := rpHost(cfg); net.ParseIP(host) != nil {
				local := "http://localhost:8080"
				if u, err := url.Parse(cfg.BaseURL); err == nil && u.Port() != "" {
					local = u.Scheme + "://localhost:" + u.Port()
				}
				log.Warn(fmt.Sprintf("passkeys are off: the server's address %s is an IP address, and a passkey needs a host name; to use passkeys locally, start with --base-url %s (%s=%s)", host, local, config.EnvBaseURL, local))
			} else {
				log.Warn("passkeys are off", slog.String("reason", err.Error()))
			}
		}
		return nil
	}
	return p
}

// rpHost is the passkey relying party's host: AUTH_PASSKEY_RP_ID, else the base URL's host.
func rpHost(cfg config.Config) string {
	if cfg.PasskeyRPID != "" {
		return cfg.PasskeyRPID
	}
	if u, err := url.Parse(cfg.BaseURL); err == nil {
		return u.Hostname()
	}
	return ""
}

// ServeHTTP hands an http.Handler to API Gateway (HTTP API, payload 2.0) through the
// aws-lambda-go-api-proxy adapter.
func ServeHTTP(h http.Handler) {
	Start(httpadapter.NewV2(h).ProxyWithContext)
}

// Start sets the soft memory limit and hands handler (a typed handler func) to the Lambda
// runtime.
func Start(handler any) {
	SetMemoryLimit()
	lambda.Start(handler)
}

// SetMemoryLimit sets, in Lambda and unless GOMEMLIMIT is set, a soft memory limit of 70 % of
// the function's memory: the Go runtime knows nothing of the function's memory size, and a
// burst that outgrows it kills the instance, while near the soft limit the collector simply
// runs more often. The collector's target (GOGC) stays Go's default.
func SetMemoryLimit() {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	if mb, err := strconv.Atoi(os.Getenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")); err == nil && mb > 0 {
		debug.SetMemoryLimit(int64(mb) << 20 * 7 / 10)
	}
}

// Fatal reports a startup failure and exits; the Lambda runtime records it as an init error.
func Fatal(err error) {
	fmt.Fprintln(os.Stderr, "startup:", err)
	os.Exit(1)
}
