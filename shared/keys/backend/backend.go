// Package backend opens the signing-key backend a configuration names, for the mains that sign
// or rotate keys (the token and rotatekeys functions, the local server, authctl). It is apart
// from shared/boot so that the functions that sign nothing do not link the KMS client.
package backend

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/acmebank/authserver/shared/awslog"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/kmskey"
	"github.com/acmebank/authserver/shared/keys/localkey"
)

// Open opens the key backend cfg names: KMS (region and credentials from the environment,
// AWS_ENDPOINT_URL_KMS for local-kms; no call until the first signature; the SDK's own log
// lines through log, as JSON) or the local key files under the data directory.
func Open(ctx context.Context, cfg config.Config, log *slog.Logger) (keys.Backend, error) {
	if cfg.KeyBackend == "kms" {
		client, err := kmskey.NewClient(ctx, "", awslog.Option(log))
		if err != nil {
			return nil, fmt.Errorf("kms client: %w", err)
		}
		return kmskey.New(client, kmskey.Options{TagValue: cfg.KMSTagValue}), nil
	}
	b, err := localkey.New(filepath.Join(cfg.DataDir, "keys"))
	if err != nil {
		return nil, fmt.Errorf("local keys: %w", err)
	}
	return b, nil
}
