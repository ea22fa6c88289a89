package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"

	"github.com/acmebank/authserver/shared/admin"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/jwksuri"
	"github.com/acmebank/authserver/shared/oauth"
)

// keyHost is a client's https server publishing its JWK Set (httptest's TLS server, on
// loopback), counting the requests it answers; what it answers can change while it runs.
type keyHost struct {
	srv     *httptest.Server
	hits    atomic.Int64
	handler atomic.Pointer[http.HandlerFunc]
	roots   *x509.CertPool
}

func newKeyHost(t *testing.T) *keyHost {
	t.Helper()
	h := &keyHost{}
	h.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.hits.Add(1)
		(*h.handler.Load())(w, r)
	}))
	t.Cleanup(h.srv.Close)
	h.roots = x509.NewCertPool()
	h.roots.AddCert(h.srv.Certificate())
	return h
}

// uri is the jwks_uri of the host.
func (h *keyHost) uri() string { return h.srv.URL + "/jwks.json" }

// serve makes the host answer f.
func (h *keyHost) serve(f http.HandlerFunc) { h.handler.Store(&f) }

// publish makes the host serve the public halves of keys.
func (h *keyHost) publish(keys map[string]*ecdsa.PrivateKey) {
	var set jose.JSONWebKeySet
	for kid, k := range keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.Public(), KeyID: kid, Use: "sig", Algorithm: "ES256"})
	}
	body, _ := json.Marshal(set)
	h.serve(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.Write(body)
	})
}

// fetcher fetches from the host as the deployment would (the app's setting on private
// addresses), trusting the host's test certificate.
func (h *keyHost) fetcher(cfg config.Config) *jwksuri.Fetcher {
	return jwksuri.New(jwksuri.Options{AllowPrivate: cfg.JWKSURIAllowPrivate, RootCAs: h.roots})
}

// allowPrivate is the test setting that lets a jwks_uri be on loopback.
var allowPrivate = map[string]string{config.EnvJWKSURIAllowPrivate: "true"}

