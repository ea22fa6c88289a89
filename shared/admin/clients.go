package admin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/oauth/rar"
	"github.com/acmebank/authserver/shared/seed"
	"github.com/acmebank/authserver/shared/tokenendpoint"
)

// ClientSpec is a client to register.
type ClientSpec struct {
	// ID is the client_id; empty means a generated one (oauth.NewID(oauth.PrefixClientID)).
	ID           string
	Name         string
	RedirectURIs []string
	Scopes       []string
	LogoURI      string
	// CertThumbprint (base64url SHA-256 of the DER certificate) or one of CertSubjectDN (an
	// RFC 4514 DN), CertSANDNS, CertSANURI, CertSANIP and CertSANEmail (RFC 8705 2.1.2)
	// register the client for mutual-TLS authentication: it then gets no secret.
	CertThumbprint string
	CertSubjectDN  string
	CertSANDNS     string
	CertSANURI     string
	CertSANIP      string
	CertSANEmail   string
	// RequirePKCE refuses the client's authorization requests without a code_challenge.
	RequirePKCE bool
	// RequirePAR refuses the client's authorization requests that were not pushed (RFC 9126).
	RequirePAR bool
	// RefreshReuseInterval is the client's refresh retry window (oauth.Client); zero is off.
	RefreshReuseInterval time.Duration
	// RefreshTokenRotation is oauth.RotationOn, oauth.RotationOff or "" (the profile's
	// default: off for fapi2, on otherwise; oauth.Client.RotatesRefreshTokens).
	RefreshTokenRotation string
	// Profile is the security profile ("" or oauth.ProfileFAPI2) whose rules the rest of the
	// spec must meet (oauth.Client.CheckProfile).
	Profile string
	// IDTokenSignedResponseAlg is the client's id_token algorithm: "" (RS256), "RS256",
	// "PS256" or "ES256", one the deployment keeps keys for (Service.IDTokenAlgs).
	IDTokenSignedResponseAlg string
	// DPoPBoundAccessTokens makes the client's token requests carry a DPoP proof (RFC 9449).
	DPoPBoundAccessTokens bool
	// TokenEndpointAuthMethod is "" (a secret, or the certificate when one is given),
	// private_key_jwt (with JWKS) or tls_client_auth (with the certificate).
	TokenEndpointAuthMethod string
	// JWKS is the client's public JWK Set for private_key_jwt.
	JWKS json.RawMessage
	// JWKSURI is where the client publishes that set instead (RFC 7591 2 jwks_uri; never both):
	// registration fetches it once (Service.JWKS) and refuses it when it cannot be fetched or
	// its set breaks the rules of inline keys.
	JWKSURI string
	// RequireSignedRequestObject makes the client's pushed requests come as signed request
	// objects (RFC 9101 10.5); it needs the client's keys (private_key_jwt).
	RequireSignedRequestObject bool
	// AuthorizationSignedResponseAlg and IntrospectionSignedResponseAlg are the algorithms of
	// the client's JARM and JWT introspection responses: "" (the default,
	// oauth.Client.AuthorizationResponseAlg), "RS256", "PS256" or "ES256", one the deployment
	// keeps keys for.
	AuthorizationSignedResponseAlg string
	IntrospectionSignedResponseAlg string
	// AuthorizationDetailsTypes are the authorization_details types the client may ask for
	// (RFC 9396 10), each one the deployment declares (rar.Shipped).
	AuthorizationDetailsTypes []string
	// GrantTypes are the grant types the client may use (RFC 7591 grant_types), each one the
	// token endpoint accepts (tokenendpoint.GrantTypes); empty is oauth.DefaultGrantTypes.
	GrantTypes []string
	// Logout (oauth.Client): the registered post_logout_redirect_uris (the rules of redirect
	// URIs), the https backchannel_logout_uri, whether the client needs sid in its logout
	// tokens, and whether a logout revokes its grants given in the session.
	PostLogoutRedirectURIs           []string
	BackchannelLogoutURI             string
	BackchannelLogoutSessionRequired bool
	LogoutRevokesGrants              bool
	// CIBA (oauth.Client, oauth.Client.ValidBackchannelSettings): the delivery mode (poll,
	// ping), a ping client's https notification endpoint, the alg of its signed
	// authentication requests.
	BackchannelTokenDeliveryMode               string
	BackchannelClientNotificationEndpoint      string
	BackchannelAuthenticationRequestSigningAlg string
}

