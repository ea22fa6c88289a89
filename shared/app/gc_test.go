package app

import (
	"runtime/debug"
	"testing"
)

// TestTuneGC: the default target applies when GOGC is unset, GOGC wins when set, and a Lambda
// function gets a memory limit below its memory size.
func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))

	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
	TuneGC()
	if got := debug.SetGCPercent(100); got != DefaultGCPercent {
		t.Errorf("GC percent %d, want %d", got, DefaultGCPercent)
	}
	if got := debug.SetMemoryLimit(-1); got != 256<<20*7/10 {
		t.Errorf("memory limit %d, want 70%% of 256 MiB", got)
	}

	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150) // as the runtime would have from the environment
	TuneGC()
	if got := debug.SetGCPercent(100); got != 150 {
		t.Errorf("GOGC=150 was overridden: %d", got)
	}
}
