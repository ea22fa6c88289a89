package wire

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// Every endpoint's constructor refuses deps without a store, naming it, and builds its handler
// over a real store; the token and grants endpoints also need a signer, and say so.
func TestConstructors_NeedTheirAdaptersAndBuildOverARealStore(t *testing.T) {
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	log := slog.New(slog.DiscardHandler)
	cfg := config.Defaults()
	cfg.BaseURL, cfg.Issuer = "http://127.0.0.1:8080", "http://127.0.0.1:8080/v2/authentication/oauth2"
	full := Deps{Config: cfg, Store: st, Log: log, Audit: log}
	ctors := map[string]func(Deps) (http.Handler, error){
		"PAR": PAR, "Revoke": Revoke, "Keys": Keys, "Userinfo": Userinfo, "Introspect": Introspect,
		"Authorizer": func(d Deps) (http.Handler, error) { _, err := Authorizer(d); return nil, err },
	}
	for name, build := range ctors {
		t.Run(name, func(t *testing.T) {
			noStore := full
			noStore.Store = nil
			if _, err := build(noStore); err == nil || !strings.Contains(err.Error(), "Store") {
				t.Errorf("%s without a store: %v, want an error naming Store", name, err)
			}
			if _, err := build(full); err != nil {
				t.Errorf("%s over the embedded store: %v", name, err)
			}
		})
	}
	if _, err := Token(full); err == nil || !strings.Contains(err.Error(), "Signer") {
		t.Errorf("Token without a signer: %v, want an error naming Signer", err)
	}
	if _, err := Grants(full); err == nil || !strings.Contains(err.Error(), "Signer") {
		t.Errorf("Grants without a signer (consent receipts): %v, want an error naming Signer", err)
	}
}
