package main

import (
	"encoding/json"
	"fmt"
	"github.com/go-jose/go-jose/v4"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// The views are what the tool shows of stored records: never a password hash, and of a
// client's secrets only how many there are and until when they are valid.

// secretView is one valid secret of a client, without its hash: "current" (no end of
// validity) or "grace" (a rotated-out secret, valid until expires_at; null for a current one).
type secretView struct {
	Status    string     `json:"status"`
	ExpiresAt *time.Time `json:"expires_at"`
}

type clientView struct {
	ClientID       string       `json:"client_id"`
	Name           string       `json:"name"`
	Disabled       bool         `json:"disabled"`
	RedirectURIs   []string     `json:"redirect_uris"`
	Scopes         []string     `json:"scopes"`
	LogoURI        string       `json:"logo_uri,omitempty"`
	AuthMethod     string       `json:"auth_method"`
	Secrets        []secretView `json:"secrets"`
	CertThumbprint string       `json:"cert_thumbprint,omitempty"`
	CertSubjectDN  string       `json:"cert_subject_dn,omitempty"`
	CertSANDNS     string       `json:"cert_san_dns,omitempty"`
	CertSANURI     string       `json:"cert_san_uri,omitempty"`
	CertSANIP      string       `json:"cert_san_ip,omitempty"`
	CertSANEmail   string       `json:"cert_san_email,omitempty"`
	RequirePKCE    bool         `json:"require_pkce"`
	RequirePAR     bool         `json:"require_pushed_authorization_requests"`
	CreatedAt      time.Time    `json:"created_at"`
	UpdatedAt      time.Time    `json:"updated_at"`

	// RefreshReuseIntervalSeconds is the refresh retry window; 0 is off.
	RefreshReuseIntervalSeconds int64 `json:"refresh_reuse_interval_seconds"`
	// RefreshTokenRotation is what the client's refreshes do: "on" or "off", the setting or
	// the profile's default.
	RefreshTokenRotation string `json:"refresh_token_rotation"`
	// Profile is the security profile (fapi2), omitted when none.
	Profile string `json:"profile,omitempty"`
	// IDTokenSignedResponseAlg is the algorithm of the client's id_tokens (RS256 when unset).
	IDTokenSignedResponseAlg string `json:"id_token_signed_response_alg"`
	// DPoPBoundAccessTokens: the client's token requests carry a DPoP proof.
	DPoPBoundAccessTokens bool `json:"dpop_bound_access_tokens"`
	// AuthorizationSignedResponseAlg and IntrospectionSignedResponseAlg are the algorithms of
	// the client's JARM and JWT introspection responses (their defaults when unset).
	AuthorizationSignedResponseAlg string `json:"authorization_signed_response_alg"`
	IntrospectionSignedResponseAlg string `json:"introspection_signed_response_alg"`
	// KeyIDs are the kids of a private_key_jwt client's registered public keys.
	KeyIDs []string `json:"jwks_kids,omitempty"`
	// JWKSURI is where a private_key_jwt client publishes its keys, when it registered one.
	JWKSURI string `json:"jwks_uri,omitempty"`

	// The logout settings (docs/api.md, "Logout").
	PostLogoutRedirectURIs           []string `json:"post_logout_redirect_uris,omitempty"`
	BackchannelLogoutURI             string   `json:"backchannel_logout_uri,omitempty"`
	BackchannelLogoutSessionRequired bool     `json:"backchannel_logout_session_required,omitempty"`
	LogoutRevokesGrants              bool     `json:"logout_revokes_grants"`

	BackchannelTokenDeliveryMode               string `json:"backchannel_token_delivery_mode,omitempty"`
	BackchannelClientNotificationEndpoint      string `json:"backchannel_client_notification_endpoint,omitempty"`
	BackchannelAuthenticationRequestSigningAlg string `json:"backchannel_authentication_request_signing_alg,omitempty"`

	// RequireSignedRequestObject: the client's pushed requests come as signed request objects.
	RequireSignedRequestObject bool `json:"require_signed_request_object"`
	// AuthorizationDetailsTypes are the authorization_details types the client may ask for.
	AuthorizationDetailsTypes []string `json:"authorization_details_types,omitempty"`
	// GrantTypes are the grant types the client may use (its own, or the default).
	GrantTypes []string `json:"grant_types"`
}

func viewClient(c oauth.Client) clientView {
	v := clientView{
		ClientID: c.ID, Name: c.Name, Disabled: c.Disabled, RedirectURIs: c.RedirectURIs, Scopes: c.Scopes,
		LogoURI: c.LogoURI, AuthMethod: oauth.AuthMethodSecretBasic + " " + oauth.AuthMethodSecretPost,
		Secrets: []secretView{}, CertThumbprint: c.CertThumbprint, CertSubjectDN: c.CertSubjectDN, RequirePKCE: c.RequirePKCE,
		CertSANDNS: c.CertSANDNS, CertSANURI: c.CertSANURI, CertSANIP: c.CertSANIP, CertSANEmail: c.CertSANEmail,
		RequirePAR: c.RequirePAR, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt,
		RefreshReuseIntervalSeconds:    int64(c.RefreshReuseInterval / time.Second),
		Profile:                        c.Profile,
		IDTokenSignedResponseAlg:       c.IDTokenSignedResponseAlg,
		DPoPBoundAccessTokens:          c.DPoPBoundAccessTokens,
		JWKSURI:                        c.JWKSURI,
		RequireSignedRequestObject:     c.RequireSignedRequestObject,
		AuthorizationSignedResponseAlg: c.AuthorizationResponseAlg(),
		IntrospectionSignedResponseAlg: c.IntrospectionResponseAlg(),
		AuthorizationDetailsTypes:      c.AuthorizationDetailsTypes,
		GrantTypes:                     c.EffectiveGrantTypes(),
	}
	if v.IDTokenSignedResponseAlg == "" {
		v.IDTokenSignedResponseAlg = oauth.DefaultIDTokenAlg
	}
	v.RefreshTokenRotation = oauth.RotationOff
	if c.RotatesRefreshTokens() {
		v.RefreshTokenRotation = oauth.RotationOn
	}
	if c.UsesMTLS() {
		v.AuthMethod = oauth.AuthMethodTLSClient
	}
	if c.UsesPrivateKeyJWT() {
		v.AuthMethod = oauth.AuthMethodPrivateKeyJWT
		var set jose.JSONWebKeySet
		_ = json.Unmarshal(c.JWKS, &set) // checked at registration
		for _, k := range set.Keys {
			v.KeyIDs = append(v.KeyIDs, k.KeyID)
		}
	}
	v.PostLogoutRedirectURIs, v.BackchannelLogoutURI = c.PostLogoutRedirectURIs, c.BackchannelLogoutURI
	v.BackchannelLogoutSessionRequired, v.LogoutRevokesGrants = c.BackchannelLogoutSessionRequired, c.LogoutRevokesGrants
	v.BackchannelTokenDeliveryMode, v.BackchannelClientNotificationEndpoint = c.BackchannelTokenDeliveryMode, c.BackchannelClientNotificationEndpoint
	v.BackchannelAuthenticationRequestSigningAlg = c.BackchannelAuthenticationRequestSigningAlg
	now := time.Now()
	for _, h := range c.SecretHashes {
		if h.ExpiresAt.IsZero() || now.Before(h.ExpiresAt) {
			sv := secretView{Status: "current"}
			if !h.ExpiresAt.IsZero() {
				until := h.ExpiresAt.UTC()
				sv.Status, sv.ExpiresAt = "grace", &until
			}
			v.Secrets = append(v.Secrets, sv)
		}
	}
	return v
}

func state(disabled bool) string {
	if disabled {
		return "disabled"
	}
	return "active"
}

func (v clientView) text(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "client_id:\t%s\n", v.ClientID)
	fmt.Fprintf(tw, "name:\t%s\n", v.Name)
	fmt.Fprintf(tw, "state:\t%s\n", state(v.Disabled))
	fmt.Fprintf(tw, "redirect_uris:\t%s\n", strings.Join(v.RedirectURIs, " "))
	fmt.Fprintf(tw, "scopes:\t%s\n", strings.Join(v.Scopes, " "))
	if v.LogoURI != "" {
		fmt.Fprintf(tw, "logo_uri:\t%s\n", v.LogoURI)
	}
	fmt.Fprintf(tw, "auth_method:\t%s\n", v.AuthMethod)
	if v.CertThumbprint != "" {
		fmt.Fprintf(tw, "cert_thumbprint:\t%s\n", v.CertThumbprint)
	}
	for _, kv := range [][2]string{{"cert_subject_dn", v.CertSubjectDN}, {"cert_san_dns", v.CertSANDNS},
		{"cert_san_uri", v.CertSANURI}, {"cert_san_ip", v.CertSANIP}, {"cert_san_email", v.CertSANEmail}} {
		if kv[1] != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
		}
	}
	if len(v.KeyIDs) > 0 {
		fmt.Fprintf(tw, "jwks_kids:\t%s\n", strings.Join(v.KeyIDs, " "))
	}
	if v.JWKSURI != "" {
		fmt.Fprintf(tw, "jwks_uri:\t%s\n", v.JWKSURI)
	}
	if v.DPoPBoundAccessTokens {
		fmt.Fprintf(tw, "dpop_bound_access_tokens:\ttrue\n")
	}
	fmt.Fprintf(tw, "require_pkce:\t%t\n", v.RequirePKCE)
	fmt.Fprintf(tw, "require_par:\t%t\n", v.RequirePAR)
	if v.RequireSignedRequestObject {
		fmt.Fprintf(tw, "require_signed_request_object:\ttrue\n")
	}
	if len(v.AuthorizationDetailsTypes) > 0 {
		fmt.Fprintf(tw, "authorization_details_types:\t%s\n", strings.Join(v.AuthorizationDetailsTypes, " "))
	}
	fmt.Fprintf(tw, "grant_types:\t%s\n", strings.Join(v.GrantTypes, " "))
	if v.AuthMethod != oauth.AuthMethodTLSClient && v.AuthMethod != oauth.AuthMethodPrivateKeyJWT {
		var s []string
		for _, x := range v.Secrets {
			if x.ExpiresAt == nil {
				s = append(s, "1 without expiry")
			} else {
				s = append(s, "1 valid until "+x.ExpiresAt.UTC().Format(time.RFC3339))
			}
		}
		fmt.Fprintf(tw, "secrets:\t%s\n", strings.Join(s, ", "))
	}
	fmt.Fprintf(tw, "refresh_token_rotation:\t%s\n", v.RefreshTokenRotation)
	if v.RefreshReuseIntervalSeconds > 0 {
		fmt.Fprintf(tw, "refresh_reuse_interval:\t%ds\n", v.RefreshReuseIntervalSeconds)
	} else {
		fmt.Fprintf(tw, "refresh_reuse_interval:\toff\n")
	}
	if v.Profile != "" {
		fmt.Fprintf(tw, "profile:\t%s\n", v.Profile)
	}
	fmt.Fprintf(tw, "id_token_alg:\t%s\n", v.IDTokenSignedResponseAlg)
	fmt.Fprintf(tw, "jarm_alg:\t%s\n", v.AuthorizationSignedResponseAlg)
	fmt.Fprintf(tw, "introspection_alg:\t%s\n", v.IntrospectionSignedResponseAlg)
	fmt.Fprintf(tw, "created_at:\t%s\n", stamp(v.CreatedAt))
	fmt.Fprintf(tw, "updated_at:\t%s\n", stamp(v.UpdatedAt))
	tw.Flush()
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

