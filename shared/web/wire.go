package web

import (
	"context"
	"net/http"

	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/logout"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/pages"
	"github.com/acmebank/authserver/shared/receipt"
	"github.com/acmebank/authserver/shared/wire"
)

// Authorize is the authorization endpoint, its pages and their assets, and the customer's
// Connected apps page with its consent receipt downloads (the authorize function), built like every other endpoint from wire.Deps, plus the user's authentication:
// users, or when nil one built from d's configuration over d's store (authn.FromConfig), as
// the Lambda function does. The local server passes its own, shared with its tools and tests.
// It lives here, not in shared/wire, so that wire links no pages and no go-webauthn.
func Authorize(d wire.Deps, users *authn.Service) (http.Handler, error) {
	return AuthorizeWith(d, users, nil)
}

// AuthorizeWith is Authorize with the sender of back-channel logout tokens; nil is the
// deployment's (logout.NewSender with the configuration's rule on private addresses). Tests
// pass one that trusts their receivers' certificates.
func AuthorizeWith(d wire.Deps, users *authn.Service, sender *logout.Sender) (http.Handler, error) {
	svc, err := d.TokenDomain()
	if err != nil {
		return nil, err
	}
	if users == nil {
		if users, err = authn.FromConfig(d.Config, d.Store, d.Log, d.Audit); err != nil {
			return nil, err
		}
	}
	pg, err := pages.New(httpapi.PathAssets)
	if err != nil {
		return nil, err
	}
	ah, err := NewAuthorizeHandler(svc, users, pg, d.Log, d.Config.Secure())
	if err != nil {
		return nil, err
	}
	// The consent receipts of the Connected apps page, signed as the grant API's are
	// (wire.Grants). Building the maker reads the pairwise salt, storing one on the
	// deployment's first use. Without a signer the page offers none.
	if d.Signer != nil && d.Store != nil {
		var clients oauth.ClientStore = d.Store
		if svc.Clients != nil {
			clients = svc.Clients // the local server's one client cache
		}
		if ah.Receipts, err = receipt.New(context.Background(), receipt.Deps{Signer: d.Signer, Clients: clients, Salts: d.Store,
			Issuer: d.Config.Issuer, Clock: svc.Clock}); err != nil {
			return nil, err
		}
	}
	// The end-session endpoint: logout tokens are signed with the id_token keys, so it needs
	// the signer; without one (a tool's mux) it answers that the service is unavailable.
	if d.Signer != nil && d.Store != nil {
		if sender == nil {
			sender = logout.NewSender(logout.SenderOptions{AllowPrivate: d.Config.JWKSURIAllowPrivate})
		}
		var clients oauth.ClientStore = d.Store
		if svc.Clients != nil {
			clients = svc.Clients
		}
		if ah.Logout, err = logout.New(logout.Deps{Clients: clients, Interactions: svc.Interactions, Grants: svc.Grants,
			Keys: d.Store, Signer: d.Signer, Sender: sender, Clock: svc.Clock, Issuer: svc.Issuer, Log: d.Log,
			Audit: svc.Audit}); err != nil {
			return nil, err
		}
	}
	m := http.NewServeMux()
	m.Handle(httpapi.PathAuthorize, ah)
	m.Handle(httpapi.PathLogout, ah.EndSession())
	m.Handle(httpapi.PathAssets, &AssetsHandler{Pages: pg})
	m.Handle(httpapi.PathApps, ah.Apps())
	m.Handle(httpapi.PathAppsReceipt, ah.AppsReceipt())
	return httpapi.WithClientAddress(m), nil
}
