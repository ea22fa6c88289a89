package app

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/acmebank/authserver/shared/awslog"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/kmskey"
)

// newKMSBackend builds the KMS key backend. The AWS configuration comes from the environment
// (region, credentials of the function's role; AWS_ENDPOINT_URL_KMS for local-kms); no
// call is made until the first signature. The SDK's own log lines go through log, as JSON.
func newKMSBackend(ctx context.Context, cfg config.Config, log *slog.Logger) (keys.Backend, error) {
	client, err := kmskey.NewClient(ctx, "", awslog.Option(log))
	if err != nil {
		return nil, fmt.Errorf("kms client: %w", err)
	}
	return kmskey.New(client, kmskey.Options{TagValue: cfg.KMSTagValue}), nil
}
