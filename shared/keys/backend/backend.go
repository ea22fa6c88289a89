// Package backend opens the signing-key backend a configuration names, for the mains that sign
// or rotate keys (the token and rotatekeys functions, the local server, authctl). It is apart
// from shared/boot so that the functions that sign nothing do not link the KMS client.
package backend

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/acmebank/authserver/shared/awslog"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/datakey"
	"github.com/acmebank/authserver/shared/keys/kmskey"
	"github.com/acmebank/authserver/shared/keys/localkey"
)

// Open opens the key backend cfg names: KMS asymmetric keys (kms: one Sign per id_token), KMS
// data key pairs (kms-data-key: one Decrypt per key per instance, then signing in memory), or
// the local key files under the data directory. The KMS client takes its region and
// credentials from the environment, AWS_ENDPOINT_URL_KMS for local-kms; it makes no call
// until the first signature, and the SDK's own log lines go through log, as JSON.
func Open(ctx context.Context, cfg config.Config, log *slog.Logger) (keys.Backend, error) {
	if cfg.KeyBackend == "kms" || cfg.KeyBackend == "kms-data-key" {
		client, err := kmskey.NewClient(ctx, "", awslog.Option(log))
		if err != nil {
			return nil, fmt.Errorf("kms client: %w", err)
		}
		policy, err := signingKeyPolicy(cfg)
		if err != nil {
			return nil, err
		}
		kmsKeys := kmskey.New(client, kmskey.Options{TagValue: cfg.KMSTagValue, Policy: policy})
		if cfg.KeyBackend == "kms-data-key" {
			// The KMS keys of a stack switched from kms-sign keep signing until they retire.
			return datakey.New(client, cfg.KMSDataKey, kmsKeys), nil
		}
		return kmsKeys, nil
	}
	b, err := localkey.New(filepath.Join(cfg.DataDir, "keys"))
	if err != nil {
		return nil, fmt.Errorf("local keys: %w", err)
	}
	return b, nil
}

// signingKeyPolicy is the key policy of the signing keys the rotation creates (docs/keys.md,
// "Key policies"): the principals the configuration names, in the account and partition of
// the rotation's own role; nil (KMS's default policy) when none is named.
func signingKeyPolicy(cfg config.Config) (*kmskey.KeyPolicy, error) {
	if cfg.KMSKeyManager == "" {
		return nil, nil
	}
	// arn:<partition>:iam::<account>:role/<name>
	parts := strings.SplitN(cfg.KMSKeyManager, ":", 6)
	if len(parts) != 6 || parts[2] != "iam" || parts[4] == "" {
		return nil, fmt.Errorf("%s=%q: want an IAM role ARN", config.EnvKMSKeyManager, cfg.KMSKeyManager)
	}
	return &kmskey.KeyPolicy{Partition: parts[1], Account: parts[4], Administrators: cfg.KMSKeyAdmins,
		Signers: cfg.KMSKeySigners, Manager: cfg.KMSKeyManager}, nil
}
