package backend

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/acmebank/authserver/shared/awslog"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/keys/datakey"
	"github.com/acmebank/authserver/shared/keys/kmskey"
	"github.com/acmebank/authserver/shared/keys/localkey"
	"github.com/acmebank/authserver/shared/oauth"
)

// NonceWrapper returns what wraps the DPoP nonce keys cfg names: KMS under AUTH_KMS_DATA_KEY
// (with the nonce keys' own encryption context), or, without it, the local server's plain keys
// (config refuses nonces with DynamoDB and no wrapping key).
func NonceWrapper(ctx context.Context, cfg config.Config, log *slog.Logger) (oauth.NonceKeyWrapper, error) {
	if cfg.KMSDataKey == "" {
		if cfg.Store == "dynamodb" {
			return nil, fmt.Errorf("configuration: %s=on with dynamodb needs %s", config.EnvDPoPNonces, config.EnvKMSDataKey)
		}
		return localkey.NonceKeys{}, nil
	}
	client, err := kmskey.NewClient(ctx, "", awslog.Option(log))
	if err != nil {
		return nil, fmt.Errorf("kms client: %w", err)
	}
	return datakey.NewNonceKeys(client, cfg.KMSDataKey), nil
}

// OpenNonces returns the DPoP server nonces cfg asks for (nil when AUTH_DPOP_NONCES is off): a
// keyring over the nonce keys in store, read and unwrapped now. A store without a nonce key, or
// a key that does not unwrap (KMS refuses this function's Decrypt), is an error: the function
// does not start, rather than run without the nonce check.
func OpenNonces(ctx context.Context, cfg config.Config, store oauth.NonceKeyStore, log *slog.Logger) (oauth.DPoPNonces, error) {
	if !cfg.DPoPNonces {
		return nil, nil
	}
	w, err := NonceWrapper(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	ring, err := oauth.NewNonceKeyring(ctx, store, w, log, oauth.SystemClock{}.Now())
	if err != nil {
		return nil, fmt.Errorf("DPoP nonces: %w", err)
	}
	return ring, nil
}
