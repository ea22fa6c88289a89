package app

import (
	"context"
	"errors"

	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/keys"
)

// newKMSBackend builds the KMS key backend.
func newKMSBackend(ctx context.Context, cfg config.Config) (keys.Backend, error) {
	return nil, errors.New("kms key backend: not wired yet")
}
