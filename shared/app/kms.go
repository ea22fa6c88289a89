package app

import (
	"context"
	"fmt"

	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/kmskey"
)

// newKMSBackend builds the KMS key backend. The AWS configuration comes from the environment
// (region, credentials of the function's role; AWS_ENDPOINT_URL_KMS for a test double); no
// call is made until the first signature.
func newKMSBackend(ctx context.Context, cfg config.Config) (keys.Backend, error) {
	client, err := kmskey.NewClient(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("kms client: %w", err)
	}
	return kmskey.New(client, kmskey.Options{TagValue: cfg.KMSTagValue}), nil
}
