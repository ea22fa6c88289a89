package lambda_test

import (
	"context"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/config"
)

// BenchmarkColdStart measures each function's init phase as Lambda bills it: exec of the
// bootstrap to its first GET /next, from the template environment alone (init opens no
// network connection, so neither DynamoDB nor KMS is needed), in the template's production
// configuration. Reported per function: init-ms, the
// binary's size, the CPU time of init and the peak RSS at the end of init. Figures, not assertions.
func BenchmarkColdStart(b *testing.B) {
	names := make([]string, 0, len(functions))
	for n := range functions {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		b.Run(name, func(b *testing.B) {
			bin := bootstrap(b, name)
			// The template's configuration (dynamodb, kms); neither client connects at init.
			e := env(b, name, map[string]string{
				config.EnvTable: "coldstart", config.EnvDynamoEndpoint: "http://127.0.0.1:9",
				"AWS_ENDPOINT_URL_KMS": "http://127.0.0.1:9",
			})
			st, err := os.Stat(bin)
			if err != nil {
				b.Fatal(err)
			}
			var total, cpu time.Duration
			var peak int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				f, err := startFunction(ctx, name, bin, e)
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				total += f.initDuration()
				cpu += f.initCPU
				if rss, err := f.peakRSS(); err == nil && rss > peak {
					peak = rss
				}
				f.stop()
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "init-ms")
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "init-cpu-ms")
			b.ReportMetric(float64(st.Size())/(1<<20), "binary-MiB")
			b.ReportMetric(float64(peak)/(1<<20), "init-peak-RSS-MiB")
		})
	}
}
