package keys

import (
	"context"
	"fmt"

	"github.com/acmebank/authserver/shared/oauth"
)

// CheckBackend reports whether every key the registry may still sign with (next and current)
// is in the backend, so that a server whose key files were lost refuses to start instead of
// failing every id_token, and spending every code, with a 500. Retired keys only verify, from
// the public keys the registry holds, and are not asked for.
func CheckBackend(ctx context.Context, registry oauth.KeyStore, backend Backend) error {
	set, err := registry.Keys(ctx)
	if err != nil {
		return fmt.Errorf("read the key registry: %w", err)
	}
	for _, k := range set.Keys {
		if k.State != oauth.KeyNext && k.State != oauth.KeyCurrent {
			continue
		}
		if _, err := backend.PublicKey(ctx, k.Ref); err != nil {
			return fmt.Errorf("signing key %s (%s) is in the key registry but its private key is missing: %w", k.Kid, k.State, err)
		}
	}
	return nil
}
