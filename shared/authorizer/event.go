package authorizer

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/acmebank/authserver/shared/oauth"
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
	id, allowed, err := a.decide(ctx, eventFields{routeKey: ev.RouteKey, authorization: header(ev.Headers, ev.IdentitySource),
		certPEM: ev.RequestContext.Authentication.ClientCert.ClientCertPem, requestID: ev.RequestContext.RequestID})
	if err != nil {
		return events.APIGatewayV2CustomAuthorizerSimpleResponse{}, err
	}
	if !allowed {
		return events.APIGatewayV2CustomAuthorizerSimpleResponse{IsAuthorized: false}, nil
	}
	return events.APIGatewayV2CustomAuthorizerSimpleResponse{IsAuthorized: true, Context: id.Context()}, nil
}

// Invoke is HandleEvent as an aws-lambda-go lambda.Handler, for lambda.Start(az): the same
// decision, but the runtime hands over the event's bytes and takes the response's. The event
// is decoded into lambdaEvent, the few fields the decision reads, rather than the whole
// aws-lambda-go event type by reflection (BenchmarkAuthorizerInvocation: the decoding of the
// full type is most of an invocation), and the response is the same JSON as HandleEvent's
// (TestInvoke_SameAnswersAsHandleEvent).
func (a *Authorizer) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	var ev lambdaEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, fmt.Errorf("authorizer event: %w", err)
	}
	id, allowed, err := a.decide(ctx, eventFields{routeKey: ev.RouteKey, authorization: header(ev.Headers, ev.IdentitySource),
		certPEM: ev.RequestContext.Authentication.ClientCert.ClientCertPem, requestID: ev.RequestContext.RequestID})
	if err != nil {
		return nil, err
	}
	if !allowed {
		return []byte(`{"isAuthorized":false}`), nil
	}
	return json.Marshal(allowedResponse{IsAuthorized: true, Context: responseContext{ClientID: id.ClientID,
		CompanyProfileID: id.CompanyProfileID, CompanyUserID: id.CompanyUserID, Scope: id.Scopes.String(), UID: id.UID}})
}

// lambdaEvent is the part of the authorizer's event (payload format 2.0) that the decision
// reads, with the names and types of events.APIGatewayV2CustomAuthorizerV2Request.
type lambdaEvent struct {
	RouteKey       string            `json:"routeKey"`
	Headers        map[string]string `json:"headers"`
	IdentitySource []string          `json:"identitySource"`
	RequestContext struct {
		RequestID      string `json:"requestId"`
		Authentication struct {
			ClientCert struct {
				ClientCertPem string `json:"clientCertPem"`
			} `json:"clientCert"`
		} `json:"authentication"`
	} `json:"requestContext"`
}

// allowedResponse is an allowing events.APIGatewayV2CustomAuthorizerSimpleResponse with its
// context as a struct: no map of boxed values, and the keys declared in the order
// encoding/json sorts a map's, so the JSON is the same bytes.
type allowedResponse struct {
	IsAuthorized bool            `json:"isAuthorized"`
	Context      responseContext `json:"context"`
}

// responseContext is Identity.Context() as a struct.
type responseContext struct {
	ClientID         string `json:"client_id"`
	CompanyProfileID string `json:"companyProfileId"`
	CompanyUserID    string `json:"companyUserId"`
	Scope            string `json:"scope"`
	UID              string `json:"uid"`
}

// eventFields are what a decision reads of an event, however it was decoded.
type eventFields struct {
	routeKey, authorization, certPEM, requestID string
}

// decide is the decision of HandleEvent and Invoke: the identity and true when allowed, false
// when denied, and an error when the invocation must fail. The reason of a denial or failure
// is logged.
func (a *Authorizer) decide(ctx context.Context, ev eventFields) (Identity, bool, error) {
	req := Request{
		RouteKey:       ev.routeKey,
		Authorization:  ev.authorization,
		CertThumbprint: CertThumbprintPEM(ev.certPEM),
	}
	id, err := a.Authorize(ctx, req)
	if err != nil {
		e := oauth.AsError(err)
		level, msg := slog.LevelInfo, "denied"
		if e.Status >= 500 {
			level, msg = slog.LevelError, "authorizer failed"
		}
		// The attributes are built only when the level is logged: denials are what a flood of
		// bad tokens costs.
		if a.Log.Enabled(ctx, level) {
			attrs := []slog.Attr{slog.String("route", ev.routeKey), slog.String("error", e.Code),
				slog.String("reason", e.Description), slog.String("request_id", ev.requestID),
				slog.Bool("client_cert", req.CertThumbprint != "")}
			if e.Status >= 500 {
				attrs = append(attrs, slog.Any("cause", e.Cause))
			}
			a.Log.LogAttrs(ctx, level, msg, attrs...)
		}
		if e.Status >= 500 {
			return Identity{}, false, fmt.Errorf("authorize %s: %w", ev.routeKey, err)
		}
		return Identity{}, false, nil
	}
	if a.Log.Enabled(ctx, slog.LevelDebug) {
		a.Log.LogAttrs(ctx, slog.LevelDebug, "allowed", slog.String("route", ev.routeKey), slog.String("client_id", id.ClientID),
			slog.String("uid", id.UID), slog.String("request_id", ev.requestID))
	}
	return id, true, nil
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
