package requestid_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/acmebank/authserver/shared/requestid"
)

// TestFromAPIGateway_EveryLineOfARequestCarriesItsRequestID: through the Lambda adapter the
// functions use, a line logged with the request's context carries the HTTP API event's request
// id, also on a logger derived with With; a line logged without that context carries none.
func TestFromAPIGateway_EveryLineOfARequestCarriesItsRequestID(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(requestid.Handler(slog.NewJSONHandler(&buf, nil))).With(slog.String("log", "audit"))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.InfoContext(r.Context(), "in the request", slog.String("event", "grant_issued"))
		log.Info("no context")
		w.WriteHeader(http.StatusNoContent)
	})
	ev := events.APIGatewayV2HTTPRequest{Version: "2.0", RawPath: "/x", RouteKey: "GET /x",
		RequestContext: events.APIGatewayV2HTTPRequestContext{RequestID: "Ab1cD2eFgHiJ=",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Path: "/x"}}}
	resp, err := httpadapter.NewV2(requestid.FromAPIGateway(h)).ProxyWithContext(context.Background(), ev)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("proxy: %v %d", err, resp.StatusCode)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines %q", lines)
	}
	var in, out map[string]any
	json.Unmarshal([]byte(lines[0]), &in)
	json.Unmarshal([]byte(lines[1]), &out)
	if in[requestid.Attr] != "Ab1cD2eFgHiJ=" || in["log"] != "audit" || in["event"] != "grant_issued" {
		t.Errorf("the request's line: %s", lines[0])
	}
	if _, ok := out[requestid.Attr]; ok {
		t.Errorf("a line logged without the request's context names a request: %s", lines[1])
	}
}

// TestWith_EmptyIDAddsNothing: no id, no attribute (the local server has no API Gateway).
func TestWith_EmptyIDAddsNothing(t *testing.T) {
	var buf bytes.Buffer
	slog.New(requestid.Handler(slog.NewJSONHandler(&buf, nil))).InfoContext(requestid.With(context.Background(), ""), "x")
	if strings.Contains(buf.String(), requestid.Attr) {
		t.Fatalf("line %s", buf.String())
	}
}
