// Package seed loads clients and users from a JSON file into a store, idempotently: the local
// server loads one at start, and tests and operators script their fixtures with it.
package seed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/oauth/rar"
	"github.com/acmebank/authserver/shared/tokenendpoint"
)

// File is the seed file's shape.
type File struct {
	Clients []Client `json:"clients"`
	Users   []User   `json:"users"`
}

// Client is a client to register. The secret is hashed before it is stored.
type Client struct {
	ClientID string `json:"client_id"`
	// ClientSecret is required unless the client authenticates with private_key_jwt.
	ClientSecret string   `json:"client_secret,omitempty"`
	Name         string   `json:"name"`
	RedirectURIs []string `json:"redirect_uris"`
	Scopes       []string `json:"scopes"`
	LogoURI      string   `json:"logo_uri,omitempty"`
	// RequirePKCE: the client's authorization requests must carry a code_challenge. Off unless
	// set, so the documented requests without PKCE keep working for clients seeded this way.
	RequirePKCE bool `json:"require_pkce,omitempty"`
	// RequirePAR: the client's authorization requests must be pushed first (RFC 9126).
	RequirePAR bool `json:"require_pushed_authorization_requests,omitempty"`
	// RefreshReuseIntervalSeconds is the client's refresh retry window (0, the default, is
	// off; at most 60).
	RefreshReuseIntervalSeconds int64 `json:"refresh_reuse_interval_seconds,omitempty"`
	// RefreshTokenRotation is "on", "off", or absent for the profile's default (off for
	// fapi2, FAPI 2.0 5.3.2.1; on otherwise).
	RefreshTokenRotation string `json:"refresh_token_rotation,omitempty"`
	// Profile is the client's security profile: "fapi2" holds the rest of the entry to the
	// FAPI 2.0 rules (oauth.Client.CheckProfile), "" or absent is none.
	Profile string `json:"profile,omitempty"`
	// IDTokenSignedResponseAlg is the client's id_token algorithm: RS256 (the default when
	// absent), PS256 or ES256.
	IDTokenSignedResponseAlg string `json:"id_token_signed_response_alg,omitempty"`
	// DPoPBoundAccessTokens: the client's token requests must carry a DPoP proof (RFC 9449).
	DPoPBoundAccessTokens bool `json:"dpop_bound_access_tokens,omitempty"`
	// TokenEndpointAuthMethod is "private_key_jwt" for a client that authenticates with a
	// signed assertion, with its public keys in JWKS (and no client_secret); absent, a secret.
	TokenEndpointAuthMethod string          `json:"token_endpoint_auth_method,omitempty"`
	JWKS                    json.RawMessage `json:"jwks,omitempty"`
	// JWKSURI is where such a client publishes its keys instead (RFC 7591 2 jwks_uri). A seed
	// is not fetched when loaded: the server fetches it at first use (authctl fetches at
	// registration).
	JWKSURI string `json:"jwks_uri,omitempty"`
	// RequireSignedRequestObject: the client's pushed requests must be signed request objects
	// (RFC 9101 10.5); it needs private_key_jwt (jwks or jwks_uri).
	RequireSignedRequestObject bool `json:"require_signed_request_object,omitempty"`
	// AuthorizationDetailsTypes are the authorization_details types the client may ask for
	// (RFC 9396 10), each one the deployment declares (rar.Shipped).
	AuthorizationDetailsTypes []string `json:"authorization_details_types,omitempty"`
	// GrantTypes are the grant types the client may use (RFC 7591 grant_types), each one the
	// token endpoint accepts; empty is oauth.DefaultGrantTypes.
	GrantTypes []string `json:"grant_types,omitempty"`
	// The client's logout settings (oauth.Client): registered post_logout_redirect_uris (the
	// rules of redirect URIs), an https backchannel_logout_uri, and whether a logout revokes
	// its grants given in the session.
	PostLogoutRedirectURIs           []string `json:"post_logout_redirect_uris,omitempty"`
	BackchannelLogoutURI             string   `json:"backchannel_logout_uri,omitempty"`
	BackchannelLogoutSessionRequired bool     `json:"backchannel_logout_session_required,omitempty"`
	LogoutRevokesGrants              bool     `json:"logout_revokes_grants,omitempty"`
	// The client's CIBA settings (oauth.Client, checked by ValidBackchannelSettings): poll or
	// ping, a ping client's https notification endpoint, the alg of its signed requests.
	BackchannelTokenDeliveryMode               string `json:"backchannel_token_delivery_mode,omitempty"`
	BackchannelClientNotificationEndpoint      string `json:"backchannel_client_notification_endpoint,omitempty"`
	BackchannelAuthenticationRequestSigningAlg string `json:"backchannel_authentication_request_signing_alg,omitempty"`
}

