// Command health is the Lambda function of GET /readyz on the stack's health API: the target
// of the region's Route 53 health check (docs/multiregion.md). Each request writes and reads
// back one small expiring item in this region's replica of the table (dynamo.Store.CheckWrite:
// the same item overwritten, whoever asks) and answers 200, or 503 when the round trip fails
// or takes longer than deadline. It never calls another region's replica: its answer is this
// region's health.
package main

import (
	"context"
	"net/http"
	"time"

	"github.com/acmebank/authserver/shared/awslog"
	"github.com/acmebank/authserver/shared/boot"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/dynamo"
)

// deadline bounds the round trip, SDK retries included: Route 53 counts a check failed unless
// the endpoint answers within two seconds of connecting, so a slow table answers 503 in time
// rather than a timeout.
const deadline = time.Second

func main() {
	ctx := context.Background()
	cfg, err := config.FromEnv()
	if err != nil {
		boot.Fatal(err)
	}
	log := boot.Logger(cfg)
	// This region's replica only (not boot.OpenStore's regional store, which reaches peers).
	client, err := dynamo.NewClient(ctx, cfg.DynamoEndpoint, awslog.Option(log))
	if err != nil {
		boot.Fatal(err)
	}
	health := &httpapi.Health{Store: dynamo.New(client, cfg.Table), Clock: oauth.SystemClock{}, Timeout: deadline, Log: log}
	mux := http.NewServeMux()
	health.Register(mux)
	boot.ServeHTTP(mux)
}
