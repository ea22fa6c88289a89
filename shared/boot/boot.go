// Package boot holds the small pieces the Lambda functions' mains share: the logger, the one
// store opener, the token domain over a store, and the start of the Lambda runtime. Each main
// calls the pieces it needs, so what a function links, and depends on, is what its main shows.
// boot imports neither the pages nor the embedded store nor a key backend (signing functions
// open theirs with shared/keys/backend): functions/deps_test.go holds each function to that.
package boot

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/lambda"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/acmebank/authserver/shared/awslog"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/jwksuri"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/oauth/rar"
	"github.com/acmebank/authserver/shared/requestid"
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
		return slog.New(requestid.Handler(slog.NewTextHandler(os.Stderr, opts)))
	}
	return slog.New(requestid.Handler(slog.NewJSONHandler(os.Stderr, opts)))
}

// EmbeddedOpener opens the embedded store cfg names; the store's close function comes with it.
// The local server and authctl pass the embedded store's (app.OpenEmbedded); the Lambda
// functions pass nil, so that none of them links the embedded store (functions/deps_test.go).
type EmbeddedOpener func(cfg config.Config) (oauth.Store, func() error, error)

// OpenStore opens the store cfg names, the one way every binary does. DynamoDB opens no
// connection until the first call, and the SDK's own log lines go through log; in a
// multi-region deployment (AUTH_HOME_REGION set) it is this region's replica of the global
// table, with the single-use writes of codes and tokens issued elsewhere sent to their home
// region's replica (shared/store/regional, docs/multiregion.md). Any other AUTH_STORE is the
// embedded store, opened by embedded, which must then be closed with the returned function (nil
// for DynamoDB); with embedded nil (a Lambda function) AUTH_STORE must say dynamodb.
func OpenStore(ctx context.Context, cfg config.Config, log *slog.Logger, embedded EmbeddedOpener) (oauth.Store, func() error, error) {
	if cfg.Store != "dynamodb" {
		if embedded == nil {
			return nil, nil, fmt.Errorf("configuration: %s=%q: a Lambda function needs dynamodb", config.EnvStore, cfg.Store)
		}
		return embedded(cfg)
	}
	client, err := dynamo.NewClient(ctx, cfg.DynamoEndpoint, awslog.Option(log))
	if err != nil {
		return nil, nil, fmt.Errorf("dynamodb client: %w", err)
	}
	local := dynamo.New(client, cfg.Table)
	if cfg.HomeRegion == "" {
		return local, nil, nil
	}
	peers := map[string]oauth.Store{}
	for _, region := range cfg.PeerRegions {
		client, err := dynamo.NewClient(ctx, cfg.DynamoEndpoint, awslog.Option(log), awsconfig.WithRegion(region))
		if err != nil {
			return nil, nil, fmt.Errorf("dynamodb client for %s: %w", region, err)
		}
		peers[region] = dynamo.New(client, cfg.Table) // a global table's replicas share its name
	}
	st, err := regional.New(cfg.HomeRegion, local, peers)
	if err != nil {
		return nil, nil, err
	}
	st.PeerTimeout = cfg.PeerTimeout
	return st, nil, nil
}

// Service is the token domain over a store, built by oauth.New (which names any dependency
// missing). signer is nil for the functions that sign no id_token (everything but the token
// endpoint); nonces is nil unless DPoP server nonces are on (backend.OpenNonces, the token and
// PAR functions); audit receives the security events. The user's authentication, which only the
// pages need, is authn.FromConfig.
func Service(cfg config.Config, store oauth.Store, signer oauth.IDTokenSigner, nonces oauth.DPoPNonces, log, audit *slog.Logger) (*oauth.Service, error) {
	clock := oauth.SystemClock{}
	details, err := rar.Shipped()
	if err != nil {
		return nil, err
	}
	return oauth.New(oauth.Deps{
		Clients:      oauth.NewClientCache(store, cfg.ClientCacheTTL, clock),
		Interactions: store,
		Grants:       store,
		Replay:       store,
		Signer:       signer,
		Clock:        clock,
		Issuer:       cfg.Issuer,
		Lifetimes:    cfg.Lifetimes,
		Log:          log,
		Audit:        audit,
		Home:         cfg.HomeRegion,
		RequirePAR:   cfg.RequirePAR,
		DPoPNonces:   nonces,
		Origins:      cfg.Origins(),
		ClientJWKS:   oauth.NewJWKSCache(JWKSFetcher(cfg), 0),
		// RFC 9396: the authorization_details types the deployment declares, compiled once.
		AuthorizationDetails: details,
		// CIBA's requests, which the ciba grant polls (oauth/flow_ciba.go).
		Backchannel: store,
	})
}

// JWKSFetcher is the fetcher of clients' jwks_uri that cfg asks for: the token domain's and
// the operator's (registration fetches once), so the two apply the same rules.
func JWKSFetcher(cfg config.Config) *jwksuri.Fetcher {
	return jwksuri.New(jwksuri.Options{AllowPrivate: cfg.JWKSURIAllowPrivate})
}

// ServeHTTP hands an http.Handler to API Gateway (HTTP API, payload 2.0) through the
// aws-lambda-go-api-proxy adapter.
func ServeHTTP(h http.Handler) {
	Start(httpadapter.NewV2(requestid.FromAPIGateway(h)).ProxyWithContext)
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