// User is a user to create. The password is hashed before it is stored.
type User struct {
	UID              string `json:"uid"`
	Username         string `json:"username"`
	Password         string `json:"password"`
	Email            string `json:"email"`
	EmailVerified    bool   `json:"email_verified"`
	Phone            string `json:"phone"`
	Name             string `json:"name"`
	GivenName        string `json:"given_name"`
	FamilyName       string `json:"family_name"`
	Birthdate        string `json:"birthdate"`
	Gender           string `json:"gender"`
	Picture          string `json:"picture"`
	Locale           string `json:"locale"`
	UpdatedAt        int64  `json:"updated_at"`
	ZoneInfo         string `json:"zone_info"`
	CompanyProfileID string `json:"companyProfileId"`
	CompanyUserID    string `json:"companyUserId"`
}

// Parse decodes a seed file strictly: unknown fields and trailing data are errors, so a typo
// does not silently drop a setting.
func Parse(data []byte) (*File, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("seed file: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("seed file: trailing data after the JSON object")
	}
	for i, c := range f.Clients {
		if err := c.validate(); err != nil {
			return nil, fmt.Errorf("seed file: clients[%d]: %w", i, err)
		}
	}
	for i, u := range f.Users {
		if u.UID == "" || u.Username == "" || u.Password == "" {
			return nil, fmt.Errorf("seed file: users[%d]: uid, username and password are required", i)
		}
	}
	return &f, nil
}

func (c Client) validate() error {
	keyed := c.TokenEndpointAuthMethod == oauth.AuthMethodPrivateKeyJWT
	if c.ClientID == "" || c.Name == "" || (c.ClientSecret == "" && !keyed) {
		return errors.New("client_id, client_secret (unless token_endpoint_auth_method is private_key_jwt) and name are required")
	}
	if keyed && c.ClientSecret != "" {
		return errors.New("a private_key_jwt client has no client_secret")
	}
	if !keyed && len(c.ClientSecret) < 32 {
		return errors.New("client_secret must have at least 32 characters")
	}
	probe := oauth.Client{TokenEndpointAuthMethod: c.TokenEndpointAuthMethod, JWKS: c.JWKS, JWKSURI: c.JWKSURI}
	if err := probe.ValidTokenEndpointAuthMethod(); err != nil {
		return err
	}
	if err := (&oauth.Client{RedirectURIs: c.RedirectURIs, GrantTypes: c.GrantTypes}).ValidRedirectURIsForGrants(); err != nil {
		return err
	}
	for _, u := range c.RedirectURIs {
		if err := ValidateRedirectURI(u); err != nil {
			return err
		}
	}
	for _, s := range c.Scopes {
		if !oauth.IsKnownScope(s) {
			return fmt.Errorf("unknown scope %q", s)
		}
	}
	if err := oauth.ValidProfile(c.Profile); err != nil {
		return err
	}
	if err := oauth.ValidRefreshTokenRotation(c.RefreshTokenRotation); err != nil {
		return err
	}
	details, err := rar.Shipped()
	if err != nil {
		return err
	}
	if err := oauth.ValidAuthorizationDetailsTypes(details, c.AuthorizationDetailsTypes); err != nil {
		return err
	}
	if err := oauth.ValidGrantTypes(c.GrantTypes, tokenendpoint.GrantTypes()); err != nil {
		return err
	}
	for _, u := range c.PostLogoutRedirectURIs {
		if err := ValidateRedirectURI(u); err != nil {
			return fmt.Errorf("post_logout_redirect_uri: %w", err)
		}
	}
	if c.BackchannelLogoutURI != "" {
		if err := oauth.ValidBackchannelLogoutURI(c.BackchannelLogoutURI); err != nil {
			return err
		}
	}
	if n := c.RefreshReuseIntervalSeconds; n < 0 || n > int64(oauth.MaxRefreshReuseInterval/time.Second) {
		return oauth.ValidRefreshReuseInterval(-1)
	}
	// Every supported algorithm here; Load checks the deployment's own list.
	return keys.ValidClientAlg(c.IDTokenSignedResponseAlg, nil)
}

