package boot_test

import (
	"testing"

	"github.com/acmebank/authserver/shared/boot"
	"github.com/acmebank/authserver/shared/config"
)

// TestMetrics_OnlyWithAnEnvironment: a function's configuration from the template names the
// metrics' environment and gets a recorder; the local server's defaults name none and get no
// recorder, so its metrics go nowhere.
func TestMetrics_OnlyWithAnEnvironment(t *testing.T) {
	if boot.Metrics(config.Defaults(), "authorize") != nil {
		t.Error("the local defaults record metrics")
	}
	cfg := config.Defaults()
	cfg.MetricsEnvironment = "production"
	if boot.Metrics(cfg, "token") == nil {
		t.Error("a configuration naming an environment records no metrics")
	}
}