// padded is a valid set of the public halves of keys, padded past jwksuri.MaxBody with a
// member a JWK Set parser ignores: only the bound refuses it.
func padded(t *testing.T, keys map[string]*ecdsa.PrivateKey) []byte {
	t.Helper()
	set := map[string]any{"pad": strings.Repeat("x", jwksuri.MaxBody)}
	var list []jose.JSONWebKey
	for kid, k := range keys {
		list = append(list, jose.JSONWebKey{Key: k.Public(), KeyID: kid, Use: "sig", Algorithm: "ES256"})
	}
	set["keys"] = list
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// uriClient is a private_key_jwt client registered with a jwks_uri, and its private keys.
type uriClient struct {
	id   string
	keys map[string]*ecdsa.PrivateKey
}

func newP256(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// registerURIClient publishes a key k1 on host and registers a client with host's jwks_uri
// through the admin service, as authctl does (one fetch); the token domain fetches through
// host's fetcher from then on.
func (e *env) registerURIClient(t *testing.T, host *keyHost) uriClient {
	t.Helper()
	c := uriClient{keys: map[string]*ecdsa.PrivateKey{"k1": newP256(t)}}
	host.publish(c.keys)
	adm := admin.New(e.app.Store, cheapHasher, e.clock, e.app.Audit)
	adm.JWKS = host.fetcher(e.app.Config)
	cl, secret, err := adm.CreateClient(context.Background(), admin.ClientSpec{Name: "Keys By URI", RedirectURIs: []string{redirectURI},
		Scopes: []string{"openid", "email"}, RequirePKCE: true, TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT, JWKSURI: host.uri()})
	if err != nil {
		t.Fatal(err)
	}
	if secret != "" || cl.JWKSURI != host.uri() || len(cl.JWKS) != 0 {
		t.Fatalf("registered %+v with secret %q, want the jwks_uri and no secret", cl, secret)
	}
	e.app.Service.ClientJWKS = oauth.NewJWKSCache(host.fetcher(e.app.Config), 0)
	c.id = cl.ID
	return c
}

// assertion is a client assertion signed with the key of kid (a fresh key when the client
// has none of that id), with a new jti.
func (c uriClient) assertion(t *testing.T, e *env, kid string) url.Values {
	t.Helper()
	key := c.keys[kid]
	if key == nil {
		key = newP256(t)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := e.clock.Now()
	payload, _ := json.Marshal(map[string]any{"iss": c.id, "sub": c.id, "aud": e.app.Config.Issuer, "jti": oauth.NewID("j_"),
		"iat": now.Unix(), "exp": now.Add(time.Minute).Unix()})
	jws, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := jws.CompactSerialize()
	return url.Values{"client_assertion_type": {oauth.AssertionTypeJWTBearer}, "client_assertion": {out}}
}

// pushAuth sends a pushed authorization request authenticated by auth and returns the status and
// the error code and description, without failing the test (it runs in racing goroutines).
func (e *env) pushAuth(auth url.Values) (int, string, string, error) {
	p := pushedParams(oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier()))
	for k, v := range auth {
		p[k] = v
	}
	resp, err := http.PostForm(e.url(httpapi.PathPAR), p)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	var body struct{ Error, ErrorDescription string }
	raw, _ := io.ReadAll(resp.Body)
	if len(raw) > 0 {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return resp.StatusCode, "", "", fmt.Errorf("non-JSON answer %q", raw)
		}
		body.Error, _ = m["error"].(string)
		body.ErrorDescription, _ = m["error_description"].(string)
	}
	return resp.StatusCode, body.Error, body.ErrorDescription, nil
}

// TestJWKSURI_PrivateKeyJWTCodeFlowWithKeysFetchedFromTheClient: a client registered with a
// jwks_uri (RFC 7591 2) pushes its request and exchanges the code with client assertions the
// server verifies with the keys it fetched from the client's https server: one fetch at
// registration, one when the token domain first needs them, none for the requests after
// (the cache). On both stores.
func TestJWKSURI_PrivateKeyJWTCodeFlowWithKeysFetchedFromTheClient(t *testing.T) {
	bothStores(t, allowPrivate, func(t *testing.T, e *env) {
		host := newKeyHost(t)
		c := e.registerURIClient(t, host)
		if n := host.hits.Load(); n != 1 {
			t.Fatalf("registration fetched the jwks_uri %d times, want once", n)
		}
		verifier := oauth2.GenerateVerifier()
		push := pushedParams(oauth2.S256ChallengeFromVerifier(verifier))
		for k, v := range c.assertion(t, e, "k1") {
			push[k] = v
		}
		req, _ := http.NewRequest(http.MethodPost, e.url(httpapi.PathPAR), strings.NewReader(push.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		st, body, _ := do(t, req)
		uri, _ := body["request_uri"].(string)
		if st != http.StatusCreated || uri == "" {
			t.Fatalf("PAR with a key from the jwks_uri: %d %v", st, body)
		}
		loc := e.authorize(t, e.url(httpapi.PathAuthorize)+"?"+url.Values{"client_id": {c.id}, "request_uri": {uri}}.Encode())
		conf := &oauth2.Config{ClientID: c.id, RedirectURL: redirectURI, Scopes: []string{"openid", "email"},
			Endpoint: oauth2.Endpoint{AuthURL: e.url(httpapi.PathAuthorize), TokenURL: e.url(httpapi.PathToken), AuthStyle: oauth2.AuthStyleInParams}}
		a := c.assertion(t, e, "k1")
		tok, err := conf.Exchange(context.Background(), loc.Query().Get("code"), oauth2.VerifierOption(verifier),
			oauth2.SetAuthURLParam("client_assertion_type", oauth.AssertionTypeJWTBearer), oauth2.SetAuthURLParam("client_assertion", a.Get("client_assertion")))
		if err != nil {
			t.Fatalf("x/oauth2 exchange with a key from the jwks_uri: %v", err)
		}
		if tok.AccessToken == "" || !e.tokenValid(tok.AccessToken) {
			t.Fatal("no valid access token")
		}
		if n := host.hits.Load(); n != 2 {
			t.Fatalf("the jwks_uri was fetched %d times, want 2 (registration, then once for PAR and token together)", n)
		}
		// A key the client never published is still refused.
		if st, code, _, err := e.pushAuth(c.assertion(t, e, "k-stranger")); err != nil || st != http.StatusUnauthorized || code != "invalid_client" {
			t.Fatalf("an assertion by an unpublished key: %d %s %v, want 401 invalid_client", st, code, err)
		}
	})
}

// TestJWKSURI_ANewKidIsFetchedOnceAndRacingRequestsShareOneFetch: the client rotates its key
// (OpenID Connect Core 10.1.1): an assertion with the new kid makes the server fetch the set
// again, once, however many requests race for it; 50 racing requests with a kid the client
// never published cause at most one fetch, and none within a minute of the last, and are all
// invalid_client with nothing written.
func TestJWKSURI_ANewKidIsFetchedOnceAndRacingRequestsShareOneFetch(t *testing.T) {
	const racers = 50
	e := newEnvFrom(t, envSetup{vars: allowPrivate})
	host := newKeyHost(t)
	c := e.registerURIClient(t, host)
	if st, code, desc, err := e.pushAuth(c.assertion(t, e, "k1")); err != nil || st != http.StatusCreated {
		t.Fatalf("k1: %d %s %s %v", st, code, desc, err)
	}
	base := host.hits.Load() // registration and the first use

	race := func(kid string) (ok, refused int) {
		auths := make([]url.Values, racers)
		for i := range auths {
			auths[i] = c.assertion(t, e, kid)
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				st, code, _, err := e.pushAuth(auths[i])
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil && st == http.StatusCreated:
					ok++
				case err == nil && st == http.StatusUnauthorized && code == "invalid_client":
					refused++
				default:
					t.Errorf("racer %d: %d %s %v", i, st, code, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		return ok, refused
	}

	// The client rotates to k2 (and drops k1).
	c.keys = map[string]*ecdsa.PrivateKey{"k2": newP256(t)}
	host.publish(c.keys)
	e.clock.Advance(oauth.JWKSRefetchInterval + time.Second)
	if ok, _ := race("k2"); ok != racers {
		t.Fatalf("%d of %d requests with the new kid succeeded, want all", ok, racers)
	}
	if n := host.hits.Load() - base; n != 1 {
		t.Fatalf("the new kid caused %d fetches, want exactly 1", n)
	}

	// An unknown kid within the minute: no fetch at all; after it, at most one.
	writes, onetime := e.writes.count(), len(e.writes.onetimeHomes())
	for _, advance := range []time.Duration{0, oauth.JWKSRefetchInterval + time.Second} {
		e.clock.Advance(advance)
		before := host.hits.Load()
		if _, refused := race("k9"); refused != racers {
			t.Fatalf("after %v: %d of %d requests with an unknown kid refused, want all", advance, refused, racers)
		}
		fetches := host.hits.Load() - before
		if (advance == 0 && fetches != 0) || fetches > 1 {
			t.Fatalf("after %v: %d racing requests with an unknown kid caused %d fetches", advance, racers, fetches)
		}
		t.Logf("after %v: %d racing requests with an unknown kid, %d fetch", advance, racers, fetches)
	}
	if e.writes.count() != writes || len(e.writes.onetimeHomes()) != onetime {
		t.Fatalf("refused requests wrote: %v", e.writes.list()[writes:])
	}
}

// TestJWKSURI_KeysThatCannotBeFetchedAreInvalidClientAndWriteNothing: when the cached set is
// out of date and the client's host answers with a body over 64 KiB, a set holding a private
// key, a redirect, an error or nothing at all, the request is invalid_client saying the keys
// could not be fetched, and nothing is stored (no pushed request, no jti); the server's log
// says why. A redirect is not followed (its target, serving the right keys, is never asked).
func TestJWKSURI_KeysThatCannotBeFetchedAreInvalidClientAndWriteNothing(t *testing.T) {
	e := newEnvFrom(t, envSetup{vars: allowPrivate})
	host := newKeyHost(t)
	c := e.registerURIClient(t, host)
	good := c.keys["k1"]
	privateSet, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: good, KeyID: "k1"}}})
	goodSet, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: good.Public(), KeyID: "k1", Use: "sig"}}})
	eleven := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: good.Public(), KeyID: "k1", Use: "sig"}}}
	for i := range 10 {
		eleven.Keys = append(eleven.Keys, jose.JSONWebKey{Key: newP256(t).Public(), KeyID: fmt.Sprintf("extra-%d", i), Use: "sig"})
	}
	elevenKeys, _ := json.Marshal(eleven) // over the 10 keys a client may register
	for name, f := range map[string]http.HandlerFunc{
		"a body over 64 KiB":       func(w http.ResponseWriter, _ *http.Request) { w.Write(padded(t, c.keys)) },
		"a private key in the set": func(w http.ResponseWriter, _ *http.Request) { w.Write(privateSet) },
		"11 keys":                  func(w http.ResponseWriter, _ *http.Request) { w.Write(elevenKeys) },
		"a redirect": func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/moved" {
				w.Write(goodSet) // what following the redirect would get, and accept
				return
			}
			http.Redirect(w, r, "/moved", http.StatusFound)
		},
		"a server error":      func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusInternalServerError) },
		"not JSON":            func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("<html>")) },
		"a closed connection": func(w http.ResponseWriter, _ *http.Request) { panic(http.ErrAbortHandler) },
	} {
		t.Run(name, func(t *testing.T) {
			host.serve(f)
			e.clock.Advance(oauth.JWKSMaxAge + time.Second) // the cached set is out of date
			writes, onetime, hits := e.writes.count(), len(e.writes.onetimeHomes()), host.hits.Load()
			st, code, desc, err := e.pushAuth(c.assertion(t, e, "k1"))
			if err != nil || st != http.StatusUnauthorized || code != "invalid_client" || !strings.Contains(desc, oauth.ErrClientKeysUnavailable.Error()) {
				t.Fatalf("%d %s %q %v, want 401 invalid_client saying the keys could not be fetched", st, code, desc, err)
			}
			if strings.Contains(desc, "jwks_uri answered") || strings.Contains(desc, "refused:") || strings.Contains(desc, "127.0.0.1") {
				t.Fatalf("the description %q tells the cause, which is for the log", desc)
			}
			if host.hits.Load() != hits+1 {
				t.Fatalf("%d fetches, want 1", host.hits.Load()-hits)
			}
			if e.writes.count() != writes || len(e.writes.onetimeHomes()) != onetime {
				t.Fatalf("the refused request wrote: %v", e.writes.list()[writes:])
			}
			if !strings.Contains(e.logs.String(), `"msg":"client keys"`) {
				t.Fatal("the failure is not in the log")
			}
		})
	}
	// The host serves the keys again: within the minute of the failure it is not asked; after,
	// the client works again.
	host.publish(c.keys)
	hits := host.hits.Load()
	if st, code, _, _ := e.pushAuth(c.assertion(t, e, "k1")); st != http.StatusUnauthorized || code != "invalid_client" || host.hits.Load() != hits {
		t.Fatalf("within a minute of a failed fetch: %d %s with %d fetches, want invalid_client and none", st, code, host.hits.Load()-hits)
	}
	e.clock.Advance(oauth.JWKSRefetchInterval + time.Second)
	if st, code, desc, _ := e.pushAuth(c.assertion(t, e, "k1")); st != http.StatusCreated {
		t.Fatalf("after the host recovered: %d %s %s", st, code, desc)
	}
}

