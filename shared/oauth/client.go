package oauth

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Client authentication methods (OIDC Discovery token_endpoint_auth_methods_supported, RFC 8705).
const (
	AuthMethodSecretBasic = "client_secret_basic"
	AuthMethodSecretPost  = "client_secret_post"
	AuthMethodTLSClient   = "tls_client_auth"
	AuthMethodSelfSigned  = "self_signed_tls_client_auth"
)

// Client is a registered third-party application.
type Client struct {
	ID   string `json:"client_id" dynamodbav:"client_id"`
	Name string `json:"name" dynamodbav:"name"`
	// SecretHashes are SHA-256 hashes of the client's secrets (base64url). Secrets are
	// high-entropy random strings, so a fast hash is enough and keeps the token endpoint cheap;
	// more than one is valid while a rotated secret's grace period runs.
	SecretHashes []SecretHash `json:"secret_hashes" dynamodbav:"secret_hashes"`
	RedirectURIs []string     `json:"redirect_uris" dynamodbav:"redirect_uris"`
	Scopes       []string     `json:"scopes" dynamodbav:"scopes"`
	LogoURI      string       `json:"logo_uri,omitempty" dynamodbav:"logo_uri,omitempty"`
	Disabled     bool         `json:"disabled,omitempty" dynamodbav:"disabled,omitempty"`
	// CertThumbprint (base64url SHA-256 of the DER certificate, self_signed_tls_client_auth)
	// or one of CertSubjectDN (an RFC 4514 string), CertSANDNS, CertSANURI, CertSANIP and
	// CertSANEmail (tls_client_auth, RFC 8705 2.1.2: tls_client_auth_subject_dn, _san_dns,
	// _san_uri, _san_ip, _san_email) register a client for mutual-TLS client authentication;
	// such a client's tokens are always certificate-bound. ValidCertBinding (mtls.go) holds
	// the rules: one of them, well formed.
	CertThumbprint string `json:"cert_thumbprint,omitempty" dynamodbav:"cert_thumbprint,omitempty"`
	CertSubjectDN  string `json:"cert_subject_dn,omitempty" dynamodbav:"cert_subject_dn,omitempty"`
	CertSANDNS     string `json:"cert_san_dns,omitempty" dynamodbav:"cert_san_dns,omitempty"`
	CertSANURI     string `json:"cert_san_uri,omitempty" dynamodbav:"cert_san_uri,omitempty"`
	CertSANIP      string `json:"cert_san_ip,omitempty" dynamodbav:"cert_san_ip,omitempty"`
	CertSANEmail   string `json:"cert_san_email,omitempty" dynamodbav:"cert_san_email,omitempty"`
	// RequirePKCE refuses the client's authorization requests without a code_challenge (S256),
	// so none of its codes can be exchanged without a verifier (RFC 9700 2.1.1).
	RequirePKCE bool      `json:"require_pkce,omitempty" dynamodbav:"require_pkce,omitempty"`
	CreatedAt   time.Time `json:"created_at" dynamodbav:"created_at"`
	UpdatedAt   time.Time `json:"updated_at" dynamodbav:"updated_at"`

	// RefreshReuseInterval is the client's refresh retry window: within it of a refresh token's
	// spend, the same client presenting that token again gets one new rotation instead of
	// losing the grant (a retry after a lost response). Zero, the default, turns it off; at
	// most MaxRefreshReuseInterval.
	RefreshReuseInterval time.Duration `json:"refresh_reuse_interval_ns,omitempty" dynamodbav:"refresh_reuse_interval_ns,omitempty"`
	// RefreshTokenRotation is whether a refresh issues a new refresh token and spends the one
	// presented: RotationOn, RotationOff, or "" for the profile's default (RotatesRefreshTokens).
	RefreshTokenRotation string `json:"refresh_token_rotation,omitempty" dynamodbav:"refresh_token_rotation,omitempty"`

	// RequirePAR refuses the client's authorization requests unless they were pushed first
	// (RFC 9126 require_pushed_authorization_requests): the parameters then never pass through
	// the browser.
	RequirePAR bool `json:"require_pushed_authorization_requests,omitempty" dynamodbav:"require_pushed_authorization_requests,omitempty"`
	// Profile is the security profile the client registered under: "" (none) or ProfileFAPI2,
	// whose rules CheckProfile applies at registration and the endpoints at every request.
	Profile string `json:"profile,omitempty" dynamodbav:"profile,omitempty"`
	// IDTokenSignedResponseAlg is the JWS algorithm of the client's id_tokens (OIDC Dynamic
	// Client Registration 2): "RS256", "PS256" or "ES256"; "" is DefaultIDTokenAlg (RS256).
	IDTokenSignedResponseAlg string `json:"id_token_signed_response_alg,omitempty" dynamodbav:"id_token_signed_response_alg,omitempty"`
	// DPoPBoundAccessTokens makes the client's token requests carry a DPoP proof (RFC 9449
	// 5.2): its tokens are always bound to a key it holds.
	DPoPBoundAccessTokens bool `json:"dpop_bound_access_tokens,omitempty" dynamodbav:"dpop_bound_access_tokens,omitempty"`
	// TokenEndpointAuthMethod is how the client authenticates (RFC 7591 2): "" is a secret
	// (client_secret_basic or client_secret_post) or, with a registered certificate,
	// tls_client_auth; AuthMethodPrivateKeyJWT is a JWT signed with a key of JWKS.
	TokenEndpointAuthMethod string `json:"token_endpoint_auth_method,omitempty" dynamodbav:"token_endpoint_auth_method,omitempty"`
	// JWKS is the client's public keys, inline (RFC 7591 2 jwks), for private_key_jwt.
	JWKS json.RawMessage `json:"jwks,omitempty" dynamodbav:"jwks,omitempty"`
	// JWKSURI is where the client publishes its public keys instead (RFC 7591 2 jwks_uri): an
	// https URL, fetched and cached by JWKSCache (client_keys.go); a client has jwks or
	// jwks_uri, never both.
	JWKSURI string `json:"jwks_uri,omitempty" dynamodbav:"jwks_uri,omitempty"`
	// RequireSignedRequestObject refuses the client's pushed authorization requests that do
	// not come as a signed request object (RFC 9101 10.5 require_signed_request_object; FAPI
	// 2.0 Message Signing (Final) 5.3.1-1). Off by default, for fapi2 clients too: the FAPI 2.0
	// Security Profile does not ask for it, Message Signing does. Needs the client's keys
	// (ValidRequestObjectSetting).
	RequireSignedRequestObject bool `json:"require_signed_request_object,omitempty" dynamodbav:"require_signed_request_object,omitempty"`
	// AuthorizationSignedResponseAlg is the JWS algorithm of the client's JARM responses
	// (JARM 3 authorization_signed_response_alg): "RS256", "PS256" or "ES256"; "" is the
	// default (Client.AuthorizationResponseAlg).
	AuthorizationSignedResponseAlg string `json:"authorization_signed_response_alg,omitempty" dynamodbav:"authorization_signed_response_alg,omitempty"`
	// IntrospectionSignedResponseAlg is the JWS algorithm of the client's JWT introspection
	// responses (RFC 9701 6 introspection_signed_response_alg); "" is the default
	// (Client.IntrospectionResponseAlg). When set, every introspection response to the client
	// is signed.
	IntrospectionSignedResponseAlg string `json:"introspection_signed_response_alg,omitempty" dynamodbav:"introspection_signed_response_alg,omitempty"`
	// AuthorizationDetailsTypes are the authorization_details types the client may ask for
	// (RFC 9396 10, client metadata authorization_details_types): each one the deployment
	// declares (rar.Registry); none, the default, refuses every authorization_details.
	AuthorizationDetailsTypes []string `json:"authorization_details_types,omitempty" dynamodbav:"authorization_details_types,omitempty"`

	// Dynamic client registration (RFC 7591, RFC 7592; shared/registration). A client an
	// operator registered has none of these. RegistrationTokenHash is the hash (HashToken) of
	// the registration access token that reads, replaces and deletes the client at its
	// registration_client_uri; "" refuses every such request. SoftwareID and SoftwareVersion
	// are RFC 7591 2's; SoftwareStatement is the statement the registration was made with, as
	// presented (RFC 7591 3.2.1 returns it unmodified), and Directory the issuer that signed it.
	RegistrationTokenHash string `json:"registration_token_hash,omitempty" dynamodbav:"registration_token_hash,omitempty"`
	SoftwareID            string `json:"software_id,omitempty" dynamodbav:"software_id,omitempty"`
	SoftwareVersion       string `json:"software_version,omitempty" dynamodbav:"software_version,omitempty"`
	SoftwareStatement     string `json:"software_statement,omitempty" dynamodbav:"software_statement,omitempty"`
	Directory             string `json:"directory,omitempty" dynamodbav:"directory,omitempty"`
	// GrantTypes are the grant types the client may use at the token endpoint (RFC 7591 2
	// grant_types, by their RFC names); empty is DefaultGrantTypes, what every client could use
	// before the field existed (AllowsGrantType).
	GrantTypes []string `json:"grant_types,omitempty" dynamodbav:"grant_types,omitempty"`

	// Logout (OpenID RP-Initiated Logout 1.0, Back-Channel Logout 1.0; shared/logout).
	//
	// PostLogoutRedirectURIs are where the end-session endpoint may send the browser back
	// after a logout the client asked for: exact matches only, with the rules of redirect URIs.
	PostLogoutRedirectURIs []string `json:"post_logout_redirect_uris,omitempty" dynamodbav:"post_logout_redirect_uris,omitempty"`
	// BackchannelLogoutURI is where a logout token is POSTed when a session the client has a
	// grant in ends: an https URL (ValidBackchannelLogoutURI), reached only at a public
	// address outside tests. Empty: the client is not told.
	BackchannelLogoutURI string `json:"backchannel_logout_uri,omitempty" dynamodbav:"backchannel_logout_uri,omitempty"`
	// BackchannelLogoutSessionRequired says the client needs the sid claim in its logout
	// tokens; every logout token carries it, so it is kept for the registration's answer.
	BackchannelLogoutSessionRequired bool `json:"backchannel_logout_session_required,omitempty" dynamodbav:"backchannel_logout_session_required,omitempty"`
	// LogoutRevokesGrants makes a logout revoke the client's grants given in the session that
	// ends (Keycloak's session-bound refresh tokens). Off by default: a grant is the
	// customer's consent to an app, which outlives the browser session it was given in
	// (Keycloak's offline tokens), and is withdrawn on the Connected apps page.
	LogoutRevokesGrants bool `json:"logout_revokes_grants,omitempty" dynamodbav:"logout_revokes_grants,omitempty"`
	// BackchannelTokenDeliveryMode is how a CIBA client learns its request is decided
	// (CIBA Core 4, backchannel_token_delivery_mode): CIBAModePoll or CIBAModePing; empty is
	// poll. BackchannelClientNotificationEndpoint is a ping client's endpoint (https, public
	// addresses only outside tests), BackchannelAuthenticationRequestSigningAlg the alg its
	// signed authentication requests use (empty: it may send unsigned ones, unless fapi2).
	BackchannelTokenDeliveryMode               string `json:"backchannel_token_delivery_mode,omitempty" dynamodbav:"backchannel_token_delivery_mode,omitempty"`
	BackchannelClientNotificationEndpoint      string `json:"backchannel_client_notification_endpoint,omitempty" dynamodbav:"backchannel_client_notification_endpoint,omitempty"`
	BackchannelAuthenticationRequestSigningAlg string `json:"backchannel_authentication_request_signing_alg,omitempty" dynamodbav:"backchannel_authentication_request_signing_alg,omitempty"`
}

