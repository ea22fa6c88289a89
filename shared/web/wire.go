package web

import (
	"net/http"

	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/pages"
	"github.com/acmebank/authserver/shared/wire"
)

// Authorize is the authorization endpoint, its pages and their assets (the authorize
// function), built like every other endpoint from wire.Deps. It lives here, not in shared/wire,
// so that wire links no pages.
func Authorize(d wire.Deps) (http.Handler, error) {
	svc, err := d.TokenDomain()
	if err != nil {
		return nil, err
	}
	pg, err := pages.New(httpapi.PathAssets)
	if err != nil {
		return nil, err
	}
	ah, err := NewAuthorizeHandler(svc, pg, d.Log, d.Config.Secure())
	if err != nil {
		return nil, err
	}
	m := http.NewServeMux()
	m.Handle(httpapi.PathAuthorize, ah)
	m.Handle(httpapi.PathAssets, &AssetsHandler{Pages: pg})
	return httpapi.WithClientAddress(m), nil
}
