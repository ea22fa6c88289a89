package oauth

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/acmebank/authserver/shared/oauth/rar"
)

// Service is the token domain: authorization requests, the code and refresh grants,
// revocation and token validation. It knows nothing of HTTP or AWS; it talks to the store and
// signer ports.
type Service struct {
	Clients      ClientStore
	Interactions InteractionStore
	Grants       GrantStore
	Signer       IDTokenSigner
	Clock        Clock
	Issuer       string
	Lifetimes    Lifetimes
	// Log receives the service's operational messages.
	Log *slog.Logger
	// Audit receives the security events (grants issued, refreshed, revoked, reuse detected,
	// operators' revocations) with ids only, never a token, secret or password. It
	// has its own handler and writer, so it is written whatever the level of Log; nil sends
	// them to Log.
	Audit *slog.Logger
	// RequirePAR makes every client push its authorization requests (RFC 9126
	// require_pushed_authorization_requests, for the whole deployment; Client.RequirePAR is
	// the same per client).
	RequirePAR bool
	// Replay remembers the one-time values of requests (DPoP proof and client assertion
	// jtis) until they can no longer be replayed.
	Replay ReplayStore
	// DPoPNonces, when set, makes the DPoP proofs of token and pushed authorization requests
	// carry a nonce the server issued (RFC 9449 8); nil accepts proofs without one.
	DPoPNonces DPoPNonces
	// Origins are the public origins the endpoints are served under (the base URL and the
	// mutual-TLS connect host): a DPoP proof's htu must be one of them with the endpoint's path.
	Origins []string
	// Home labels the codes and tokens this deployment issues with where their single-use
	// state lives (its region, in a multi-region deployment: docs/multiregion.md); empty in a
	// deployment with one home.
	Home string
	// ClientJWKS fetches and caches the keys of clients registered with a jwks_uri; nil
	// refuses those clients (invalid_client).
	ClientJWKS *JWKSCache
	// AuthorizationDetails are the authorization_details types the deployment accepts (RFC
	// 9396), each with its schema; nil accepts none (every authorization_details is refused).
	AuthorizationDetails *rar.Registry
	// Backchannel keeps CIBA's requests (ciba.go), which the ciba grant polls and consumes
	// (flow_ciba.go); nil refuses that grant.
	Backchannel BackchannelStore
}

// Deps are what New builds a Service from. Clients, Interactions, Grants, Replay, Clock, Log,
// Issuer and every lifetime but Session are required; the others are optional, as each says.
type Deps struct {
	Clients      ClientStore
	Interactions InteractionStore
	Grants       GrantStore
	Replay       ReplayStore
	Clock        Clock
	Log          *slog.Logger
	Issuer       string
	// Lifetimes: Session is not the token domain's (package authn keeps sessions).
	Lifetimes Lifetimes

	// Signer signs id_tokens (optional: nil for the endpoints that issue no tokens, which is
	// every one but the token endpoint).
	Signer IDTokenSigner
	// Audit receives the security events (optional: nil sends them to Log).
	Audit *slog.Logger
	// RequirePAR makes every client push its authorization requests (optional).
	RequirePAR bool
	// DPoPNonces makes DPoP proofs carry a server nonce (optional: nil accepts proofs without).
	DPoPNonces DPoPNonces
	// Origins are the public origins the endpoints are served under, which a DPoP proof's htu
	// and a client assertion's audience may name (optional: with none, only the issuer is an
	// assertion's audience and no htu matches).
	Origins []string
	// Home labels what this deployment issues with its region (optional: one home).
	Home string
	// ClientJWKS fetches the keys of clients registered with a jwks_uri (optional: nil refuses
	// them).
	ClientJWKS *JWKSCache
	// AuthorizationDetails are the authorization_details types accepted (optional: nil
	// accepts none).
	AuthorizationDetails *rar.Registry
	// Backchannel keeps CIBA's requests (optional: nil refuses the ciba grant).
	Backchannel BackchannelStore
}

