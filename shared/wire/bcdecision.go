package wire

import (
	"context"
	"errors"
	"net/http"

	"github.com/acmebank/authserver/shared/ciba"
	"github.com/acmebank/authserver/shared/ciba/appbackend"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/outbound"
)

// BCDecision is the callback the bank's app backend posts a customer's decision to (the
// bcdecision function; the local server mounts it when AUTH_CIBA_APP_ISSUER and
// AUTH_CIBA_APP_JWKS are set): the decision token verified by package appbackend, the
// decision recorded by ciba.Service.Decide, a ping client pinged through ciba.HTTPPinger.
// Without an app backend configured it answers 404, as registration does when it is off.
func BCDecision(d Deps) (http.Handler, error) {
	if !d.Config.CIBAAppBackend() {
		return http.NotFoundHandler(), nil
	}
	// This process only decides: it reaches no device, and pings a ping client.
	d.CIBADevice = decideOnly{}
	d.CIBAPinger = ciba.NewHTTPPinger(outbound.Options{AllowPrivate: d.Config.JWKSURIAllowPrivate})
	tokens, err := d.TokenDomain()
	if err != nil {
		return nil, err
	}
	d.Tokens = tokens
	svc, err := CIBA(d)
	if err != nil {
		return nil, err
	}
	cb, err := appbackend.New(appbackend.Deps{Issuer: d.Config.CIBAAppIssuer, Audience: d.Config.Issuer,
		JWKS: []byte(d.Config.CIBAAppJWKS), Requests: svc, Clock: tokens.Clock, Log: d.Log})
	if err != nil {
		return nil, err
	}
	return &httpapi.BCDecisionHandler{Callback: cb, Log: d.Log}, nil
}

// decideOnly is the Device of a process that only decides (the decision callback): it never
// starts a request, so it never reaches a device; a call is a wiring mistake, and says so.
type decideOnly struct{}

func (decideOnly) Reach(context.Context, ciba.DeviceRequest) error {
	return errors.New("wire: the decision callback reaches no device")
}