// Grant types (RFC 7591 2 grant_types), as the token endpoint's registry names them.
const (
	GrantTypeAuthorizationCode = "authorization_code"
	GrantTypeRefreshToken      = "refresh_token"
	GrantTypeClientCredentials = "client_credentials"
)

// DefaultGrantTypes are the grant types of a client registered without grant_types.
var DefaultGrantTypes = []string{GrantTypeAuthorizationCode, GrantTypeRefreshToken}

// AllowsGrantType reports whether the client is registered for grant type gt (its GrantTypes,
// or DefaultGrantTypes when it lists none). client_credentials is never a default: a client
// gets tokens without a user only when registered for it.
func (c *Client) AllowsGrantType(gt string) bool {
	return slices.Contains(c.EffectiveGrantTypes(), gt)
}

// EffectiveGrantTypes are the grant types the client may use: GrantTypes, or
// DefaultGrantTypes when it lists none.
func (c *Client) EffectiveGrantTypes() []string {
	if len(c.GrantTypes) == 0 {
		return DefaultGrantTypes
	}
	return c.GrantTypes
}

// ValidRedirectURIsForGrants checks that a client registered for authorization_code has a
// redirect URI to send its codes to (RFC 6749 3.1.2.2); a client only for grants without a
// redirect (client_credentials) needs none.
func (c *Client) ValidRedirectURIsForGrants() error {
	if len(c.RedirectURIs) == 0 && c.AllowsGrantType(GrantTypeAuthorizationCode) {
		return errors.New("a client registered for authorization_code needs at least one redirect URI")
	}
	return nil
}

