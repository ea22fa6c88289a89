package boot

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/metrics"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/requestid"
)

// What one audit line costs the request that writes it: the grant_issued line of a code
// exchange (oauth.WriteAudit) through the audit logger (NewAuditLogger), with a request id and
// a client address, written synchronously to each kind of sink the service has. The token
// request it is written in costs 0.5-0.9 ms of CPU (test/bench's BenchmarkFAPIExchange and
// BenchmarkFAPIRefresh), so these figures say whether writing it on the response path matters.

func benchAuditLine(b *testing.B, w io.Writer, wrap func(*slog.Logger) *slog.Logger) {
	log := NewAuditLogger(w)
	if wrap != nil {
		log = wrap(log)
	}
	ctx := oauth.WithAuditInfo(requestid.With(context.Background(), "Jx2kAhcLIAMEbWQ="), oauth.AuditInfo{ClientIP: "203.0.113.7"})
	g := &oauth.Grant{ID: oauth.NewID(oauth.PrefixGrant), ClientID: "fapi-es256", UID: "uid-0123456789"}
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime()
	for i := 0; i < b.N; i++ {
		oauth.WriteAudit(ctx, log, "grant_issued", g, slog.String("scope", "openid email"), slog.Bool("cert_bound", false), slog.Bool("dpop_bound", true))
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-start)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
}

// cpuTime is the process's CPU time (user and system): on a busy machine, what a line costs
// the service better than the wall time, which includes waiting for a core.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAuditLine_Discard is the encoding alone.
func BenchmarkAuditLine_Discard(b *testing.B) { benchAuditLine(b, io.Discard, nil) }

// BenchmarkAuditLine_File is the local server's AUTH_AUDIT_LOG file: one write(2) per line.
func BenchmarkAuditLine_File(b *testing.B) {
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "audit.jsonl"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	benchAuditLine(b, f, nil)
}

// pipe is a sink like a Lambda function's stdout: a pipe another process drains.
func pipe(b *testing.B) *os.File {
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, r); close(done) }()
	b.Cleanup(func() { w.Close(); <-done; r.Close() })
	return w
}

// BenchmarkAuditLine_Pipe is a Lambda function's stdout, which the runtime sends to CloudWatch.
func BenchmarkAuditLine_Pipe(b *testing.B) { benchAuditLine(b, pipe(b), nil) }

// BenchmarkAuditLine_PipeWithMetric is the token function's audit logger in Lambda: the line,
// then its EMF metric line (metrics.Recorder.Audit), both on stdout.
func BenchmarkAuditLine_PipeWithMetric(b *testing.B) {
	w := pipe(b)
	rec := metrics.New(w, "token", "bench")
	benchAuditLine(b, w, rec.Audit)
}
