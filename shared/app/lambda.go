package app

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
)

// FromEnv builds the app of a Lambda function from its environment, or exits with the reason
// (the Lambda runtime reports it as an init error).
func FromEnv() *App {
	TuneGC()
	cfg, err := config.FromEnv()
	if err != nil {
		Fatal(err)
	}
	a, err := New(context.Background(), cfg, NewLogger(cfg))
	if err != nil {
		Fatal(err)
	}
	return a
}

// ServeLambda hands an http.Handler to API Gateway (HTTP API, payload 2.0) through the
// aws-lambda-go-api-proxy adapter. API Gateway serves https only, so every response carries
// Strict-Transport-Security.
func ServeLambda(h http.Handler) {
	lambda.Start(httpadapter.NewV2(httpapi.HSTS(h)).ProxyWithContext)
}

// Fatal reports a startup failure and exits; the Lambda runtime records it as an init error.
func Fatal(err error) {
	fmt.Fprintln(os.Stderr, "startup:", err)
	os.Exit(1)
}