// New returns the Service of d, or an error naming every required dependency d lacks.
func New(d Deps) (*Service, error) {
	var missing []error
	need := func(ok bool, what string) {
		if !ok {
			missing = append(missing, errors.New("oauth: missing "+what))
		}
	}
	need(d.Clients != nil, "Clients (the client store)")
	need(d.Interactions != nil, "Interactions (the pending request store)")
	need(d.Grants != nil, "Grants (the grant store)")
	need(d.Replay != nil, "Replay (the one-time value store)")
	need(d.Clock != nil, "Clock")
	need(d.Log != nil, "Log")
	need(d.Issuer != "", "Issuer")
	l := d.Lifetimes
	for _, c := range []struct {
		name string
		d    time.Duration
	}{{"AccessToken", l.AccessToken}, {"RefreshToken", l.RefreshToken}, {"Grant", l.Grant}, {"Code", l.Code},
		{"IDToken", l.IDToken}, {"Request", l.Request}} {
		need(c.d > 0, "Lifetimes."+c.name+" (a positive duration)")
	}
	if err := errors.Join(missing...); err != nil {
		return nil, err
	}
	return &Service{
		Clients: d.Clients, Interactions: d.Interactions, Grants: d.Grants, Replay: d.Replay,
		Clock: d.Clock, Log: d.Log, Issuer: d.Issuer, Lifetimes: d.Lifetimes, Signer: d.Signer,
		Audit: d.Audit, RequirePAR: d.RequirePAR, DPoPNonces: d.DPoPNonces, Origins: d.Origins, Home: d.Home,
		ClientJWKS: d.ClientJWKS, AuthorizationDetails: d.AuthorizationDetails,
		Backchannel: d.Backchannel,
	}, nil
}

func (s *Service) now() time.Time { return s.Clock.Now() }

