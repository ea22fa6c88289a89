package authn

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"

	"github.com/acmebank/authserver/shared/config"
)

// passwordConcurrency is how many password checks may run at once: the configured number, or
// one per CPU within half the memory limit (GOMEMLIMIT, else the Lambda function's memory).
func passwordConcurrency(cfg config.Config) int {
	if cfg.PasswordConcurrency > 0 {
		return cfg.PasswordConcurrency
	}
	limit := debug.SetMemoryLimit(-1) // reads the limit without changing it
	if limit == math.MaxInt64 {
		limit = 0
		if mb, err := strconv.ParseInt(os.Getenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"), 10, 64); err == nil {
			limit = mb << 20
		}
	}
	return HashConcurrency(runtime.NumCPU(), cfg.Argon2MemoryKiB, limit)
}
