// Package wire builds each endpoint's handler from the service's configuration and adapters:
// one constructor per endpoint, called alike by the endpoint's Lambda main (functions/*) and
// by the local server (shared/app), so the two cannot drift. The pages' endpoint is built by
// web.Authorize (shared/web), so that wire links no pages and no sign-in.
package wire

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/acmebank/authserver/shared/authorizer"
	"github.com/acmebank/authserver/shared/boot"
	"github.com/acmebank/authserver/shared/ciba"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/grantmgmt"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/introspection"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/oauth/rar"
	"github.com/acmebank/authserver/shared/pages/locales"
	"github.com/acmebank/authserver/shared/receipt"
	"github.com/acmebank/authserver/shared/resource"
	"github.com/acmebank/authserver/shared/revocation"
	"github.com/acmebank/authserver/shared/tokenendpoint"
)

// Deps are what the endpoints are built from.
type Deps struct {
	Config config.Config
	Store  oauth.Store
	// Signer signs id_tokens (the token endpoint), JARM responses (the authorization
	// endpoint), JWT introspection responses and consent receipts (the grants endpoint); nil
	// elsewhere.
	Signer oauth.IDTokenSigner
	// Nonces are the DPoP server nonces (the token and PAR endpoints, backend.OpenNonces); nil
	// when off.
	Nonces oauth.DPoPNonces
	Log    *slog.Logger
	// Audit receives the security events, whatever the level of Log.
	Audit *slog.Logger
	// Tokens is the token domain over Store; nil builds one per endpoint (boot.Service). The
	// local server builds it once and shares it, as one warm process: one client cache, one
	// password-check gate.
	Tokens *oauth.Service
	// CIBADevice reaches a customer's authentication device (the backchannel endpoint, and
	// wherever decisions are taken); CIBAPinger pings a ping client once its request is
	// decided (nil where nothing decides: ciba.Deps).
	CIBADevice ciba.Device
	CIBAPinger ciba.Pinger
}

// TokenDomain is d's token domain: d.Tokens, or one built over d's store and signer.
func (d Deps) TokenDomain() (*oauth.Service, error) {
	if d.Tokens != nil {
		return d.Tokens, nil
	}
	if err := d.check(); err != nil {
		return nil, err
	}
	return boot.Service(d.Config, d.Store, d.Signer, d.Nonces, d.Log, d.Audit)
}

// check names every missing adapter of d.
func (d Deps) check() error {
	var errs []error
	if d.Store == nil {
		errs = append(errs, errors.New("wire: missing Store"))
	}
	if d.Log == nil {
		errs = append(errs, errors.New("wire: missing Log"))
	}
	if d.Audit == nil {
		errs = append(errs, errors.New("wire: missing Audit"))
	}
	return errors.Join(errs...)
}

// Token is the token endpoint (the token function): the code and refresh grants.
func Token(d Deps) (http.Handler, error) {
	svc, err := d.TokenDomain()
	if err != nil {
		return nil, err
	}
	tok, err := tokenendpoint.New(tokenendpoint.Deps{Tokens: svc})
	if err != nil {
		return nil, err
	}
	return httpapi.WithClientAddress(&httpapi.TokenHandler{Token: tok, Log: d.Log}), nil
}

// PAR is the pushed authorization request endpoint (the par function).
func PAR(d Deps) (http.Handler, error) {
	svc, err := d.TokenDomain()
	if err != nil {
		return nil, err
	}
	return httpapi.WithClientAddress(&httpapi.PARHandler{Service: svc, Log: d.Log}), nil
}

// Revoke is revocation on both documented paths (the revoke function).
func Revoke(d Deps) (http.Handler, error) {
	svc, err := d.TokenDomain()
	if err != nil {
		return nil, err
	}
	rev, err := revocation.New(revocation.Deps{Tokens: svc})
	if err != nil {
		return nil, err
	}
	h := &httpapi.RevokeHandler{Revoker: rev, Log: d.Log}
	m := http.NewServeMux()
	m.Handle(httpapi.PathRevoke, h)
	m.Handle(httpapi.PathRevokeLegacy, h)
	return httpapi.WithClientAddress(m), nil
}

// Keys serves the JWKS, from the key registry in the store with no call to the key backend,
// and the OpenID discovery document (the jwks function).
func Keys(d Deps) (http.Handler, error) {
	if d.Store == nil || d.Log == nil {
		return nil, errors.New("wire: the keys endpoints need Store and Log")
	}
	cfg := d.Config
	m := http.NewServeMux()
	m.Handle(httpapi.PathJWKS, &httpapi.JWKSHandler{Keys: d.Store, Clock: oauth.SystemClock{}, MaxAge: cfg.JWKSMaxAge,
		RefreshEvery: cfg.KeyCacheTTL, Log: d.Log})
	details, err := rar.Shipped()
	if err != nil {
		return nil, err
	}
	m.Handle(httpapi.PathDiscovery, httpapi.NewDiscoveryHandler(httpapi.Provider{BaseURL: cfg.BaseURL, Issuer: cfg.Issuer,
		MTLSBaseURL: cfg.MTLSBaseURL, Locales: locales.Supported, RequirePAR: cfg.RequirePAR, IDTokenAlgs: cfg.IDTokenAlgs,
		AuthorizationDetailsTypes: details.Types(), Registration: cfg.Registration}))
	return m, nil
}

