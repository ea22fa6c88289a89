package oauth_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/acmebank/authserver/shared/oauth"
)

// racers is how many requests the concurrency tests of this file send at once.
const racers = 50

// authenticateRacing sends one assertion per signer at once, each with a jti of its own, and
// returns their answers.
func authenticateRacing(t *testing.T, s *oauth.Service, id string, k clientKey, now time.Time) []error {
	t.Helper()
	assertions := make([]string, racers)
	for i := range assertions {
		assertions[i] = k.sign(t, assertionClaims(id, now))
	}
	errs := make([]error, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() { errs[i] = authenticate(s, id, assertions[i]) })
	}
	wg.Wait()
	return errs
}

// TestPrivateKeyJWT_KeyRemovedFromTheClientIsRefusedOnTheNextRequest: once a key is removed from
// a client's registration, the next assertion it signs is invalid_client, and so are 50
// racing ones, while the key kept still authenticates: the parsed keys cached for the client
// answer only for the registration they were parsed from, even when its updated_at did not
// move.
func TestPrivateKeyJWT_KeyRemovedFromTheClientIsRefusedOnTheNextRequest(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	kept, removed := newClientKey(t, "kept", jose.ES256), newClientKey(t, "removed", jose.ES256)
	s := pkjwtService(t, oauth.Client{ID: "tpp", TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT, JWKS: jwksOf(t, kept, removed)}, now)
	for _, k := range []clientKey{kept, removed, removed} { // the keys are parsed and cached
		if err := authenticate(s, "tpp", k.sign(t, assertionClaims("tpp", now))); err != nil {
			t.Fatalf("key %s before the change: %v", k.kid, err)
		}
	}
	if err := s.Clients.UpdateClient(context.Background(), "tpp", func(c oauth.Client) (oauth.Client, error) {
		c.JWKS = jwksOf(t, kept) // updated_at untouched: the keys alone changed
		return c, nil
	}); err != nil {
		t.Fatal(err)
	}
	err := authenticate(s, "tpp", removed.sign(t, assertionClaims("tpp", now)))
	if oauth.AsError(err).Code != oauth.ErrCodeInvalidClient {
		t.Fatalf("the removed key's assertion on the next request: %v, want invalid_client", err)
	}
	for i, err := range authenticateRacing(t, s, "tpp", removed, now) {
		if oauth.AsError(err).Code != oauth.ErrCodeInvalidClient {
			t.Fatalf("racing request %d with the removed key: %v, want invalid_client", i, err)
		}
	}
	for i, err := range authenticateRacing(t, s, "tpp", kept, now) {
		if err != nil {
			t.Fatalf("racing request %d with the key kept: %v", i, err)
		}
	}
}

// TestPrivateKeyJWT_ClientKeysAreParsedOncePerRegistration: a client's registered keys are
// parsed on its first request and not on the next 50 racing ones; a new registration of its
// keys is parsed once more.
func TestPrivateKeyJWT_ClientKeysAreParsedOncePerRegistration(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	k := newClientKey(t, "k1", jose.ES256)
	s := pkjwtService(t, oauth.Client{ID: "parsed-once", TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT, JWKS: jwksOf(t, k)}, now)
	before := oauth.ClientKeySetParses()
	if err := authenticate(s, "parsed-once", k.sign(t, assertionClaims("parsed-once", now))); err != nil {
		t.Fatal(err)
	}
	for i, err := range authenticateRacing(t, s, "parsed-once", k, now) {
		if err != nil {
			t.Fatalf("racing request %d: %v", i, err)
		}
	}
	if n := oauth.ClientKeySetParses() - before; n != 1 {
		t.Fatalf("the client's keys were parsed %d times for %d requests, want once", n, 1+racers)
	}
	k2 := newClientKey(t, "k2", jose.ES256)
	if err := s.Clients.UpdateClient(context.Background(), "parsed-once", func(c oauth.Client) (oauth.Client, error) {
		c.JWKS = jwksOf(t, k, k2)
		return c, nil
	}); err != nil {
		t.Fatal(err)
	}
	for i, err := range authenticateRacing(t, s, "parsed-once", k2, now) {
		if err != nil {
			t.Fatalf("racing request %d with the key added: %v", i, err)
		}
	}
	if n := oauth.ClientKeySetParses() - before; n < 2 || n > 1+racers {
		t.Fatalf("%d parses after the registration changed, want the new keys parsed", n)
	}
}

// TestPrivateKeyJWT_UnknownClientsCacheNothing: 50 assertions naming clients that do not exist
// are invalid_client and leave the cache of parsed client keys as it was.
func TestPrivateKeyJWT_UnknownClientsCacheNothing(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	k := newClientKey(t, "k1", jose.ES256)
	s := pkjwtService(t, oauth.Client{ID: "tpp", TokenEndpointAuthMethod: oauth.AuthMethodPrivateKeyJWT, JWKS: jwksOf(t, k)}, now)
	cached, parses := oauth.CachedClientKeySets(), oauth.ClientKeySetParses()
	for i := range racers {
		id := fmt.Sprint("nobody-", i)
		if err := authenticate(s, id, k.sign(t, assertionClaims(id, now))); oauth.AsError(err).Code != oauth.ErrCodeInvalidClient {
			t.Fatalf("an assertion of unknown client %s: %v, want invalid_client", id, err)
		}
	}
	if c, p := oauth.CachedClientKeySets(), oauth.ClientKeySetParses(); c != cached || p != parses {
		t.Fatalf("after %d unknown clients: %d cached key sets (was %d), %d parses (was %d)", racers, c, cached, p, parses)
	}
}