// CreateClient registers a client and returns it with its secret: the only time the secret
// exists outside the client's hands, since the store keeps only its hash. A client registered
// for mutual TLS gets no secret (""). A taken id is oauth.ErrAlreadyExists.
func (s *Service) CreateClient(ctx context.Context, spec ClientSpec) (oauth.Client, string, error) {
	c, secret, err := s.NewClient(ctx, spec)
	if err != nil {
		return oauth.Client{}, "", err
	}
	if err := s.Store.CreateClient(ctx, c); err != nil {
		if errors.Is(err, oauth.ErrAlreadyExists) {
			return oauth.Client{}, "", fmt.Errorf("client id %q is taken: %w", c.ID, oauth.ErrAlreadyExists)
		}
		return oauth.Client{}, "", fmt.Errorf("create client %s: %w", c.ID, err)
	}
	s.audit(ctx, "client_create", c.ID, "")
	return c, secret, nil
}

// NewClient checks spec with every rule of CreateClient (the profile's included) and returns
// the client it would store, with its secret, writing nothing: dynamic registration
// (shared/registration) validates with it before it spends anything, so the operator's and a
// third party's registrations are held to one set of rules.
func (s *Service) NewClient(ctx context.Context, spec ClientSpec) (oauth.Client, string, error) {
	if spec.ID == "" {
		spec.ID = oauth.NewID(oauth.PrefixClientID)
	}
	if err := validClientID(spec.ID); err != nil {
		return oauth.Client{}, "", err
	}
	name := strings.TrimSpace(spec.Name)
	if name == "" || len(name) > 200 {
		return oauth.Client{}, "", invalid("a client needs a name (at most 200 characters)")
	}
	uris, err := redirectURIs(spec.RedirectURIs)
	if err != nil {
		return oauth.Client{}, "", err
	}
	scopes, err := clientScopes(spec.Scopes)
	if err != nil {
		return oauth.Client{}, "", err
	}
	if err := validLogoURI(spec.LogoURI); err != nil {
		return oauth.Client{}, "", err
	}
	if err := validThumbprint(spec.CertThumbprint); err != nil {
		return oauth.Client{}, "", err
	}
	if err := oauth.ValidRefreshReuseInterval(spec.RefreshReuseInterval); err != nil {
		return oauth.Client{}, "", invalid("%s", err)
	}
	if err := oauth.ValidRefreshTokenRotation(spec.RefreshTokenRotation); err != nil {
		return oauth.Client{}, "", invalid("%s", err)
	}
	if err := keys.ValidClientAlg(spec.IDTokenSignedResponseAlg, s.IDTokenAlgs); err != nil {
		return oauth.Client{}, "", invalid("%s", err)
	}
	if err := s.validResponseAlgs(&spec.AuthorizationSignedResponseAlg, &spec.IntrospectionSignedResponseAlg); err != nil {
		return oauth.Client{}, "", err
	}
	if err := validDetailsTypes(spec.AuthorizationDetailsTypes); err != nil {
		return oauth.Client{}, "", err
	}
	if err := validGrantTypes(spec.GrantTypes); err != nil {
		return oauth.Client{}, "", err
	}
	postLogout, err := postLogoutRedirectURIs(spec.PostLogoutRedirectURIs)
	if err != nil {
		return oauth.Client{}, "", err
	}
	if err := validBackchannelLogoutURI(spec.BackchannelLogoutURI); err != nil {
		return oauth.Client{}, "", err
	}
	now := s.now().UTC()
	c := oauth.Client{
		ID: spec.ID, Name: name, RedirectURIs: uris, Scopes: scopes, LogoURI: spec.LogoURI,
		CertThumbprint: spec.CertThumbprint, CertSubjectDN: spec.CertSubjectDN, CertSANDNS: spec.CertSANDNS, CertSANURI: spec.CertSANURI,
		CertSANIP: spec.CertSANIP, CertSANEmail: spec.CertSANEmail, RequirePKCE: spec.RequirePKCE, RequirePAR: spec.RequirePAR,
		SecretHashes: []oauth.SecretHash{}, CreatedAt: now, UpdatedAt: now, RequireSignedRequestObject: spec.RequireSignedRequestObject,
		RefreshReuseInterval:           spec.RefreshReuseInterval,
		RefreshTokenRotation:           spec.RefreshTokenRotation,
		IDTokenSignedResponseAlg:       spec.IDTokenSignedResponseAlg,
		Profile:                        spec.Profile,
		DPoPBoundAccessTokens:          spec.DPoPBoundAccessTokens,
		TokenEndpointAuthMethod:        spec.TokenEndpointAuthMethod,
		JWKS:                           spec.JWKS,
		JWKSURI:                        spec.JWKSURI,
		AuthorizationSignedResponseAlg: spec.AuthorizationSignedResponseAlg,
		IntrospectionSignedResponseAlg: spec.IntrospectionSignedResponseAlg,
		AuthorizationDetailsTypes:      spec.AuthorizationDetailsTypes,
		GrantTypes:                     spec.GrantTypes,
		PostLogoutRedirectURIs:         postLogout,
		BackchannelLogoutURI:           spec.BackchannelLogoutURI,

		BackchannelLogoutSessionRequired: spec.BackchannelLogoutSessionRequired,
		LogoutRevokesGrants:              spec.LogoutRevokesGrants,

		BackchannelTokenDeliveryMode:               spec.BackchannelTokenDeliveryMode,
		BackchannelClientNotificationEndpoint:      spec.BackchannelClientNotificationEndpoint,
		BackchannelAuthenticationRequestSigningAlg: spec.BackchannelAuthenticationRequestSigningAlg,
	}
	if err := c.ValidCertBinding(); err != nil {
		return oauth.Client{}, "", invalid("%s", err)
	}
	if err := c.ValidRedirectURIsForGrants(); err != nil {
		return oauth.Client{}, "", invalid("%s", err)
	}
	if err := c.ValidTokenEndpointAuthMethod(); err != nil {
		return oauth.Client{}, "", invalid("%s", err)
	}
	if err := c.ValidRequestObjectSetting(); err != nil {
		return oauth.Client{}, "", invalid("%s", err)
	}
	if err := c.ValidBackchannelSettings(); err != nil {
		return oauth.Client{}, "", invalid("%s", err)
	}
	c.ApplyProfileDefaults()
	if err := c.CheckProfile(); err != nil {
		return oauth.Client{}, "", invalid("%s", err)
	}
	if err := s.checkJWKSURI(ctx, c.JWKSURI); err != nil {
		return oauth.Client{}, "", err
	}
	// A client that authenticates with a certificate or a key gets no secret: nothing stored
	// here could then authenticate it.
	var secret string
	if !c.UsesMTLS() && !c.UsesPrivateKeyJWT() {
		secret = oauth.NewSecret(oauth.PrefixSecret)
		c.SecretHashes = []oauth.SecretHash{{Hash: oauth.HashSecret(secret)}}
	}
	return c, secret, nil
}

