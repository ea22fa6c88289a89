package authorizer

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/requestid"
)

// HandleEvent is the Lambda authorizer of the HTTP API (payload format 2.0, simple
// responses). An accepted request gets isAuthorized with the identity as context; a refused
// one gets isAuthorized false, which API Gateway answers with its own 403 {"message":"Forbidden"}
// (a request with no Authorization header at all never reaches us: the identity source makes
// API Gateway answer 401 first). A simple response cannot shape that answer's status, body or
// WWW-Authenticate header; the reason is logged here instead. When the store fails the
// invocation fails, so API Gateway answers 500 and the client may retry, rather than a 403
// that would tell a valid client its token is bad.
func (a *Authorizer) HandleEvent(ctx context.Context, ev events.APIGatewayV2CustomAuthorizerV2Request) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
	req := Request{
		RouteKey:       ev.RouteKey,
		Authorization:  header(ev.Headers, ev.IdentitySource),
		CertThumbprint: CertThumbprintPEM(ev.RequestContext.Authentication.ClientCert.ClientCertPem),
		DPoPProofs:     dpopHeaders(ev.Headers),
		Method:         ev.RequestContext.HTTP.Method,
		Path:           ev.RawPath,
		PathParameters: ev.PathParameters,
	}
	if d := ev.RequestContext.DomainName; d != "" {
		req.URL = "https://" + d + ev.RawPath
	}
	ctx = requestid.With(ctx, ev.RequestContext.RequestID) // every line logged below carries it
	id, err := a.Authorize(ctx, req)
	if err != nil {
		e := oauth.AsError(err)
		if e.Status >= 500 {
			a.Log.ErrorContext(ctx, "authorizer failed", slog.String("route", req.RouteKey), slog.String("error", e.Code),
				slog.String("reason", e.Description),
				slog.Bool("client_cert", req.CertThumbprint != ""), slog.Any("cause", e.Cause))
			return events.APIGatewayV2CustomAuthorizerSimpleResponse{}, fmt.Errorf("authorize %s: %w", req.RouteKey, err)
		}
		a.Log.InfoContext(ctx, "denied", slog.String("route", req.RouteKey), slog.String("error", e.Code),
			slog.String("reason", e.Description), slog.Bool("client_cert", req.CertThumbprint != ""))
		return events.APIGatewayV2CustomAuthorizerSimpleResponse{IsAuthorized: false}, nil
	}
	a.Log.DebugContext(ctx, "allowed", slog.String("route", req.RouteKey), slog.String("client_id", id.ClientID),
		slog.String("uid", id.UID))
	return events.APIGatewayV2CustomAuthorizerSimpleResponse{IsAuthorized: true, Context: id.Context()}, nil
}

// dpopHeaders returns the DPoP headers of the event. Payload 2.0 joins repeated headers with
// commas, which a compact JWS never contains: a comma is more than one proof.
func dpopHeaders(headers map[string]string) []string {
	for k, v := range headers {
		if strings.EqualFold(k, "dpop") {
			return strings.Split(v, ",")
		}
	}
	return nil
}

// header returns the Authorization header of the event. Payload 2.0 lower-cases header names
// (and joins repeated headers with commas, which BearerToken then refuses); the identity
// source carries the same value and is the fallback.
func header(headers map[string]string, identitySource []string) string {
	if v, ok := headers["authorization"]; ok {
		return v
	}
	for k, v := range headers {
		if strings.EqualFold(k, "authorization") {
			return v
		}
	}
	if len(identitySource) == 1 {
		return identitySource[0]
	}
	return ""
}
