package app

import (
	"os"
	"runtime/debug"
	"strconv"
)

// DefaultGCPercent is the garbage collector's target unless GOGC says otherwise. The service's
// live heap is small (tens of MiB) and its requests allocate short-lived garbage, so letting the
// heap grow to five times the live data before collecting trades a little memory for about a
// fifth of the CPU per complete flow (2.5 → 2.0 ms on the load test, docs/benchmarks.md).
const DefaultGCPercent = 400

// TuneGC applies DefaultGCPercent unless GOGC is set, and in Lambda (unless GOMEMLIMIT is set)
// a soft memory limit of 70 % of the function's memory, so the larger target can never push
// the function out of memory: near the limit the collector runs as often as it must.
func TuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(DefaultGCPercent)
	}
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	if mb, err := strconv.Atoi(os.Getenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")); err == nil && mb > 0 {
		debug.SetMemoryLimit(int64(mb) << 20 * 7 / 10)
	}
}