// GetClient returns a client; an unknown id is oauth.ErrNotFound.
func (s *Service) GetClient(ctx context.Context, id string) (oauth.Client, error) {
	c, err := s.Store.GetClient(ctx, id)
	if err != nil {
		return oauth.Client{}, clientErr("get", id, err)
	}
	return c, nil
}

// ListClients returns every client, ordered by id.
func (s *Service) ListClients(ctx context.Context) ([]oauth.Client, error) {
	list, err := s.Store.ListClients(ctx)
	if err != nil {
		return nil, fmt.Errorf("list clients: %w", err)
	}
	slices.SortFunc(list, func(a, b oauth.Client) int { return strings.Compare(a.ID, b.ID) })
	return list, nil
}

// ClientChanges is an update of a client; nil and empty fields leave things as they are.
// Narrowing a client's scopes or redirect URIs applies to new authorizations; grants already
// given keep their scopes until revoked.
type ClientChanges struct {
	Name    *string
	LogoURI *string
	// RedirectURIs replaces the list when non-nil; AddRedirectURIs and RemoveRedirectURIs
	// edit it (after the replacement).
	RedirectURIs       []string
	AddRedirectURIs    []string
	RemoveRedirectURIs []string
	// Scopes, AddScopes and RemoveScopes do the same for the scopes the client may request.
	Scopes       []string
	AddScopes    []string
	RemoveScopes []string
	// RequirePKCE, when non-nil, sets whether the client must send a code_challenge.
	RequirePKCE *bool
	// RequirePAR, when non-nil, sets whether the client must push its authorization requests.
	RequirePAR *bool
	// RefreshReuseInterval sets the refresh retry window when non-nil (zero turns it off).
	RefreshReuseInterval *time.Duration
	// RefreshTokenRotation sets the rotation setting when non-nil ("" is the profile's
	// default); it applies to the next refresh of every grant of the client.
	RefreshTokenRotation *string
	// Profile sets the security profile when non-nil ("" removes it).
	Profile *string
	// IDTokenSignedResponseAlg sets the client's id_token algorithm when non-nil ("" is RS256);
	// it applies to the next id_token, refreshes of existing grants included.
	IDTokenSignedResponseAlg *string
	// DPoPBoundAccessTokens, when non-nil, sets whether the client's tokens are DPoP-bound.
	DPoPBoundAccessTokens *bool
	// TokenEndpointAuthMethod, when non-nil, sets how the client authenticates; JWKS, when
	// non-nil, replaces its public keys (a key rotation: old assertions stop verifying).
	TokenEndpointAuthMethod *string
	JWKS                    json.RawMessage
	// JWKSURI, when non-nil, sets where the client publishes its keys (fetched and checked
	// first, like at registration); it replaces inline keys, as JWKS replaces a jwks_uri.
	JWKSURI *string
	// RequireSignedRequestObject, when non-nil, sets whether the client's pushed requests
	// must come as signed request objects.
	RequireSignedRequestObject *bool
	// AuthorizationSignedResponseAlg and IntrospectionSignedResponseAlg, when non-nil, set the
	// algorithms of the client's JARM and JWT introspection responses ("" is the default).
	AuthorizationSignedResponseAlg *string
	IntrospectionSignedResponseAlg *string
	// AuthorizationDetailsTypes, when non-nil, replaces the authorization_details types the
	// client may ask for (empty: none).
	AuthorizationDetailsTypes *[]string
	// GrantTypes, when non-nil, replaces the grant types the client may use (empty: the
	// default, oauth.DefaultGrantTypes). Tokens already issued stay valid until they expire
	// or are revoked.
	GrantTypes *[]string
	// PostLogoutRedirectURIs, when non-nil, replaces the registered post_logout_redirect_uris
	// (empty: none); BackchannelLogoutURI, BackchannelLogoutSessionRequired and
	// LogoutRevokesGrants, when non-nil, set the client's logout settings ("" removes the URI).
	PostLogoutRedirectURIs           *[]string
	BackchannelLogoutURI             *string
	BackchannelLogoutSessionRequired *bool
	LogoutRevokesGrants              *bool
	// The CIBA settings, when non-nil, set the client's (ClientSpec; "" is poll, no endpoint,
	// no alg).
	BackchannelTokenDeliveryMode               *string
	BackchannelClientNotificationEndpoint      *string
	BackchannelAuthenticationRequestSigningAlg *string
}

