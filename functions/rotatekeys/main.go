// Command rotatekeys is the Lambda function of the signing-key rotation. An EventBridge
// schedule runs it, the stack's InitialKey custom resource runs it once at deploy, operators
// invoke it on demand (handler.go lists the payloads). It moves keys next → current → retired
// → deleted in the registry (DynamoDB) and creates and schedules deletion of KMS keys; with
// AUTH_DPOP_NONCES=on it also makes the DPoP nonce keys, wrapped by KMS. See docs/keys.md.
package main

import (
	"context"
	"log/slog"

	"github.com/acmebank/authserver/shared/boot"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/backend"
	"github.com/acmebank/authserver/shared/oauth"
)

func main() {
	ctx := context.Background()
	cfg, err := config.FromEnv() // AUTH_TABLE, AUTH_KEY_BACKEND, AUTH_KMS_KEY_TAG, key timing
	if err != nil {
		boot.Fatal(err)
	}
	log := boot.Logger(cfg)
	// The cfn package logs through the standard logger: this keeps those lines JSON too.
	slog.SetDefault(log)
	registry, _, err := boot.OpenStore(ctx, cfg, log, nil) // the key registry, in DynamoDB
	if err != nil {
		boot.Fatal(err)
	}
	keyBackend, err := backend.Open(ctx, cfg, log) // KMS: creates keys, schedules their deletion
	if err != nil {
		boot.Fatal(err)
	}
	keyRotator := keys.NewRotator(registry, keyBackend, cfg.KeyPolicy(), oauth.SystemClock{}, log)
	if cfg.DPoPNonces { // the DPoP nonce keys, made under the wrapping key on the same schedule
		wrap, err := backend.NonceWrapper(ctx, cfg, log)
		if err != nil {
			boot.Fatal(err)
		}
		keyRotator.WithNonceKeys(registry, wrap)
	}
	var rot rotator = keyRotator
	if !cfg.KeyRotation { // a multi-region deployment's other regions: one registry writer
		rot = notHere{}
	}
	boot.Start(newHandler(rot, log))
}
