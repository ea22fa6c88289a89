// Command authorizer is the Lambda authorizer of the bank API routes (HTTP API, payload 2.0,
// simple responses): bearer token, one DynamoDB read, certificate binding, the route's scopes.
// It needs only the token table: no signing keys, no pages, no embedded store.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/acmebank/authserver/shared/authorizer"
	"github.com/acmebank/authserver/shared/awslog"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/dynamo"
)

func main() {
	cfg, err := config.FromEnv()
	if err != nil {
		fatal(err)
	}
	if cfg.Store != "dynamodb" {
		fatal(fmt.Errorf("%s=%q: the authorizer reads tokens from DynamoDB only", config.EnvStore, cfg.Store))
	}
	log := newLogger(cfg)
	client, err := dynamo.NewClient(context.Background(), cfg.DynamoEndpoint, awslog.Option(log))
	if err != nil {
		fatal(fmt.Errorf("dynamodb client: %w", err))
	}
	tokens := &oauth.Service{Grants: dynamo.New(client, cfg.Table), Clock: oauth.SystemClock{}}
	routes, err := authorizer.ParseRoutes(os.Getenv(config.EnvRouteScopes))
	if err != nil {
		fatal(fmt.Errorf("%s: %w", config.EnvRouteScopes, err))
	}
	lambda.Start(authorizer.New(tokens, routes, log).HandleEvent)
}

// newLogger is the JSON (or text) logger at the level the configuration asks for.
func newLogger(cfg config.Config) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, opts))
}

// fatal reports a startup failure; the Lambda runtime records it as an init error.
func fatal(err error) {
	fmt.Fprintln(os.Stderr, "startup:", err)
	os.Exit(1)
}
