package boot

import (
	"bytes"
	"context"
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/config"
)

// In Lambda the soft memory limit is 70 % of the function's memory, unless GOMEMLIMIT says
// otherwise; the GC target is left alone.
func TestSetMemoryLimit_SeventyPercentOfTheFunctionMemory(t *testing.T) {
	prevLimit, prevGC := debug.SetMemoryLimit(-1), debug.SetGCPercent(-1)
	debug.SetGCPercent(prevGC)
	t.Cleanup(func() { debug.SetMemoryLimit(prevLimit) })

	t.Setenv("GOMEMLIMIT", "")
	t.Setenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
	SetMemoryLimit()
	if got, want := debug.SetMemoryLimit(-1), int64(512)<<20*7/10; got != want {
		t.Fatalf("memory limit %d, want %d", got, want)
	}
	if got := debug.SetGCPercent(prevGC); got != prevGC {
		t.Fatalf("GC percent changed to %d", got)
	}

	debug.SetMemoryLimit(prevLimit)
	t.Setenv("GOMEMLIMIT", "1GiB")
	SetMemoryLimit()
	if got := debug.SetMemoryLimit(-1); got != prevLimit {
		t.Fatalf("GOMEMLIMIT set, yet the limit became %d", got)
	}
}

// A function started with another store than DynamoDB fails at start, naming the setting.
func TestDynamo_RefusesAnotherStore(t *testing.T) {
	cfg := config.Defaults()
	cfg.Store = "embedded"
	if _, err := Dynamo(context.Background(), cfg, Logger(cfg)); err == nil || !strings.Contains(err.Error(), config.EnvStore) {
		t.Fatalf("err = %v, want one naming %s", err, config.EnvStore)
	}
}

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