// TestJWKSURI_LoopbackIsRefusedWhenTheSettingIsOff: with AUTH_JWKS_URI_ALLOW_PRIVATE at its
// default, the token domain the app builds refuses to fetch a client's keys from a loopback
// address (the address dialled, after resolution: 127.0.0.1 and localhost alike), and the
// request is invalid_client with nothing written; the host is never reached.
func TestJWKSURI_LoopbackIsRefusedWhenTheSettingIsOff(t *testing.T) {
	e := newEnv(t)
	if e.app.Config.JWKSURIAllowPrivate {
		t.Fatal("AUTH_JWKS_URI_ALLOW_PRIVATE is on by default")
	}
	host := newKeyHost(t)
	for _, uri := range []string{host.uri(), strings.Replace(host.uri(), "127.0.0.1", "localhost", 1)} {
		// Registered directly in the store: registration would refuse it the same way.
		id := oauth.NewID(oauth.PrefixClientID)
		keys := map[string]*ecdsa.PrivateKey{"k1": newP256(t)}
		host.publish(keys)
		if err := e.app.Store.CreateClient(context.Background(), oauth.Client{ID: id, Name: "Loopback", RedirectURIs: []string{redirectURI},
			Scopes: []string{"openid", "email"}, TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT, JWKSURI: uri, SecretHashes: []oauth.SecretHash{}}); err != nil {
			t.Fatal(err)
		}
		c := uriClient{id: id, keys: keys}
		writes := e.writes.count()
		st, code, desc, err := e.pushAuth(c.assertion(t, e, "k1"))
		if err != nil || st != http.StatusUnauthorized || code != "invalid_client" || !strings.Contains(desc, oauth.ErrClientKeysUnavailable.Error()) {
			t.Fatalf("%s: %d %s %q %v, want invalid_client", uri, st, code, desc, err)
		}
		if host.hits.Load() != 0 || e.writes.count() != writes {
			t.Fatalf("%s: the host was reached %d times; writes %v", uri, host.hits.Load(), e.writes.list()[writes:])
		}
		if !strings.Contains(e.logs.String(), "not public") {
			t.Fatalf("%s: the log does not say the address is not public", uri)
		}
	}
}

