package httpapi

import (
	"testing"

	"github.com/acmebank/authserver/shared/internal/fuzzstore"
	"github.com/acmebank/authserver/shared/introspection"
	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/localkey"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/resource"
	"github.com/acmebank/authserver/shared/revocation"
	"github.com/acmebank/authserver/shared/tokenendpoint"
)

const (
	fuzzClientID = fuzzstore.ClientID
	fuzzSecret   = fuzzstore.Secret
	fuzzRedirect = fuzzstore.Redirect
)

// fuzzService is a Service over a fresh fuzz store (shared/internal/fuzzstore).
func fuzzService(tb testing.TB) (*oauth.Service, *fuzzstore.Store) {
	tb.Helper()
	st := fuzzstore.New("")
	return fuzzstore.Service(st), st
}

// fuzzUseCases are the token, revocation, introspection and UserInfo use cases over a
// fuzzService; the token endpoint's signer (a local key) is never reached, since the memStore
// holds no grant.
func fuzzUseCases(tb testing.TB, resourceServers map[string]bool) (*tokenendpoint.Endpoint, *revocation.Revoker, *introspection.Introspector, *resource.Checker, *oauth.Service) {
	tb.Helper()
	svc, st := fuzzService(tb)
	lk, err := localkey.New(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	svc.Signer = keys.NewSigner(st, lk, svc.Clock, 0)
	tok, err := tokenendpoint.New(tokenendpoint.Deps{Tokens: svc})
	if err != nil {
		tb.Fatal(err)
	}
	rev, err := revocation.New(revocation.Deps{Tokens: svc})
	if err != nil {
		tb.Fatal(err)
	}
	in, err := introspection.New(introspection.Deps{Tokens: svc, ResourceServers: resourceServers})
	if err != nil {
		tb.Fatal(err)
	}
	rc, err := resource.New(resource.Deps{Grants: st, Replay: st, Clock: svc.Clock})
	if err != nil {
		tb.Fatal(err)
	}
	return tok, rev, in, rc, svc
}