type userView struct {
	UID              string       `json:"uid"`
	Username         string       `json:"username"`
	Disabled         bool         `json:"disabled"`
	CompanyProfileID string       `json:"companyProfileId,omitempty"`
	CompanyUserID    string       `json:"companyUserId,omitempty"`
	Claims           oauth.Claims `json:"claims"`
	CreatedAt        time.Time    `json:"created_at"`
}

func viewUser(u oauth.User) userView {
	return userView{UID: u.UID, Username: u.Username, Disabled: u.Disabled, CompanyProfileID: u.CompanyProfileID,
		CompanyUserID: u.CompanyUserID, Claims: u.Claims, CreatedAt: u.CreatedAt}
}

func (v userView) text(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(k, val string) {
		if val != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, val)
		}
	}
	line("uid", v.UID)
	line("username", v.Username)
	line("state", state(v.Disabled))
	line("companyProfileId", v.CompanyProfileID)
	line("companyUserId", v.CompanyUserID)
	c := v.Claims
	line("email", c.Email)
	if c.Email != "" {
		line("email_verified", fmt.Sprint(c.EmailVerified))
	}
	line("phone", c.Phone)
	line("name", c.Name)
	line("given_name", c.GivenName)
	line("family_name", c.FamilyName)
	line("birthdate", c.Birthdate)
	line("gender", c.Gender)
	line("picture", c.Picture)
	line("locale", c.Locale)
	line("zone_info", c.ZoneInfo)
	if c.UpdatedAt != 0 {
		line("claims_updated_at", time.Unix(c.UpdatedAt, 0).UTC().Format(time.RFC3339))
	}
	line("created_at", stamp(v.CreatedAt))
	tw.Flush()
}

