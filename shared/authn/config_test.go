package authn

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/config"
)

// TestPasskeys_OffOnAnIPAddressSaysSoInPlainWordsOnce proves a base URL on an IP address turns
// passkeys off with one warning in plain words that names the setting turning them on, not
// the WebAuthn library's text; and a host name turns them on with no warning.
func TestPasskeys_OffOnAnIPAddressSaysSoInPlainWordsOnce(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if p := passkeys(config.Config{BaseURL: "http://127.0.0.1:8080"}, log); p != nil {
		t.Fatal("passkeys on an IP address")
	}
	got := logs.String()
	if strings.Count(got, "passkeys are off") != 1 || !strings.Contains(got, "--base-url http://localhost:8080") ||
		!strings.Contains(got, "127.0.0.1 is an IP address") || strings.Contains(got, "RPID") {
		t.Errorf("the warning is not one plain sentence with the fix:\n%s", got)
	}
	logs.Reset()
	if p := passkeys(config.Config{BaseURL: "http://localhost:8080"}, log); p == nil || logs.Len() != 0 {
		t.Errorf("localhost: passkeys %v, logged %q; want on and silent", p != nil, logs.String())
	}
}