// TestJWKSURI_RegistrationRefusesAUnusableURIAndWritesNothing: the admin service (authctl
// clients create and update) fetches the jwks_uri once and refuses it, saying why, when it is
// not https, cannot be reached, is on loopback without the test setting, redirects, or holds
// a private key or too large a body; and a client given jwks and jwks_uri together (RFC 7591 2).
func TestJWKSURI_RegistrationRefusesAUnusableURIAndWritesNothing(t *testing.T) {
	e := newEnvFrom(t, envSetup{vars: allowPrivate})
	host := newKeyHost(t)
	key := newP256(t)
	privateSet, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key, KeyID: "k1"}}})
	publicSet, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1"}}})
	closed := newKeyHost(t)
	closed.srv.Close()
	adm := admin.New(e.app.Store, cheapHasher, e.clock, e.app.Audit)
	adm.JWKS = host.fetcher(e.app.Config)
	strict := jwksuri.New(jwksuri.Options{RootCAs: host.roots}) // the setting off
	existing := e.registerURIClient(t, host)
	for _, tc := range []struct {
		name    string
		uri     string
		jwks    json.RawMessage
		serve   http.HandlerFunc
		fetcher oauth.JWKSFetcher
		want    string
	}{
		{name: "plain http", uri: strings.Replace(host.uri(), "https:", "http:", 1), want: "https"},
		{name: "unreachable", uri: closed.uri(), want: "fetch the jwks_uri"},
		{name: "loopback with the setting off", uri: host.uri(), fetcher: strict, want: "not public"},
		{name: "a redirect", uri: host.uri(), want: "redirect", serve: func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/elsewhere" {
				w.Write(publicSet) // what a followed redirect would get
				return
			}
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}},
		{name: "a private key", uri: host.uri(), want: "private key", serve: func(w http.ResponseWriter, _ *http.Request) { w.Write(privateSet) }},
		{name: "over 64 KiB", uri: host.uri(), want: "larger than 64 KiB", serve: func(w http.ResponseWriter, _ *http.Request) {
			w.Write(padded(t, map[string]*ecdsa.PrivateKey{"k1": key}))
		}},
		{name: "jwks and jwks_uri", uri: host.uri(), jwks: publicSet, want: "not both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.serve == nil {
				tc.serve = func(w http.ResponseWriter, _ *http.Request) { w.Write(publicSet) }
			}
			host.serve(tc.serve)
			adm.JWKS = host.fetcher(e.app.Config)
			if tc.fetcher != nil {
				adm.JWKS = tc.fetcher
			}
			before, _ := e.app.Store.ListClients(context.Background())
			_, _, err := adm.CreateClient(context.Background(), admin.ClientSpec{Name: "Bad URI", RedirectURIs: []string{redirectURI}, Scopes: []string{"openid"},
				TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT, JWKSURI: tc.uri, JWKS: tc.jwks})
			if !errors.Is(err, admin.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("create: %v, want an invalid-input error saying %q", err, tc.want)
			}
			after, _ := e.app.Store.ListClients(context.Background())
			if len(after) != len(before) {
				t.Fatal("a refused registration wrote a client")
			}
			// The same URI on update leaves the client as it was.
			var jwks json.RawMessage
			if tc.jwks != nil {
				jwks = tc.jwks
			}
			if _, err := adm.UpdateClient(context.Background(), existing.id, admin.ClientChanges{JWKSURI: &tc.uri, JWKS: jwks}); !errors.Is(err, admin.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("update: %v, want an invalid-input error saying %q", err, tc.want)
			}
			if got, _ := e.app.Store.GetClient(context.Background(), existing.id); got.JWKSURI != host.uri() || len(got.JWKS) != 0 {
				t.Fatalf("a refused update changed the client: %q %s", got.JWKSURI, got.JWKS)
			}
		})
	}
}

