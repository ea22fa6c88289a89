package registration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/acmebank/authserver/shared/admin"
	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/jwksuri"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// TestNew_NamesEveryMissingDependency: a Registrar built from nothing says every dependency it
// lacks, in one error.
func TestNew_NamesEveryMissingDependency(t *testing.T) {
	_, err := New(Deps{})
	if err == nil {
		t.Fatal("New(Deps{}) succeeded")
	}
	for _, dep := range []string{"Admin", "Store", "Clock", "Audit", "Endpoint"} {
		if !strings.Contains(err.Error(), "missing "+dep) {
			t.Errorf("error %q does not name %s", err, dep)
		}
	}
}

// newRegistrar is a Registrar over a fresh embedded store, trusting dirs, fetching their
// jwks_uri with f.
func newRegistrar(t *testing.T, dirs []config.Directory, f oauth.JWKSFetcher) (*Registrar, *embedded.Store) {
	t.Helper()
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	adm := admin.New(st, authn.PasswordHasher{}, oauth.SystemClock{}, nil)
	g, err := New(Deps{Admin: adm, Store: st, Clock: oauth.SystemClock{}, Audit: slog.New(slog.DiscardHandler),
		Endpoint: "https://as.example/register", Directories: dirs, DirectoryJWKS: oauth.NewJWKSCache(f, 0)})
	if err != nil {
		t.Fatal(err)
	}
	return g, st
}

// TestRegister_DirectoryKeysAtAJWKSURIComeThroughTheFetchersRules: a directory that publishes
// its keys at a jwks_uri is read with shared/jwksuri's fetcher: on a loopback address it is
// refused unless the fetcher allows private addresses (tests only), and then a statement
// signed with a key of the fetched set registers a client while one signed with another key
// is invalid_software_statement.
func TestRegister_DirectoryKeysAtAJWKSURIComeThroughTheFetchersRules(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	set, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "dir-1", Algorithm: "ES256", Use: "sig"}}})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(set)
	}))
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	dirs := []config.Directory{{Issuer: directoryIssuer, JWKSURI: srv.URL + "/jwks"}}
	now := time.Now()
	body := func(signer any) []byte {
		b, _ := json.Marshal(map[string]any{"software_statement": sign(t, signer, "dir-1", jose.ES256, validClaims(now)), "scope": "openid"})
		return b
	}

	g, st := newRegistrar(t, dirs, jwksuri.New(jwksuri.Options{RootCAs: roots}))
	if _, err := g.Register(context.Background(), "", body(key)); oauth.AsError(err).Code != oauth.ErrCodeInvalidSoftwareStatement {
		t.Fatalf("a directory on loopback with private addresses refused: %v, want invalid_software_statement", err)
	}
	if list, _ := st.ListClients(context.Background()); len(list) != 0 {
		t.Fatalf("%d clients stored after a refusal", len(list))
	}

	g, st = newRegistrar(t, dirs, jwksuri.New(jwksuri.Options{RootCAs: roots, AllowPrivate: true}))
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if _, err := g.Register(context.Background(), "", body(other)); oauth.AsError(err).Code != oauth.ErrCodeInvalidSoftwareStatement {
		t.Fatalf("a statement signed with a key outside the fetched set: %v, want invalid_software_statement", err)
	}
	out, err := g.Register(context.Background(), "", body(key))
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.GetClient(context.Background(), out["client_id"].(string))
	if err != nil || c.Directory != directoryIssuer || c.Name != "Directory App" || c.SoftwareID != "sw-1" {
		t.Fatalf("stored %+v %v, want the directory's client", c, err)
	}
}