// ValidateRedirectURI checks a URI before it is registered: absolute, no fragment, https except
// on a loopback host (RFC 8252 7.3), or a private-use scheme of a native app.
func ValidateRedirectURI(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() {
		return fmt.Errorf("redirect URI %q must be an absolute URI", raw)
	}
	if u.Fragment != "" || u.RawFragment != "" || bytes.ContainsRune([]byte(raw), '#') {
		return fmt.Errorf("redirect URI %q must not have a fragment", raw)
	}
	if u.User != nil {
		return fmt.Errorf("redirect URI %q must not carry user information", raw)
	}
	switch u.Scheme {
	case "https":
		if u.Host == "" {
			return fmt.Errorf("redirect URI %q has no host", raw)
		}
	case "http":
		switch u.Hostname() {
		case "127.0.0.1", "::1", "localhost":
		default:
			return fmt.Errorf("redirect URI %q must use https (plain http only on a loopback host)", raw)
		}
	case "javascript", "data", "file", "vbscript":
		return fmt.Errorf("redirect URI %q uses a forbidden scheme", raw)
	}
	return nil
}

// CheckIDTokenAlgs reports a client whose id_token_signed_response_alg is not one of the
// deployment's algorithms (AUTH_ID_TOKEN_ALGS), before anything is loaded.
func (f *File) CheckIDTokenAlgs(configured []string) error {
	for i, c := range f.Clients {
		if err := keys.ValidClientAlg(c.IDTokenSignedResponseAlg, configured); err != nil {
			return fmt.Errorf("seed file: clients[%d] (%s): %w", i, c.ClientID, err)
		}
	}
	return nil
}

// Report counts what a load did.
type Report struct {
	ClientsCreated, ClientsUpdated, UsersCreated, UsersUpdated int
}

// Load applies f to the store: clients and users that do not exist are created; existing ones
// are updated to match the file (a password is re-hashed only when it changed), so loading the
// same file twice changes nothing.
func Load(ctx context.Context, st interface {
	oauth.ClientStore
	oauth.UserStore
}, f *File, hasher authn.Hasher, now time.Time) (Report, error) {
	var rep Report
	for _, c := range f.Clients {
		created, err := loadClient(ctx, st, c, now)
		if err != nil {
			return rep, fmt.Errorf("client %s: %w", c.ClientID, err)
		}
		if created {
			rep.ClientsCreated++
		} else {
			rep.ClientsUpdated++
		}
	}
	for _, u := range f.Users {
		created, err := loadUser(ctx, st, u, hasher, now)
		if err != nil {
			return rep, fmt.Errorf("user %s: %w", u.UID, err)
		}
		if created {
			rep.UsersCreated++
		} else {
			rep.UsersUpdated++
		}
	}
	return rep, nil
}