// Serves reports what a use case over s lacks of the token domain it calls: the clients,
// grants, replay store, clock and issuer, and the id_token signer when it issues tokens. It is
// the one check the use-case packages (tokenendpoint, introspection, revocation) make in their
// New, for a Service not made by New (as the admin tool's and the resource check's are). A nil
// s lacks everything.
func (s *Service) Serves(useCase string, issuesTokens bool) error {
	if s == nil {
		return fmt.Errorf("%s: missing Tokens", useCase)
	}
	var missing []string
	for _, d := range []struct {
		ok   bool
		name string
	}{
		{s.Clients != nil, "Clients"}, {s.Grants != nil, "Grants"}, {s.Replay != nil, "Replay"},
		{s.Clock != nil, "Clock"}, {s.Issuer != "", "Issuer"}, {s.Signer != nil || !issuesTokens, "Signer"},
	} {
		if !d.ok {
			missing = append(missing, "Tokens."+d.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s: missing %s", useCase, strings.Join(missing, ", "))
	}
	return nil
}

// ClientCredentials are what a client presented to authenticate.
type ClientCredentials struct {
	ID     string
	Secret string
	// Assertion and AssertionType are client_assertion and client_assertion_type
	// (private_key_jwt, RFC 7523 2.2).
	Assertion     string
	AssertionType string
	// CertThumbprint is the base64url SHA-256 of the TLS client certificate, when the request
	// came over mutual TLS; Cert the certificate itself (its subject and SANs, RFC 8705 2.1).
	CertThumbprint string
	Cert           *x509.Certificate
}

// AuthenticateClient checks a client's credentials (RFC 6749 2.3): the secret, or for a client
// registered with a certificate, that certificate (RFC 8705), or its client assertion, whose
// jti it records. Any failure is the same invalid_client, so the answer does not tell unknown
// clients from wrong secrets.
func (s *Service) AuthenticateClient(ctx context.Context, cred ClientCredentials) (*Client, error) {
	c, once, err := s.AuthenticateClientDeferred(ctx, cred)
	if err != nil {
		return nil, err
	}
	if err := s.Record(ctx, once); err != nil {
		return nil, err
	}
	return c, nil
}

// AuthenticateClientDeferred is AuthenticateClient without the write: a client assertion's jti
// is returned (zero for other methods) for the caller to record with Service.Record once the
// rest of the request is checked, beside its other one-time values.
func (s *Service) AuthenticateClientDeferred(ctx context.Context, cred ClientCredentials) (*Client, OneTime, error) {
	if cred.ID == "" {
		return nil, OneTime{}, InvalidClient("client authentication failed")
	}
	c, err := s.Clients.GetClient(ctx, cred.ID)
	if errors.Is(err, ErrNotFound) {
		return nil, OneTime{}, InvalidClient("client authentication failed")
	}
	if err != nil {
		return nil, OneTime{}, AsError(err)
	}
	if c.Disabled {
		return nil, OneTime{}, InvalidClient("client authentication failed")
	}
	if c.IsFAPI2() && cred.Secret != "" {
		// FAPI 2.0 5.3.2.1: private_key_jwt or mutual TLS only; a secret is refused even if
		// the client once had one.
		return nil, OneTime{}, InvalidClient("client authentication failed: this client must authenticate with private_key_jwt or its certificate, not a secret")
	}
	if c.UsesPrivateKeyJWT() || cred.Assertion != "" {
		switch {
		case !c.UsesPrivateKeyJWT():
			return nil, OneTime{}, InvalidClient("client authentication failed: this client does not authenticate with private_key_jwt")
		case cred.Assertion == "":
			return nil, OneTime{}, InvalidClient("client authentication failed: this client authenticates with private_key_jwt: send client_assertion")
		case cred.AssertionType != AssertionTypeJWTBearer:
			return nil, OneTime{}, InvalidClient("client authentication failed: client_assertion_type must be " + AssertionTypeJWTBearer)
		}
		once, err := s.verifyAssertion(ctx, &c, cred.Assertion)
		if err != nil {
			return nil, OneTime{}, err
		}
		return &c, once, nil
	}
	if c.UsesMTLS() {
		if !certMatches(&c, cred) {
			return nil, OneTime{}, InvalidClient("client authentication failed: this client must present its registered certificate")
		}
		return &c, OneTime{}, nil
	}
	if !c.VerifySecret(cred.Secret, s.now()) {
		return nil, OneTime{}, InvalidClient("client authentication failed")
	}
	return &c, OneTime{}, nil
}

// ClientCache keeps clients in memory for a short time, so a warm token endpoint spends no
// round trip on reading its client (DESIGN.md decision 3). A disabled client or a rotated
// secret takes effect within TTL; revoking its grants takes effect at once.
type ClientCache struct {
	ClientStore
	TTL   time.Duration
	Clock Clock

	mu      sync.Mutex
	entries map[string]cachedClient
}

type cachedClient struct {
	client Client
	until  time.Time
}

// NewClientCache wraps store; a zero ttl disables caching.
func NewClientCache(store ClientStore, ttl time.Duration, clock Clock) *ClientCache {
	return &ClientCache{ClientStore: store, TTL: ttl, Clock: clock, entries: map[string]cachedClient{}}
}

// GetClient serves a cached client while it is fresh. Misses (unknown ids) are not cached,
// so a newly registered client works at once.
func (c *ClientCache) GetClient(ctx context.Context, id string) (Client, error) {
	if c.TTL <= 0 {
		return c.ClientStore.GetClient(ctx, id)
	}
	now := c.Clock.Now()
	c.mu.Lock()
	e, ok := c.entries[id]
	c.mu.Unlock()
	if ok && now.Before(e.until) {
		return e.client, nil
	}
	cl, err := c.ClientStore.GetClient(ctx, id)
	if err != nil {
		return cl, err
	}
	c.mu.Lock()
	if len(c.entries) > 10000 { // bound memory against a flood of distinct ids
		clear(c.entries)
	}
	c.entries[id] = cachedClient{client: cl, until: now.Add(c.TTL)}
	c.mu.Unlock()
	return cl, nil
}

// Forget drops a client from the cache (after an update through the same process).
func (c *ClientCache) Forget(id string) {
	c.mu.Lock()
	delete(c.entries, id)
	c.mu.Unlock()
}