// Userinfo is the OIDC UserInfo endpoint (the userinfo function).
func Userinfo(d Deps) (http.Handler, error) {
	rc, err := resourceCheck(d, d.Config.Origins())
	if err != nil {
		return nil, err
	}
	return &httpapi.UserinfoHandler{Resource: rc, Log: d.Log}, nil
}

// Grants is the grant management endpoint (the grants function): the query and revocation of
// a client's grant at PathGrants/{grant_id}, with an access token checked as a resource checks
// it (the grants, the replay store, the clock, the origins and the audit log), and the query
// answer's consent receipt signed by d.Signer (the key backend). Building it reads the pairwise
// salt, storing one on the deployment's first use (receipt.New).
func Grants(d Deps) (http.Handler, error) {
	svc := d.Tokens
	if svc == nil {
		if err := d.check(); err != nil {
			return nil, err
		}
		svc = &oauth.Service{Grants: d.Store, Replay: d.Store, Clock: oauth.SystemClock{}, Origins: d.Config.Origins(),
			Log: d.Log, Audit: d.Audit}
	}
	if d.Signer == nil || d.Store == nil {
		return nil, errors.New("wire: the grants endpoint needs Store and Signer (consent receipts)")
	}
	var clients oauth.ClientStore = d.Store
	if svc.Clients != nil {
		clients = svc.Clients // the local server's one client cache
	}
	receipts, err := receipt.New(context.Background(), receipt.Deps{Signer: d.Signer, Clients: clients, Salts: d.Store,
		Issuer: d.Config.Issuer, Clock: svc.Clock})
	if err != nil {
		return nil, err
	}
	m, err := grantmgmt.New(grantmgmt.Deps{Tokens: svc, Receipts: receipts})
	if err != nil {
		return nil, err
	}
	return &httpapi.GrantsHandler{Grants: m, Log: d.Log}, nil
}

// Introspect is RFC 7662 introspection (the introspect function), with the resource servers
// that may introspect every access token.
func Introspect(d Deps) (http.Handler, error) {
	svc, err := d.TokenDomain()
	if err != nil {
		return nil, err
	}
	in, err := introspection.New(introspection.Deps{Tokens: svc, ResourceServers: d.Config.IntrospectionClients})
	if err != nil {
		return nil, err
	}
	return &httpapi.IntrospectHandler{Introspector: in, Log: d.Log}, nil
}

// Authorizer is the bearer-token authorizer of the bank API routes (the authorizer function,
// and the local server's bank API): one store read per call, and for a DPoP proof the write of
// its jti; the route table of AUTH_ROUTE_SCOPES laid over the default one.
func Authorizer(d Deps) (*authorizer.Authorizer, error) {
	rc, err := resourceCheck(d, nil)
	if err != nil {
		return nil, err
	}
	az := authorizer.New(rc, d.Config.RouteScopes, d.Log) // AUTH_ROUTE_SCOPES, parsed when the configuration loads
	az.Origins = d.Config.Origins()
	az.ClientRoutes = d.Config.ClientRoutes // AUTH_CLIENT_TOKEN_ROUTES
	return az, nil
}

// resourceCheck is the check of presented access tokens: the grants, the replay store and the
// clock only, of d.Tokens when the caller shares one (the local server), else of d.Store.
func resourceCheck(d Deps, origins []string) (*resource.Checker, error) {
	if d.Tokens != nil {
		return resource.New(resource.Deps{Grants: d.Tokens.Grants, Replay: d.Tokens.Replay, Clock: d.Tokens.Clock, Origins: origins})
	}
	if d.Store == nil || d.Log == nil {
		return nil, errors.New("wire: the resource endpoints need Store and Log")
	}
	return resource.New(resource.Deps{Grants: d.Store, Replay: d.Store, Clock: oauth.SystemClock{}, Origins: origins})
}

// CIBA is CIBA's use case over d (ciba.New): the backchannel endpoint starts requests with it,
// and the bank app page and the app backend's callback decide them.
func CIBA(d Deps) (*ciba.Service, error) {
	svc, err := d.TokenDomain()
	if err != nil {
		return nil, err
	}
	if d.Store == nil {
		return nil, errors.New("wire: CIBA needs Store")
	}
	// The token domain's stores when it has them (the local server's one domain, the tests'
	// recorders), else d's.
	var requests oauth.BackchannelStore = d.Store
	if svc.Backchannel != nil {
		requests = svc.Backchannel
	}
	var limits oauth.InteractionStore = d.Store
	if svc.Interactions != nil {
		limits = svc.Interactions
	}
	return ciba.New(ciba.Deps{Tokens: svc, Requests: requests, Users: d.Store, Limits: limits, Keys: d.Store,
		Device: d.CIBADevice, Pinger: d.CIBAPinger, Clock: svc.Clock, Log: d.Log})
}

// Backchannel is the backchannel authentication endpoint (the backchannel function, CIBA).
func Backchannel(d Deps) (http.Handler, error) {
	c, err := CIBA(d)
	if err != nil {
		return nil, err
	}
	return httpapi.WithClientAddress(&httpapi.BackchannelHandler{CIBA: c, Log: d.Log}), nil
}
