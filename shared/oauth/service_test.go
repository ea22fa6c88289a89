package oauth_test

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// TestNew_NamesEveryMissingRequiredDependency: an empty Deps is refused with one error naming
// every required dependency, and each one left out alone is named; the optional ones (Signer,
// Audit, RequirePAR, DPoPNonces, Origins, Home, Lifetimes.Session) may be left out.
func TestNew_NamesEveryMissingRequiredDependency(t *testing.T) {
	st, err := embedded.OpenWith(t.TempDir(), embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	full := oauth.Deps{Clients: st, Interactions: st, Grants: st, Replay: st, Clock: oauth.SystemClock{},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Issuer: "https://auth.example/v2/authentication/oauth2",
		Lifetimes: oauth.Lifetimes{AccessToken: time.Hour, RefreshToken: time.Hour, Grant: time.Hour, Code: time.Minute,
			IDToken: time.Hour, Request: time.Minute}}
	if s, err := oauth.New(full); err != nil || s == nil || s.Issuer != full.Issuer || s.Replay == nil {
		t.Fatalf("oauth.New(the required deps only) = %v, %v", s, err)
	}
	required := map[string]func(*oauth.Deps){
		"Clients":                func(d *oauth.Deps) { d.Clients = nil },
		"Interactions":           func(d *oauth.Deps) { d.Interactions = nil },
		"Grants":                 func(d *oauth.Deps) { d.Grants = nil },
		"Replay":                 func(d *oauth.Deps) { d.Replay = nil },
		"Clock":                  func(d *oauth.Deps) { d.Clock = nil },
		"Log":                    func(d *oauth.Deps) { d.Log = nil },
		"Issuer":                 func(d *oauth.Deps) { d.Issuer = "" },
		"Lifetimes.AccessToken":  func(d *oauth.Deps) { d.Lifetimes.AccessToken = 0 },
		"Lifetimes.RefreshToken": func(d *oauth.Deps) { d.Lifetimes.RefreshToken = 0 },
		"Lifetimes.Grant":        func(d *oauth.Deps) { d.Lifetimes.Grant = 0 },
		"Lifetimes.Code":         func(d *oauth.Deps) { d.Lifetimes.Code = -time.Second },
		"Lifetimes.IDToken":      func(d *oauth.Deps) { d.Lifetimes.IDToken = 0 },
		"Lifetimes.Request":      func(d *oauth.Deps) { d.Lifetimes.Request = 0 },
	}
	_, err = oauth.New(oauth.Deps{})
	for name, drop := range required {
		if err == nil || !strings.Contains(err.Error(), "missing "+name) {
			t.Errorf("oauth.New(oauth.Deps{}) = %v, want it to name %s", err, name)
		}
		d := full
		drop(&d)
		if s, err := oauth.New(d); s != nil || err == nil || !strings.Contains(err.Error(), "missing "+name) {
			t.Errorf("without %s: New = %v, %v; want an error naming it", name, s, err)
		}
	}
}