func loadClient(ctx context.Context, st oauth.ClientStore, c Client, now time.Time) (bool, error) {
	apply := func(cl oauth.Client) oauth.Client {
		cl.Name, cl.RedirectURIs, cl.Scopes, cl.LogoURI = c.Name, c.RedirectURIs, c.Scopes, c.LogoURI
		cl.RequirePKCE = c.RequirePKCE
		cl.RequirePAR = c.RequirePAR
		cl.SecretHashes = []oauth.SecretHash{}
		if c.ClientSecret != "" {
			cl.SecretHashes = []oauth.SecretHash{{Hash: oauth.HashSecret(c.ClientSecret)}}
		}
		cl.TokenEndpointAuthMethod, cl.JWKS = c.TokenEndpointAuthMethod, c.JWKS
		cl.JWKSURI = c.JWKSURI
		cl.RefreshReuseInterval = time.Duration(c.RefreshReuseIntervalSeconds) * time.Second
		cl.RefreshTokenRotation = c.RefreshTokenRotation
		cl.Profile = c.Profile
		cl.IDTokenSignedResponseAlg = c.IDTokenSignedResponseAlg
		cl.DPoPBoundAccessTokens = c.DPoPBoundAccessTokens
		cl.RequireSignedRequestObject = c.RequireSignedRequestObject
		cl.AuthorizationDetailsTypes = c.AuthorizationDetailsTypes
		cl.GrantTypes = c.GrantTypes
		cl.PostLogoutRedirectURIs, cl.BackchannelLogoutURI = c.PostLogoutRedirectURIs, c.BackchannelLogoutURI
		cl.BackchannelLogoutSessionRequired, cl.LogoutRevokesGrants = c.BackchannelLogoutSessionRequired, c.LogoutRevokesGrants
		cl.BackchannelTokenDeliveryMode = c.BackchannelTokenDeliveryMode
		cl.BackchannelClientNotificationEndpoint = c.BackchannelClientNotificationEndpoint
		cl.BackchannelAuthenticationRequestSigningAlg = c.BackchannelAuthenticationRequestSigningAlg
		cl.ApplyProfileDefaults()
		cl.UpdatedAt = now
		return cl
	}
	// The profile's rules are checked on the client as it would be stored, before anything is.
	probe := apply(oauth.Client{ID: c.ClientID})
	if err := probe.CheckProfile(); err != nil {
		return false, err
	}
	if err := probe.ValidRequestObjectSetting(); err != nil {
		return false, err
	}
	if err := probe.ValidBackchannelSettings(); err != nil {
		return false, err
	}
	err := st.CreateClient(ctx, apply(oauth.Client{ID: c.ClientID, CreatedAt: now}))
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, oauth.ErrAlreadyExists) {
		return false, err
	}
	return false, st.UpdateClient(ctx, c.ClientID, func(old oauth.Client) (oauth.Client, error) { return apply(old), nil })
}

func loadUser(ctx context.Context, st oauth.UserStore, u User, hasher authn.Hasher, now time.Time) (bool, error) {
	claims := oauth.Claims{
		Email: u.Email, EmailVerified: u.EmailVerified, Phone: u.Phone, Name: u.Name, GivenName: u.GivenName,
		FamilyName: u.FamilyName, Birthdate: u.Birthdate, Gender: u.Gender, Picture: u.Picture, Locale: u.Locale,
		UpdatedAt: u.UpdatedAt, ZoneInfo: u.ZoneInfo,
	}
	user := oauth.User{
		UID: u.UID, Username: authn.NormalizeUsername(u.Username),
		CompanyProfileID: u.CompanyProfileID, CompanyUserID: u.CompanyUserID, Claims: claims, CreatedAt: now,
	}
	existing, err := st.GetUser(ctx, u.UID)
	if errors.Is(err, oauth.ErrNotFound) {
		user.PasswordHash = hasher.Hash(u.Password)
		return true, st.CreateUser(ctx, user)
	}
	if err != nil {
		return false, err
	}
	if existing.Username != user.Username {
		return false, fmt.Errorf("uid %s exists with another username", u.UID)
	}
	return false, st.UpdateUser(ctx, u.UID, func(old oauth.User) (oauth.User, error) {
		// Hashing is the cost of a load: an unchanged password keeps its hash, unhashed again.
		user.PasswordHash = old.PasswordHash
		if ok, _ := hasher.Verify(u.Password, old.PasswordHash); !ok {
			user.PasswordHash = hasher.Hash(u.Password)
		}
		user.CreatedAt, user.Disabled = old.CreatedAt, old.Disabled
		return user, nil
	})
}
