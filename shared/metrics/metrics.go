// Package metrics turns what a Lambda function already records into CloudWatch metrics in the
// embedded metric format (EMF): one JSON log line per event whose "_aws" member tells
// CloudWatch Logs which of the line's members are metric values and which are dimensions
// (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html).
//
// Nothing in the domain calls it. The metrics are derived in the adapter layer, in two places
// only: the audit records the token domain and the user's authentication write (exchanges and
// sign-ins, Recorder.Audit) and the RFC error code of the answers the HTTP handlers send
// (refusals, Recorder.Refusals). Every dimension value comes from a fixed list of this package
// (the grant types, the RFC error codes, the factors), never from the request: no token, user
// or client value can become a metric or a dimension, and the number of metrics is bounded.
package metrics

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/acmebank/authserver/shared/requestid"
)

// Namespace is the CloudWatch namespace of every metric the functions emit.
const Namespace = "AuthServer"

// The metrics, each a count of 1 per event.
const (
	// Exchanges counts the token endpoint's answered exchanges, by GrantType.
	Exchanges = "Exchanges"
	// Refusals counts error answers, by Reason (the RFC error code sent to the client).
	Refusals = "Refusals"
	// SignIns counts sign-in attempts of one factor, by Factor and Result.
	SignIns = "SignIns"
)

// The dimensions. Function and Environment are on every metric.
const (
	DimFunction    = "Function"
	DimEnvironment = "Environment"
	DimGrantType   = "GrantType"
	DimReason      = "Reason"
	DimFactor      = "Factor"
	DimResult      = "Result"
)

// Results of a sign-in attempt.
const (
	ResultSuccess = "success"
	ResultFailure = "failure"
)

// Recorder writes the EMF lines of one function. A nil Recorder records nothing (the local
// server has none: its metrics go nowhere).
type Recorder struct {
	log         *slog.Logger
	function    string
	environment string
	now         func() time.Time
}

// New returns the Recorder of function (the endpoint's name: token, authorize, ...) in
// environment (the stack's Environment), writing one JSON line per metric to w. Lines go
// through a slog JSON handler of their own, at info whatever the service log's level, with the
// request id of the request being served (request_id, a property, not a dimension).
func New(w io.Writer, function, environment string) *Recorder {
	h := requestid.Handler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return &Recorder{log: slog.New(h), function: function, environment: environment, now: time.Now}
}

// directive is one MetricDirective of the specification: the namespace, the dimension sets
// (each a list of top-level member names) and the metrics (top-level members holding the values).
type directive struct {
	Namespace  string     `json:"Namespace"`
	Dimensions [][]string `json:"Dimensions"`
	Metrics    []metric   `json:"Metrics"`
}

type metric struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

// metadata is the "_aws" member: the timestamp in milliseconds and the directives.
type metadata struct {
	Timestamp         int64       `json:"Timestamp"`
	CloudWatchMetrics []directive `json:"CloudWatchMetrics"`
}

// count writes one EMF line: name = 1 with the function's dimensions and dims (pairs of a
// dimension name and its value).
func (r *Recorder) count(ctx context.Context, name string, dims ...string) {
	if r == nil {
		return
	}
	names := []string{DimFunction, DimEnvironment}
	attrs := []slog.Attr{slog.String(DimFunction, r.function), slog.String(DimEnvironment, r.environment)}
	for i := 0; i+1 < len(dims); i += 2 {
		names = append(names, dims[i])
		attrs = append(attrs, slog.String(dims[i], dims[i+1]))
	}
	attrs = append(attrs, slog.Int(name, 1), slog.Any("_aws", metadata{
		Timestamp: r.now().UnixMilli(),
		CloudWatchMetrics: []directive{{
			Namespace: Namespace, Dimensions: [][]string{names}, Metrics: []metric{{Name: name, Unit: "Count"}},
		}},
	}))
	r.log.LogAttrs(ctx, slog.LevelInfo, "metric", attrs...)
}

// Exchange records an answered exchange of grantType (one of GrantTypes).
func (r *Recorder) Exchange(ctx context.Context, grantType string) {
	r.count(ctx, Exchanges, DimGrantType, grantType)
}

// Refusal records an error answer whose RFC error code is code; a code not in Reasons is
// recorded as "other".
func (r *Recorder) Refusal(ctx context.Context, code string) {
	r.count(ctx, Refusals, DimReason, Reason(code))
}

// SignIn records a sign-in attempt of factor (one of Factors).
func (r *Recorder) SignIn(ctx context.Context, factor string, ok bool) {
	result := ResultFailure
	if ok {
		result = ResultSuccess
	}
	r.count(ctx, SignIns, DimFactor, factor, DimResult, result)
}
