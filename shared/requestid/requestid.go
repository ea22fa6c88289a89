// Package requestid carries the API Gateway request id of the request being served in its
// context, and adds it as request_id to every log and audit line written with that context, so
// a line in the function's log, a line of the audit log and the API's access log line
// ($context.requestId) of one request can be joined.
package requestid

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/awslabs/aws-lambda-go-api-proxy/core"
)

// Attr is the name of the attribute every line carries.
const Attr = "request_id"

type key struct{}

// With returns ctx carrying id.
func With(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, key{}, id)
}

// From returns the request id ctx carries, "" when none.
func From(ctx context.Context) string {
	id, _ := ctx.Value(key{}).(string)
	return id
}

// FromAPIGateway is the HTTP middleware of the Lambda functions: it reads the request id of the
// HTTP API event the request came from (placed in the request's context by the Lambda
// adapter) into the context the handlers log with.
func FromAPIGateway(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ev, ok := core.GetAPIGatewayV2ContextFromContext(r.Context()); ok && ev.RequestID != "" {
			r = r.WithContext(With(r.Context(), ev.RequestID))
		}
		next.ServeHTTP(w, r)
	})
}

// Handler wraps a slog.Handler: a record written with a context that carries a request id gets
// it as request_id.
func Handler(h slog.Handler) slog.Handler { return handler{h} }

type handler struct{ slog.Handler }

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	if id := From(ctx); id != "" {
		r = r.Clone()
		r.AddAttrs(slog.String(Attr, id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return handler{h.Handler.WithAttrs(attrs)}
}

func (h handler) WithGroup(name string) slog.Handler { return handler{h.Handler.WithGroup(name)} }
