// Package awslog sends the AWS SDK's own log lines (such as "failed to close HTTP response
// body, this may affect connection reuse") through the application's slog logger, so that
// every line a function writes stays one JSON object; the SDK's default logger writes plain
// text ("SDK 2026/01/02 15:04:05 WARN ...") to stderr.
package awslog

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/logging"
)

// Logger is a smithy-go logging.Logger over a slog.Logger.
type Logger struct {
	log *slog.Logger
	ctx context.Context
}

var (
	_ logging.Logger        = Logger{}
	_ logging.ContextLogger = Logger{}
)

// New returns the SDK logger that writes to log, each line marked source=aws-sdk.
func New(log *slog.Logger) Logger {
	return Logger{log: log.With("source", "aws-sdk"), ctx: context.Background()}
}

// Option is the config.LoadDefaultConfig option that installs New(log) as the SDK's logger.
func Option(log *slog.Logger) func(*config.LoadOptions) error {
	return config.WithLogger(New(log))
}

// Logf logs the SDK's message at the matching slog level: WARN as Warn, DEBUG as Debug, any
// other classification as Info.
func (l Logger) Logf(classification logging.Classification, format string, v ...any) {
	level := slog.LevelInfo
	switch classification {
	case logging.Warn:
		level = slog.LevelWarn
	case logging.Debug:
		level = slog.LevelDebug
	}
	if !l.log.Enabled(l.ctx, level) {
		return
	}
	l.log.Log(l.ctx, level, fmt.Sprintf(format, v...))
}

// WithContext returns the logger with the operation's context, which slog handlers may read.
func (l Logger) WithContext(ctx context.Context) logging.Logger {
	l.ctx = ctx
	return l
}