// ValidGrantTypes checks a client's grant_types at registration: each one of supported (the
// token endpoint's, tokenendpoint.GrantTypes), none twice. Empty is the default.
func ValidGrantTypes(types, supported []string) error {
	for i, t := range types {
		if !slices.Contains(supported, t) {
			return fmt.Errorf("grant_types: unknown grant type %q (supported: %s)", t, strings.Join(supported, " "))
		}
		if slices.Contains(types[:i], t) {
			return fmt.Errorf("grant_types: %q is listed twice", t)
		}
	}
	return nil
}

// HasPostLogoutRedirectURI reports an exact, case-sensitive match with a registered
// post_logout_redirect_uri (RP-Initiated Logout 1.0 3.1), as HasRedirectURI for redirect_uri.
func (c *Client) HasPostLogoutRedirectURI(uri string) bool {
	return uri != "" && slices.Contains(c.PostLogoutRedirectURIs, uri)
}

// ValidBackchannelLogoutURI checks a client's backchannel_logout_uri at registration: an
// absolute https URL with a host, no user information and no fragment (Back-Channel Logout
// 1.0 2.2; a query is allowed). Where it resolves to is checked when it is called.
func ValidBackchannelLogoutURI(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || len(raw) > maxJWKSURI || u.Scheme != "https" || u.Hostname() == "" || u.User != nil || u.Fragment != "" || strings.Contains(raw, "#") || u.Opaque != "" {
		return fmt.Errorf("backchannel_logout_uri %q must be an absolute https URL (no user information, no fragment, at most %d characters)", raw, maxJWKSURI)
	}
	return nil
}

