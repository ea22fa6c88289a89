package web

import (
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/internal/fuzzstore"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/pages"
)

const (
	fuzzClientID = fuzzstore.ClientID
	fuzzRedirect = fuzzstore.Redirect
	fuzzUser     = fuzzstore.Username
	fuzzPassword = "fuzz-password"
)

var fuzzHasher = authn.PasswordHasher{Time: 1, MemoryKiB: 8, Threads: 1}

// fuzzService is a Service over a fresh fuzz store (shared/internal/fuzzstore) whose user
// signs in with fuzzPassword.
func fuzzService(tb testing.TB) (*oauth.Service, *fuzzstore.Store) {
	tb.Helper()
	st := fuzzstore.New(fuzzHasher.Hash(fuzzPassword))
	return fuzzstore.Service(st), st
}

// fuzzUsers is the user's authentication of svc's fuzzService, over the same store.
func fuzzUsers(tb testing.TB, svc *oauth.Service, st *fuzzstore.Store) *authn.Service {
	tb.Helper()
	users, err := authn.New(authn.Deps{
		Users: st, Interactions: st, Factors: st, Clock: svc.Clock,
		Passwords:       fuzzHasher,
		SessionLifetime: svc.Lifetimes.Session,
		LoginPolicy:     authn.LoginPolicy{MaxFailures: 5, Window: time.Minute},
		Log:             svc.Log,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return users
}

func fuzzPages(tb testing.TB) *pages.Pages {
	tb.Helper()
	pg, err := pages.New(httpapi.PathAssets)
	if err != nil {
		tb.Fatal(err)
	}
	return pg
}