// validGrantTypes checks a client's grant_types against the token endpoint's registry.
func validGrantTypes(types []string) error {
	if err := oauth.ValidGrantTypes(types, tokenendpoint.GrantTypes()); err != nil {
		return invalid("%s", err)
	}
	return nil
}

// postLogoutRedirectURIs validates and de-duplicates a client's post_logout_redirect_uris
// with the rules of redirect URIs (seed.ValidateRedirectURI); none is allowed.
func postLogoutRedirectURIs(in []string) ([]string, error) {
	var out []string
	for _, u := range in {
		if err := seed.ValidateRedirectURI(u); err != nil {
			return nil, invalid("post_logout_redirect_uri: %v", err)
		}
		if !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	return out, nil
}

// validBackchannelLogoutURI accepts no URI or an https one (oauth.ValidBackchannelLogoutURI).
func validBackchannelLogoutURI(uri string) error {
	if uri == "" {
		return nil
	}
	if err := oauth.ValidBackchannelLogoutURI(uri); err != nil {
		return invalid("%s", err)
	}
	return nil
}

// validDetailsTypes checks authorization_details types against the deployment's (rar.Shipped).
func validDetailsTypes(types []string) error {
	r, err := rar.Shipped()
	if err != nil {
		return err
	}
	if err := oauth.ValidAuthorizationDetailsTypes(r, types); err != nil {
		return invalid("%s", err)
	}
	return nil
}

// validResponseAlgs checks the algorithms of a client's signed responses (JARM 3
// authorization_signed_response_alg, RFC 9701 6 introspection_signed_response_alg); nil is
// not given.
func (s *Service) validResponseAlgs(authz, introspect *string) error {
	for _, a := range []struct {
		name string
		alg  *string
	}{{"authorization_signed_response_alg", authz}, {"introspection_signed_response_alg", introspect}} {
		if a.alg == nil || *a.alg == "" { // the default: the id_token's algorithm, checked apart
			continue
		}
		if err := keys.ValidResponseAlg(a.name, *a.alg, s.IDTokenAlgs); err != nil {
			return invalid("%s", err)
		}
	}
	return nil
}

// UpdateClient applies ch atomically and returns the client as stored. A client must keep at
// least one redirect URI and one scope; removing one that is not registered is an error, so a
// typo does not pass silently.
func (s *Service) UpdateClient(ctx context.Context, id string, ch ClientChanges) (oauth.Client, error) {
	if ch.Name != nil && (strings.TrimSpace(*ch.Name) == "" || len(*ch.Name) > 200) {
		return oauth.Client{}, invalid("a client needs a name (at most 200 characters)")
	}
	if ch.LogoURI != nil {
		if err := validLogoURI(*ch.LogoURI); err != nil {
			return oauth.Client{}, err
		}
	}
	if ch.RefreshReuseInterval != nil {
		if err := oauth.ValidRefreshReuseInterval(*ch.RefreshReuseInterval); err != nil {
			return oauth.Client{}, invalid("%s", err)
		}
	}
	if ch.RefreshTokenRotation != nil {
		if err := oauth.ValidRefreshTokenRotation(*ch.RefreshTokenRotation); err != nil {
			return oauth.Client{}, invalid("%s", err)
		}
	}
	if ch.IDTokenSignedResponseAlg != nil {
		if err := keys.ValidClientAlg(*ch.IDTokenSignedResponseAlg, s.IDTokenAlgs); err != nil {
			return oauth.Client{}, invalid("%s", err)
		}
	}
	if ch.JWKSURI != nil {
		if ch.JWKS != nil {
			return oauth.Client{}, invalid("give the client's keys as jwks or as jwks_uri, not both (RFC 7591 2)")
		}
		if err := oauth.ValidJWKSURI(*ch.JWKSURI); err != nil {
			return oauth.Client{}, invalid("%s", err)
		}
		// Fetched before the update, not inside it: no network call in a compare-and-swap.
		if err := s.checkJWKSURI(ctx, *ch.JWKSURI); err != nil {
			return oauth.Client{}, err
		}
	}
	if err := s.validResponseAlgs(ch.AuthorizationSignedResponseAlg, ch.IntrospectionSignedResponseAlg); err != nil {
		return oauth.Client{}, err
	}
	if ch.AuthorizationDetailsTypes != nil {
		if err := validDetailsTypes(*ch.AuthorizationDetailsTypes); err != nil {
			return oauth.Client{}, err
		}
	}
	if ch.GrantTypes != nil {
		if err := validGrantTypes(*ch.GrantTypes); err != nil {
			return oauth.Client{}, err
		}
	}
	var postLogout []string
	if ch.PostLogoutRedirectURIs != nil {
		var err error
		if postLogout, err = postLogoutRedirectURIs(*ch.PostLogoutRedirectURIs); err != nil {
			return oauth.Client{}, err
		}
	}
	if ch.BackchannelLogoutURI != nil {
		if err := validBackchannelLogoutURI(*ch.BackchannelLogoutURI); err != nil {
			return oauth.Client{}, err
		}
	}
	var out oauth.Client
	err := s.Store.UpdateClient(ctx, id, func(c oauth.Client) (oauth.Client, error) {
		if ch.Name != nil {
			c.Name = strings.TrimSpace(*ch.Name)
		}
		if ch.LogoURI != nil {
			c.LogoURI = *ch.LogoURI
		}
		if ch.RefreshReuseInterval != nil {
			c.RefreshReuseInterval = *ch.RefreshReuseInterval
		}
		if ch.RefreshTokenRotation != nil {
			c.RefreshTokenRotation = *ch.RefreshTokenRotation
		}
		if ch.RequirePKCE != nil {
			c.RequirePKCE = *ch.RequirePKCE
		}
		if ch.RequirePAR != nil {
			c.RequirePAR = *ch.RequirePAR
		}
		if ch.IDTokenSignedResponseAlg != nil {
			c.IDTokenSignedResponseAlg = *ch.IDTokenSignedResponseAlg
		}
		if ch.DPoPBoundAccessTokens != nil {
			c.DPoPBoundAccessTokens = *ch.DPoPBoundAccessTokens
		}
		if ch.TokenEndpointAuthMethod != nil {
			c.TokenEndpointAuthMethod = *ch.TokenEndpointAuthMethod
		}
		if ch.JWKS != nil {
			c.JWKS, c.JWKSURI = ch.JWKS, ""
		}
		if ch.JWKSURI != nil {
			c.JWKSURI, c.JWKS = *ch.JWKSURI, nil
		}
		if ch.RequireSignedRequestObject != nil {
			c.RequireSignedRequestObject = *ch.RequireSignedRequestObject
		}
		if ch.AuthorizationSignedResponseAlg != nil {
			c.AuthorizationSignedResponseAlg = *ch.AuthorizationSignedResponseAlg
		}
		if ch.IntrospectionSignedResponseAlg != nil {
			c.IntrospectionSignedResponseAlg = *ch.IntrospectionSignedResponseAlg
		}
		if ch.AuthorizationDetailsTypes != nil {
			c.AuthorizationDetailsTypes = *ch.AuthorizationDetailsTypes
		}
		if ch.GrantTypes != nil {
			c.GrantTypes = *ch.GrantTypes
		}
		if ch.PostLogoutRedirectURIs != nil {
			c.PostLogoutRedirectURIs = postLogout
		}
		if ch.BackchannelLogoutURI != nil {
			c.BackchannelLogoutURI = *ch.BackchannelLogoutURI
		}
		if ch.BackchannelLogoutSessionRequired != nil {
			c.BackchannelLogoutSessionRequired = *ch.BackchannelLogoutSessionRequired
		}
		if ch.LogoutRevokesGrants != nil {
			c.LogoutRevokesGrants = *ch.LogoutRevokesGrants
		}
		if ch.BackchannelTokenDeliveryMode != nil {
			c.BackchannelTokenDeliveryMode = *ch.BackchannelTokenDeliveryMode
		}
		if ch.BackchannelClientNotificationEndpoint != nil {
			c.BackchannelClientNotificationEndpoint = *ch.BackchannelClientNotificationEndpoint
		}
		if ch.BackchannelAuthenticationRequestSigningAlg != nil {
			c.BackchannelAuthenticationRequestSigningAlg = *ch.BackchannelAuthenticationRequestSigningAlg
		}
		if err := c.ValidTokenEndpointAuthMethod(); err != nil {
			return c, invalid("%s", err)
		}
		if err := c.ValidRequestObjectSetting(); err != nil {
			return c, invalid("%s", err)
		}
		if err := c.ValidBackchannelSettings(); err != nil {
			return c, invalid("%s", err)
		}
		uris, err := edit(c.RedirectURIs, ch.RedirectURIs, ch.AddRedirectURIs, ch.RemoveRedirectURIs, "redirect URI", slices.Contains[[]string])
		if err != nil {
			return c, err
		}
		if c.RedirectURIs, err = redirectURIs(uris); err != nil {
			return c, err
		}
		if err := c.ValidRedirectURIsForGrants(); err != nil {
			return c, invalid("%s", err)
		}
		has := func(list []string, s string) bool { return oauth.Scopes(list).Has(s) }
		scopes, err := edit(c.Scopes, ch.Scopes, ch.AddScopes, ch.RemoveScopes, "scope", has)
		if err != nil {
			return c, err
		}
		if c.Scopes, err = clientScopes(scopes); err != nil {
			return c, err
		}
		if ch.Profile != nil {
			// A client moved into a profile takes what it implies; one already in it keeps
			// its settings, so turning one of them off is refused below.
			if *ch.Profile != c.Profile {
				c.Profile = *ch.Profile
				c.ApplyProfileDefaults()
			}
		}
		// The profile's rules hold after every change, not only at registration: a FAPI
		// client cannot be changed out of them one flag at a time.
		if err := c.CheckProfile(); err != nil {
			return c, invalid("%s", err)
		}
		c.UpdatedAt = s.now().UTC()
		out = c
		return c, nil
	})
	if err != nil {
		return oauth.Client{}, clientErr("update", id, err)
	}
	s.audit(ctx, "client_update", id, "")
	return out, nil
}

// checkJWKSURI fetches a client's jwks_uri once ("" is none) and refuses it, saying why, when
// it cannot be fetched or its key set breaks the rules of inline keys (private key material
// among them: OpenID Connect Registration 2).
func (s *Service) checkJWKSURI(ctx context.Context, uri string) error {
	if uri == "" {
		return nil
	}
	if _, err := oauth.FetchClientJWKS(ctx, s.JWKS, uri); err != nil {
		return invalid("jwks_uri %s is refused: %v", uri, err)
	}
	return nil
}

// edit applies a replacement, then additions, then removals to a list.
func edit(cur, replace, add, remove []string, what string, has func([]string, string) bool) ([]string, error) {
	out := slices.Clone(cur)
	if replace != nil {
		out = slices.Clone(replace)
	}
	for _, a := range add {
		if !has(out, a) {
			out = append(out, a)
		}
	}
	for _, r := range remove {
		if !has(out, r) {
			return nil, invalid("%s %q is not registered for this client", what, r)
		}
		out = slices.DeleteFunc(out, func(x string) bool { return has([]string{r}, x) })
	}
	return out, nil
}

// RotateSecret gives a client a new secret and returns it (once, like CreateClient). With a
// zero grace the old secrets stop working at once; otherwise each stays valid until
// now+grace (or its own earlier end), so the client can deploy the new one without downtime.
// Secrets whose grace has run out are dropped.
func (s *Service) RotateSecret(ctx context.Context, id string, grace time.Duration) (string, oauth.Client, error) {
	if grace < 0 {
		return "", oauth.Client{}, invalid("the grace period cannot be negative")
	}
	secret := oauth.NewSecret(oauth.PrefixSecret)
	now := s.now().UTC()
	var out oauth.Client
	err := s.Store.UpdateClient(ctx, id, func(c oauth.Client) (oauth.Client, error) {
		if c.UsesMTLS() {
			return c, invalid("client %s authenticates with its certificate and has no secret", id)
		}
		hashes := []oauth.SecretHash{{Hash: oauth.HashSecret(secret)}}
		if grace > 0 {
			end := now.Add(grace)
			for _, h := range c.SecretHashes {
				if !h.ExpiresAt.IsZero() && !now.Before(h.ExpiresAt) {
					continue // already expired
				}
				if h.ExpiresAt.IsZero() || end.Before(h.ExpiresAt) {
					h.ExpiresAt = end
				}
				hashes = append(hashes, h)
			}
		}
		c.SecretHashes, c.UpdatedAt = hashes, now
		out = c
		return c, nil
	})
	if err != nil {
		return "", oauth.Client{}, clientErr("rotate the secret of", id, err)
	}
	s.audit(ctx, "client_rotate_secret", id, "")
	return secret, out, nil
}

// DisableClient marks a client disabled and revokes all its grants, so its tokens fail at
// once; it returns the revoked grant ids. Disabling a disabled client sweeps its grants again.
func (s *Service) DisableClient(ctx context.Context, id string) ([]string, error) {
	if err := s.setClientDisabled(ctx, id, true); err != nil {
		return nil, err
	}
	return s.RevokeAll(ctx, oauth.GrantFilter{ClientID: id}, ReasonClientDisabled)
}

// EnableClient lifts a client's disablement. Grants revoked by the disablement stay revoked.
func (s *Service) EnableClient(ctx context.Context, id string) error {
	return s.setClientDisabled(ctx, id, false)
}

func (s *Service) setClientDisabled(ctx context.Context, id string, disabled bool) error {
	err := s.Store.UpdateClient(ctx, id, func(c oauth.Client) (oauth.Client, error) {
		c.Disabled, c.UpdatedAt = disabled, s.now().UTC()
		return c, nil
	})
	if err != nil {
		verb := "enable"
		if disabled {
			verb = "disable"
		}
		return clientErr(verb, id, err)
	}
	action := "client_enable"
	if disabled {
		action = "client_disable"
	}
	s.audit(ctx, action, id, "")
	return nil
}

// DeleteClient disables a client, revokes all its grants and then deletes it, returning the
// revoked grant ids. If a revocation fails the client is left disabled, not deleted, so the
// command can be run again.
func (s *Service) DeleteClient(ctx context.Context, id string) ([]string, error) {
	if err := s.setClientDisabled(ctx, id, true); err != nil {
		return nil, err
	}
	revoked, err := s.RevokeAll(ctx, oauth.GrantFilter{ClientID: id}, ReasonClientDeleted)
	if err != nil {
		return revoked, fmt.Errorf("client %s left disabled, not deleted: %w", id, err)
	}
	if err := s.Store.DeleteClient(ctx, id); err != nil && !errors.Is(err, oauth.ErrNotFound) {
		return revoked, fmt.Errorf("delete client %s: %w", id, err)
	}
	s.audit(ctx, "client_delete", id, "")
	return revoked, nil
}

// clientErr gives a store error the client's id, and the same text for "not found" whichever
// store said it.
func clientErr(verb, id string, err error) error { return itemErr("client", verb, id, err) }

// itemErr wraps a store error of one client or user: "not found" reads the same whichever
// store said it, and a rule an update broke keeps the operator's message without store prefixes.
func itemErr(kind, verb, id string, err error) error {
	if ie := (*inputError)(nil); errors.As(err, &ie) {
		return ie
	}
	if errors.Is(err, oauth.ErrNotFound) {
		return fmt.Errorf("%s %q: %w", kind, id, oauth.ErrNotFound)
	}
	return fmt.Errorf("%s %s %s: %w", verb, kind, id, err)
}

// validClientID keeps client ids to URL-safe characters, since they travel in query strings,
// form fields and Basic credentials.
func validClientID(id string) error {
	if len(id) > 128 {
		return invalid("client id %q is longer than 128 characters", id)
	}
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.', r == '~':
		default:
			return invalid("client id %q may only hold A-Z a-z 0-9 - _ . ~", id)
		}
	}
	return nil
}