// MaxRefreshReuseInterval caps Client.RefreshReuseInterval: a retry after a lost response
// comes within seconds, and a longer window only widens what a thief of a spent token and the
// client's credentials can do.
const MaxRefreshReuseInterval = 60 * time.Second

// ValidRefreshReuseInterval checks a retry window at registration: whole seconds, from zero
// (off) to MaxRefreshReuseInterval.
func ValidRefreshReuseInterval(d time.Duration) error {
	if d < 0 || d > MaxRefreshReuseInterval || d%time.Second != 0 {
		return fmt.Errorf("the refresh reuse interval must be a whole number of seconds from 0 (off) to %d", int(MaxRefreshReuseInterval/time.Second))
	}
	return nil
}

// Refresh token rotation settings (Client.RefreshTokenRotation).
const (
	// RotationOn: every refresh spends the refresh token presented and issues a new one; a
	// spent token presented again revokes the grant (RFC 9700 4.14.2).
	RotationOn = "on"
	// RotationOff: the refresh token stays valid until it expires or its grant is revoked;
	// each refresh issues a new access token only.
	RotationOff = "off"
)

// ValidRefreshTokenRotation checks a rotation setting at registration: "" (the profile's
// default), RotationOn or RotationOff.
func ValidRefreshTokenRotation(r string) error {
	switch r {
	case "", RotationOn, RotationOff:
		return nil
	}
	return fmt.Errorf("refresh token rotation must be %q or %q (empty: the profile's default)", RotationOn, RotationOff)
}

// RotatesRefreshTokens reports whether the client's refreshes rotate the refresh token. The
// default is rotation with reuse detection (RFC 9700 4.14.2), except for a FAPI 2.0 client:
// its refresh tokens are sender-constrained, so a stolen one is useless, and the FAPI 2.0
// Security Profile (Final) 5.3.2.1 says the authorization server shall not use refresh token
// rotation except in extraordinary circumstances. Such a client may opt in (RotationOn) with a
// retry window (CheckProfile).
func (c *Client) RotatesRefreshTokens() bool {
	switch c.RefreshTokenRotation {
	case RotationOn:
		return true
	case RotationOff:
		return false
	}
	return !c.IsFAPI2()
}

// SecretHash is one valid client secret, by hash, with an optional end of validity (a rotated
// secret's grace period).
type SecretHash struct {
	Hash      string    `json:"hash" dynamodbav:"hash"`
	ExpiresAt time.Time `json:"expires_at,omitzero" dynamodbav:"expires_at,omitempty"`
}

// HashSecret is the stored form of a client secret.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// VerifySecret reports whether secret is one of the client's valid secrets at now. Every stored
// hash is compared, in constant time, so the time taken says nothing of which one matched.
func (c *Client) VerifySecret(secret string, now time.Time) bool {
	if secret == "" {
		return false
	}
	enc := []byte(HashSecret(secret))
	ok := 0
	for _, h := range c.SecretHashes {
		match := constantTimeCompareString(enc, h.Hash)
		if !h.ExpiresAt.IsZero() && !now.Before(h.ExpiresAt) {
			match = 0
		}
		ok |= match
	}
	return ok == 1
}

// UsesMTLS reports whether the client authenticates with its certificate (RFC 8705).
func (c *Client) UsesMTLS() bool {
	return c.CertThumbprint != "" || c.CertSubjectDN != "" || c.CertSANDNS != "" || c.CertSANURI != "" ||
		c.CertSANIP != "" || c.CertSANEmail != ""
}

// HasRedirectURI reports an exact, case-sensitive, unnormalised match with a registered URI
// (RFC 9700 4.1.3): no prefix, wildcard, trailing-slash or case leniency.
func (c *Client) HasRedirectURI(uri string) bool {
	return uri != "" && slices.Contains(c.RedirectURIs, uri)
}
