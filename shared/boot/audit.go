package boot

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/metrics"
	"github.com/acmebank/authserver/shared/requestid"
)

// OpenAudit returns the audit logger the configuration names (AUTH_AUDIT_LOG): a JSON handler of
// its own, at info whatever AUTH_LOG_LEVEL says, on its own writer (stdout by default, which
// Lambda sends to CloudWatch; stderr; or a file, appended to), every line marked
// "log":"audit" so that it can be told from the service's log in one stream. The returned
// function closes a file sink (nil otherwise).
func OpenAudit(dest string) (*slog.Logger, func() error, error) {
	var w io.Writer
	var closeFn func() error
	switch dest {
	case "", "stdout":
		w = os.Stdout
	case "stderr":
		w = os.Stderr
	default:
		f, err := os.OpenFile(dest, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("audit log: %w", err)
		}
		w, closeFn = f, f.Close
	}
	return NewAuditLogger(w), closeFn, nil
}

// NewAuditLogger is the audit logger over w.
func NewAuditLogger(w io.Writer) *slog.Logger {
	return slog.New(requestid.Handler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))).With(slog.String("log", "audit"))
}

// Metrics returns the EMF metrics Recorder of the function named function (token, authorize,
// ...), writing to stdout, which Lambda sends to the function's CloudWatch log group where the
// metrics are extracted; nil (no metrics) when the configuration names no environment
// (AUTH_METRICS_ENVIRONMENT), as for the local server. Its Audit wraps the audit logger (the
// exchanges and sign-ins), its Refusals the HTTP handler (the error answers).
func Metrics(cfg config.Config, function string) *metrics.Recorder {
	if cfg.MetricsEnvironment == "" {
		return nil
	}
	return metrics.New(os.Stdout, function, cfg.MetricsEnvironment)
}
