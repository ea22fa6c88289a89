package tokenendpoint

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/localkey"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// fixture is a token endpoint over a real embedded store and a local signing key, with a
// fixed clock.
type fixture struct {
	ep    *Endpoint
	store *embedded.Store
	now   time.Time
}

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	backend, err := localkey.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keys.NewRotator(st, backend, keys.Policy{}, nil, nil).Rotate(t.Context()); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	svc, err := oauth.New(oauth.Deps{Clients: st, Interactions: st, Grants: st, Replay: st, Clock: fixedClock{now}, Log: slog.New(slog.DiscardHandler),
		Issuer: "https://auth.example.test", Signer: keys.NewSigner(st, backend, nil, 0),
		Lifetimes: oauth.Lifetimes{AccessToken: 10 * time.Minute, RefreshToken: time.Hour, Grant: 24 * time.Hour,
			Code: time.Minute, IDToken: 10 * time.Minute, Session: time.Hour, Request: 10 * time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := New(Deps{Tokens: svc})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{ep: ep, store: st, now: now}
}

// client registers a client with a secret ("secret-<id>") and the changes of edit.
func (f *fixture) client(t *testing.T, id string, edit func(*oauth.Client)) oauth.ClientCredentials {
	t.Helper()
	c := oauth.Client{ID: id, Name: id, RedirectURIs: []string{"https://app.example/cb"}, Scopes: []string{"openid", "bank:transfers:write"},
		SecretHashes: []oauth.SecretHash{{Hash: oauth.HashSecret("secret-" + id)}}, CreatedAt: f.now, UpdatedAt: f.now}
	if edit != nil {
		edit(&c)
	}
	if err := f.store.CreateClient(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return oauth.ClientCredentials{ID: id, Secret: "secret-" + id}
}

// token sends a token request with params.
func (f *fixture) token(cred oauth.ClientCredentials, params url.Values) (*oauth.TokenResponse, error) {
	return f.ep.Token(context.Background(), Request{Params: params, Credentials: cred,
		Proof: oauth.ProofHeaders{Method: "POST", Path: "/token"}})
}

// grants lists the live grants of client id.
func (f *fixture) grants(t *testing.T, id string) []oauth.GrantRecord {
	t.Helper()
	list, err := f.store.ListGrants(context.Background(), oauth.GrantFilter{ClientID: id}, f.now)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// wantCode fails unless err is the OAuth error code.
func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var oe *oauth.Error
	if !errors.As(err, &oe) || oe.Code != code {
		t.Fatalf("error %v, want %s", err, code)
	}
}
