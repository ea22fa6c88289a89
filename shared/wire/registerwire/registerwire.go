// Package registerwire builds the dynamic client registration endpoint (the register
// function, and the local server's): wire's constructor for it, in a package of its own because
// registration validates with the operator's rules (shared/admin), which link the user's
// authentication; package wire, which every function links, then links none of it.
package registerwire

import (
	"net/http"

	"github.com/acmebank/authserver/shared/admin"
	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/boot"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/registration"
	"github.com/acmebank/authserver/shared/wire"
)

// Register is the registration endpoint at httpapi.PathRegister and its management under it:
// registration.Registrar over d's store, checking metadata with admin's rules (the deployment's
// id_token algorithms, its jwks_uri fetcher), trusting the directories of
// AUTH_REGISTRATION_DIRECTORIES. With AUTH_REGISTRATION off it answers 404 to everything.
func Register(d wire.Deps) (http.Handler, error) {
	if !d.Config.Registration {
		return http.NotFoundHandler(), nil
	}
	var clock oauth.Clock = oauth.SystemClock{}
	if d.Tokens != nil {
		clock = d.Tokens.Clock
	}
	fetcher := boot.JWKSFetcher(d.Config)
	adm := admin.New(d.Store, authn.PasswordHasher{}, clock, d.Audit)
	adm.Actor = "dynamic-registration"
	adm.IDTokenAlgs = d.Config.IDTokenAlgs
	adm.JWKS = fetcher
	reg, err := registration.New(registration.Deps{Admin: adm, Store: d.Store, Clock: clock, Audit: d.Audit,
		Endpoint: d.Config.BaseURL + httpapi.PathRegister, Directories: d.Config.RegistrationDirectories,
		DirectoryJWKS: oauth.NewJWKSCache(fetcher, 0)})
	if err != nil {
		return nil, err
	}
	return httpapi.WithClientAddress(&httpapi.RegisterHandler{Registrar: reg, Log: d.Log}), nil
}