type grantView struct {
	ID         string    `json:"id"`
	ClientID   string    `json:"client_id"`
	UID        string    `json:"uid"`
	Scopes     []string  `json:"scopes"`
	AuthTime   time.Time `json:"auth_time"`
	CreatedAt  time.Time `json:"created_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	CertBound  bool      `json:"cert_bound"`
	LiveTokens int       `json:"live_tokens"`
	// LastUsedAt is the grant's last use (oauth.GrantRecord.LastUsed);
	// ConsumedAt, a payment grant's use; Revoked, a withdrawn or revoked grant (grants show).
	LastUsedAt time.Time `json:"last_used_at,omitzero"`
	ConsumedAt time.Time `json:"consumed_at,omitzero"`
	Revoked    bool      `json:"revoked,omitempty"`
	// AuthorizationDetails are the granted RFC 9396 details, as stored (JSON).
	AuthorizationDetails json.RawMessage `json:"authorization_details,omitempty"`
}

func viewGrant(r oauth.GrantRecord) grantView {
	g := r.Grant
	last := r.LastUsed()
	if r.Revoked && g.ClientID == "" {
		last = time.Time{} // a tombstone: never used
	}
	return grantView{ID: g.ID, ClientID: g.ClientID, UID: g.UID, Scopes: g.Scopes, AuthTime: g.AuthTime,
		CreatedAt: g.CreatedAt, ExpiresAt: g.ExpiresAt, CertBound: g.CertThumbprint != "", LiveTokens: len(r.Tokens),
		LastUsedAt: last, ConsumedAt: r.ConsumedAt, Revoked: r.Revoked, AuthorizationDetails: g.AuthorizationDetails}
}

type keyView struct {
	Kid         string    `json:"kid"`
	Alg         string    `json:"alg"`
	State       string    `json:"state"`
	Ref         string    `json:"ref"`
	CreatedAt   time.Time `json:"created_at"`
	ActivatedAt time.Time `json:"activated_at,omitzero"`
	RetiredAt   time.Time `json:"retired_at,omitzero"`
	DeletedAt   time.Time `json:"deleted_at,omitzero"`
}

func viewKey(k oauth.SigningKey) keyView {
	return keyView{Kid: k.Kid, Alg: k.Algorithm(), State: k.State, Ref: k.Ref, CreatedAt: k.CreatedAt, ActivatedAt: k.ActivatedAt,
		RetiredAt: k.RetiredAt, DeletedAt: k.DeletedAt}
}

// table writes rows under a header, aligned.
func table(w io.Writer, header []string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
}