// redirectURIs validates and de-duplicates a client's redirect URIs (seed.ValidateRedirectURI:
// absolute, no fragment, https except on loopback).
func redirectURIs(in []string) ([]string, error) {
	var out []string
	for _, u := range in {
		if err := seed.ValidateRedirectURI(u); err != nil {
			return nil, invalid("%v", err)
		}
		if !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	return out, nil
}

// clientScopes validates and de-duplicates the scopes a client may request, kept as spelled.
func clientScopes(in []string) ([]string, error) {
	var out oauth.Scopes
	for _, s := range in {
		if !oauth.IsKnownScope(s) {
			return nil, invalid("unknown scope %q (known: %s)", s, strings.Join(oauth.KnownScopes, " "))
		}
		if !out.Has(s) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, invalid("a client needs at least one scope")
	}
	return out, nil
}

// validLogoURI accepts no logo or an absolute https URL: the consent page shows it.
func validLogoURI(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return invalid("logo URI %q must be an absolute https URL", raw)
	}
	return nil
}

// validCert checks a certificate registration: a thumbprint is 32 bytes in base64url.
// validThumbprint checks the form of a registered certificate thumbprint; the rest of a
// client's certificate registration is oauth.Client.ValidCertBinding.
func validThumbprint(thumbprint string) error {
	if thumbprint != "" {
		b, err := base64.RawURLEncoding.DecodeString(thumbprint)
		if err != nil || len(b) != 32 {
			return invalid("certificate thumbprint must be the unpadded base64url SHA-256 of the certificate (43 characters)")
		}
	}
	return nil
}