// TestJWKSURI_TheCacheIsBoundedLeastRecentlyUsedOut: a cache of two clients' sets, used by three
// clients in turn, has dropped the first one's: its next request fetches again at once (no
// refetch limit applies to a set no longer held), while the most recent one's is still cached.
func TestJWKSURI_TheCacheIsBoundedLeastRecentlyUsedOut(t *testing.T) {
	e := newEnvFrom(t, envSetup{vars: allowPrivate})
	hosts := make([]*keyHost, 3)
	clients := make([]uriClient, 3)
	for i := range hosts {
		hosts[i] = newKeyHost(t)
		clients[i] = e.registerURIClient(t, hosts[i])
	}
	// One cache for the three hosts' certificates, bounded to two clients.
	roots := x509.NewCertPool()
	for _, h := range hosts {
		roots.AddCert(h.srv.Certificate())
	}
	e.app.Service.ClientJWKS = oauth.NewJWKSCache(jwksuri.New(jwksuri.Options{AllowPrivate: true, RootCAs: roots}), 2)
	hits := func() (n []int64) {
		for _, h := range hosts {
			n = append(n, h.hits.Load())
		}
		return n
	}
	for i, c := range clients {
		if st, code, desc, err := e.pushAuth(c.assertion(t, e, "k1")); err != nil || st != http.StatusCreated {
			t.Fatalf("client %d: %d %s %s %v", i, st, code, desc, err)
		}
	}
	before := hits()
	for _, i := range []int{0, 0} { // the first client, evicted, then cached again
		if st, code, desc, err := e.pushAuth(clients[i].assertion(t, e, "k1")); err != nil || st != http.StatusCreated {
			t.Fatalf("client %d again: %d %s %s %v", i, st, code, desc, err)
		}
	}
	if after := hits(); after[0] != before[0]+1 || after[2] != before[2] {
		t.Fatalf("fetches per host %v then %v: want one more fetch of the evicted first client's set and none of the last one's", before, after)
	}
}
