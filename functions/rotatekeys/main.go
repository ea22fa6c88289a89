// Command rotatekeys is the Lambda function of the signing-key rotation. An EventBridge
// schedule runs it, the stack's InitialKey custom resource runs it once at deploy, operators
// invoke it on demand (handler.go lists the payloads). It moves keys next → current → retired
// → deleted in the registry (DynamoDB) and creates and schedules deletion of KMS keys. See
// docs/keys.md.
package main

import (
	"context"
	"log/slog"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/acmebank/authserver/shared/app"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/keys"
)

func main() {
	cfg, err := config.FromEnv() // AUTH_TABLE, AUTH_KEY_BACKEND, AUTH_KMS_KEY_TAG, key timing
	if err != nil {
		app.Fatal(err)
	}
	log := app.NewLogger(cfg)
	// The cfn package logs through the standard logger: this keeps those lines JSON too.
	slog.SetDefault(log)
	// The store (the key registry) and the key backend the configuration names.
	a, err := app.New(context.Background(), cfg, log)
	if err != nil {
		app.Fatal(err)
	}
	rot := keys.NewRotator(a.Store, a.Keys, cfg.KeyPolicy(), a.Clock, log)
	lambda.Start(newHandler(rot, log))
}
