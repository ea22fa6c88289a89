package boot

import (
	"context"
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

// A function (no embedded opener) started with another store than DynamoDB fails at start,
// naming the setting.
func TestOpenStore_WithoutEmbeddedOpenerRefusesAnotherStore(t *testing.T) {
	cfg := config.Defaults()
	cfg.Store = "embedded"
	if _, _, err := OpenStore(context.Background(), cfg, Logger(cfg), nil); err == nil || !strings.Contains(err.Error(), config.EnvStore) {
		t.Fatalf("err = %v, want one naming %s", err, config.EnvStore)
	}
}
