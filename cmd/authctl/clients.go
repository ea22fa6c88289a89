package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/acmebank/authserver/shared/admin"
	"github.com/acmebank/authserver/shared/oauth"
)

func (c *cli) clientsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "clients",
		Aliases: []string{"client"},
		Short:   "Register and manage client applications",
		RunE:    groupRun,
	}
	cmd.AddCommand(c.clientsCreate(), c.clientsList(), c.clientsShow(), c.clientsUpdate(), c.clientsRotate(),
		c.clientsDisable(), c.clientsEnable(), c.clientsDelete(), c.clientsKeygen())
	return cmd
}

// refreshReuseUsage describes the --refresh-reuse-interval flag of create and update.
const refreshReuseUsage = "refresh retry window, e.g. 30s: within it of a refresh, the client may repeat the same refresh token once (after a lost response) without losing the grant; 0 is off, at most 60s"

// rotationUsage describes the --refresh-token-rotation flag of create and update.
const rotationUsage = "refresh token rotation: on (each refresh issues a new refresh token; reuse of a spent one revokes the grant), off (the refresh token keeps working until it expires or is revoked), or empty for the profile's default (off for fapi2, FAPI 2.0 5.3.2.1; on otherwise)"

// profileUsage describes the --profile flag of create and update.
const authMethodUsage = "how the client authenticates: private_key_jwt (with --jwks-file or --jwks-uri; no secret is issued), tls_client_auth (with --cert-subject-dn or one --cert-san-*), or empty for a secret"

const jwksFileUsage = "file with the client's public JWK Set (private_key_jwt): RSA 2048+ or EC P-256 keys, each with a kid"

// jwksURIUsage describes the --jwks-uri flag of create and update.
const jwksURIUsage = "https URL where the client publishes its public JWK Set (private_key_jwt; instead of --jwks-file, RFC 7591 jwks_uri): fetched now and refused if unreachable, invalid or holding a private key; the server refetches it on a new kid"

// requireJARUsage describes the --require-signed-request-object flag of create and update.
const requireJARUsage = "accept the client's pushed authorization requests only as a signed request object (RFC 9101 require_signed_request_object, FAPI 2.0 Message Signing); needs --auth-method private_key_jwt"

const profileUsage = "security profile: fapi2 (FAPI 2.0: the registration must meet its rules) or empty for none"

// secretNotice is said once, with every secret the tool prints.
const secretNotice = "The client secret is shown only now: the store keeps its hash. Hand it to the client over a secure channel; if it is lost, rotate it."

// createdClient is the JSON output of create and rotate-secret: the only time the secret is shown.
type createdClient struct {
	Client       clientView `json:"client"`
	ClientSecret string     `json:"client_secret,omitempty"`
}

func (c *cli) clientsCreate() *cobra.Command {
	var spec admin.ClientSpec
	var scopes []string
	var requirePKCE, noPKCE bool
	var jwksFile string
	cmd := &cobra.Command{
		Use:   "create --name NAME [--redirect-uri URI...] --scope SCOPE...",
		Short: "Register a client; prints its client_id and secret once",
		Long: `Register a client application. The client_id is generated (cl_...) unless --id is given,
and so is the secret (cs1_...), printed once: the store keeps only its SHA-256 hash.

Redirect URIs must be absolute, without a fragment, and https except on a loopback host
(http://127.0.0.1, http://[::1], http://localhost); they are matched exactly. Scopes are from:
` + strings.Join(oauth.KnownScopes, " ") + ` (bank:transfers.write is the same scope as
bank:transfers:write).

A client registered with --cert-thumbprint (self_signed_tls_client_auth) or with exactly one
of --cert-subject-dn, --cert-san-dns, --cert-san-uri, --cert-san-ip, --cert-san-email
(tls_client_auth, RFC 8705 2.1.2) authenticates with its TLS certificate and gets no secret.
The subject DN is an RFC 4514 string compared attribute by attribute with the certificate's
subject (attribute names or OIDs, organizationIdentifier included; case and extra spaces do
not matter).

The client must send PKCE (a code_challenge, S256) with every authorization request
(--require-pkce, the default), unless --no-require-pkce is given (for an application that
cannot yet).

--profile fapi2 registers a FAPI 2.0 client: it must push its authorization requests (stored
on whether or not --require-par is given, FAPI 2.0 5.3.2.2), and the registration is refused
unless it also requires PKCE S256, sender-constrained tokens (DPoP, or a registered
certificate), private_key_jwt or tls_client_auth, and a PS256 or ES256 id_token. Its refresh
tokens do not rotate (FAPI 2.0 5.3.2.1) unless --refresh-token-rotation on is given, which
needs a --refresh-reuse-interval (docs/api.md).

--id-token-alg chooses the algorithm of the client's id_tokens (id_token_signed_response_alg):
RS256 (the default), PS256 or ES256 (what FAPI 2.0 requires), one of AUTH_ID_TOKEN_ALGS.
--authorization-response-alg and --introspection-response-alg choose the algorithms of its
signed authorization responses (JARM, response_mode=jwt) and JWT introspection responses
(RFC 9701), from the same list: RS256 by default, the id_token's for a fapi2 client.`,
		Example: `  authctl clients create --name "Acme Books" \
    --redirect-uri https://books.example/oauth/callback \
    --scope openid,email,profile,bank:transfers:write
  authctl clients create --id acme-books --name "Acme Books" --redirect-uri http://127.0.0.1:4499/cb --scope openid -o json`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec.Scopes = splitList(scopes)
			spec.RequirePKCE = requirePKCE && !noPKCE
			if jwksFile != "" {
				b, err := os.ReadFile(jwksFile)
				if err != nil {
					return usagef("--jwks-file: %v", err)
				}
				spec.JWKS = b
			}
			adm, err := c.admin(cmd.Context(), newStoreAllowed)
			if err != nil {
				return err
			}
			cl, secret, err := adm.CreateClient(cmd.Context(), spec)
			if err != nil {
				return err
			}
			err = c.emit(createdClient{Client: viewClient(cl), ClientSecret: secret}, func(w io.Writer) {
				fmt.Fprintf(w, "client_id:     %s\n", cl.ID)
				if secret != "" {
					fmt.Fprintf(w, "client_secret: %s\n", secret)
				}
			})
			if secret != "" {
				c.note("%s", secretNotice)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&spec.ID, "id", "", "client_id to register (default: generated)")
	f.StringVar(&spec.Name, "name", "", "name shown to users on the consent page (required)")
	f.StringArrayVar(&spec.RedirectURIs, "redirect-uri", nil, "a registered redirect URI (repeat for more; required unless --grant-types leaves out authorization_code)")
	f.StringSliceVar(&scopes, "scope", nil, "scopes the client may request (comma-separated or repeated; required)")
	f.StringVar(&spec.LogoURI, "logo-uri", "", "https URL of the client's logo for the consent page")
	f.StringVar(&spec.CertThumbprint, "cert-thumbprint", "", "register for mutual TLS: base64url SHA-256 of the client's certificate")
	f.StringVar(&spec.CertSubjectDN, "cert-subject-dn", "", "register for mutual TLS (tls_client_auth_subject_dn): the client certificate's subject DN as an RFC 4514 string, e.g. 'CN=app,organizationIdentifier=PSDGB-FCA-123456,O=Fintech Ltd,C=GB'")
	f.BoolVar(&requirePKCE, "require-pkce", true, "require PKCE S256 in the client's authorization requests (the default)")
	f.StringVar(&spec.CertSANDNS, "cert-san-dns", "", "register for mutual TLS (tls_client_auth_san_dns): a DNS name in the client certificate's subjectAltName")
	f.StringVar(&spec.CertSANURI, "cert-san-uri", "", "register for mutual TLS (tls_client_auth_san_uri): a URI in the client certificate's subjectAltName")
	f.StringVar(&spec.CertSANIP, "cert-san-ip", "", "register for mutual TLS (tls_client_auth_san_ip): an IP address in the client certificate's subjectAltName")
	f.StringVar(&spec.CertSANEmail, "cert-san-email", "", "register for mutual TLS (tls_client_auth_san_email): an email address in the client certificate's subjectAltName")
	f.BoolVar(&noPKCE, "no-require-pkce", false, "accept the client's authorization requests without PKCE (default: required)")
	f.BoolVar(&spec.RequirePAR, "require-par", false, "accept only pushed authorization requests (RFC 9126 PAR) from the client (always on for --profile fapi2)")
	f.BoolVar(&spec.RequireSignedRequestObject, "require-signed-request-object", false, requireJARUsage)
	f.BoolVar(&spec.DPoPBoundAccessTokens, "dpop", false, "bind the client's tokens to a DPoP key: its token requests must carry a DPoP proof (RFC 9449)")
	f.StringVar(&spec.TokenEndpointAuthMethod, "auth-method", "", authMethodUsage)
	f.StringVar(&jwksFile, "jwks-file", "", jwksFileUsage)
	f.StringVar(&spec.JWKSURI, "jwks-uri", "", jwksURIUsage)
	f.DurationVar(&spec.RefreshReuseInterval, "refresh-reuse-interval", 0, refreshReuseUsage)
	f.StringVar(&spec.RefreshTokenRotation, "refresh-token-rotation", "", rotationUsage)
	f.StringVar(&spec.Profile, "profile", "", profileUsage)
	f.StringVar(&spec.IDTokenSignedResponseAlg, "id-token-alg", "", idTokenAlgUsage)
	f.StringVar(&spec.AuthorizationSignedResponseAlg, "authorization-response-alg", "", authzResponseAlgUsage)
	f.StringVar(&spec.IntrospectionSignedResponseAlg, "introspection-response-alg", "", introspectionResponseAlgUsage)
	f.StringSliceVar(&spec.AuthorizationDetailsTypes, "authorization-details-types", nil, detailsTypesUsage)
	f.StringSliceVar(&spec.GrantTypes, "grant-types", nil, grantTypesUsage)
	f.StringArrayVar(&spec.PostLogoutRedirectURIs, "post-logout-redirect-uri", nil, postLogoutUsage)
	f.StringVar(&spec.BackchannelLogoutURI, "backchannel-logout-uri", "", backchannelUsage)
	f.BoolVar(&spec.BackchannelLogoutSessionRequired, "backchannel-logout-session-required", false, backchannelSessionUsage)
	f.BoolVar(&spec.LogoutRevokesGrants, "logout-revokes-grants", false, logoutRevokesUsage)
	f.StringVar(&spec.BackchannelTokenDeliveryMode, "backchannel-delivery-mode", "", cibaModeUsage)
	f.StringVar(&spec.BackchannelClientNotificationEndpoint, "backchannel-notification-endpoint", "", cibaEndpointUsage)
	f.StringVar(&spec.BackchannelAuthenticationRequestSigningAlg, "backchannel-signing-alg", "", cibaAlgUsage)
	cmd.MarkFlagRequired("name")
	cmd.MarkFlagRequired("scope")
	cmd.MarkFlagsMutuallyExclusive("require-pkce", "no-require-pkce")
	return cmd
}

func (c *cli) clientsList() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the registered clients",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			adm, err := c.admin(cmd.Context(), existingStore)
			if err != nil {
				return err
			}
			list, err := adm.ListClients(cmd.Context())
			if err != nil {
				return err
			}
			views := make([]clientView, 0, len(list))
			for _, cl := range list {
				views = append(views, viewClient(cl))
			}
			return c.emit(views, func(w io.Writer) {
				rows := make([][]string, 0, len(views))
				for _, v := range views {
					rows = append(rows, []string{v.ClientID, v.Name, state(v.Disabled), strings.Join(v.Scopes, " "), strings.Join(v.RedirectURIs, " ")})
				}
				table(w, []string{"CLIENT_ID", "NAME", "STATE", "SCOPES", "REDIRECT_URIS"}, rows)
			})
		},
	}
}

func (c *cli) clientsShow() *cobra.Command {
	return &cobra.Command{
		Use:   "show CLIENT_ID",
		Short: "Show a client (never its secret)",
		Args:  exactArgs("CLIENT_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, err := c.admin(cmd.Context(), existingStore)
			if err != nil {
				return err
			}
			cl, err := adm.GetClient(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			v := viewClient(cl)
			return c.emit(v, v.text)
		},
	}
}

func (c *cli) clientsUpdate() *cobra.Command {
	var name, logo, profile string
	var requirePKCE, requirePAR, requireJAR, dpop bool
	var authMethod, jwksFile, jwksURI string
	var reuse time.Duration
	var idTokenAlg, rotation string
	var authzAlg, introspectAlg string
	var postLogout []string
	var backchannel string
	var backchannelSession, logoutRevokes bool
	var cibaMode, cibaEndpoint, cibaAlg string
	var detailsTypes []string
	var grantTypes []string
	var ch admin.ClientChanges
	var setURIs, scopes, addScopes, removeScopes []string
	cmd := &cobra.Command{
		Use:   "update CLIENT_ID [flags]",
		Short: "Change a client's name, logo, redirect URIs or scopes",
		Long: `Change a client's name, logo, redirect URIs or allowed scopes. --redirect-uri and --scope
replace the whole list; --add-* and --remove-* edit it. A client keeps at least one of each.

Narrowing the scopes or redirect URIs applies to new authorizations; grants already given keep
their scopes until they are revoked (authctl grants revoke-all --client ID). A running server
sees the change within AUTH_CLIENT_CACHE_TTL (30s by default).`,
		Example: `  authctl clients update cl_x --add-redirect-uri https://books.example/cb2
  authctl clients update cl_x --remove-scope bank:transfers:write
  authctl clients update cl_x --scope openid,email --name "Acme Books (EU)"`,
		Args: exactArgs("CLIENT_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			fl := cmd.Flags()
			if fl.Changed("name") {
				ch.Name = &name
			}
			if fl.Changed("logo-uri") {
				ch.LogoURI = &logo
			}
			if fl.Changed("refresh-reuse-interval") {
				ch.RefreshReuseInterval = &reuse
			}
			if fl.Changed("refresh-token-rotation") {
				ch.RefreshTokenRotation = &rotation
			}
			if fl.Changed("redirect-uri") {
				ch.RedirectURIs = setURIs
			}
			if fl.Changed("scope") {
				ch.Scopes = splitList(scopes)
			}
			ch.AddScopes, ch.RemoveScopes = splitList(addScopes), splitList(removeScopes)
			if fl.Changed("require-pkce") {
				ch.RequirePKCE = &requirePKCE
			}
			if fl.Changed("require-par") {
				ch.RequirePAR = &requirePAR
			}
			if fl.Changed("require-signed-request-object") {
				ch.RequireSignedRequestObject = &requireJAR
			}
			if fl.Changed("profile") {
				ch.Profile = &profile
			}
			if fl.Changed("dpop") {
				ch.DPoPBoundAccessTokens = &dpop
			}
			if fl.Changed("auth-method") {
				ch.TokenEndpointAuthMethod = &authMethod
			}
			if fl.Changed("jwks-file") {
				b, err := os.ReadFile(jwksFile)
				if err != nil {
					return usagef("--jwks-file: %v", err)
				}
				ch.JWKS = b
			}
			if fl.Changed("jwks-uri") {
				ch.JWKSURI = &jwksURI
			}
			if fl.Changed("id-token-alg") {
				ch.IDTokenSignedResponseAlg = &idTokenAlg
			}
			if fl.Changed("authorization-response-alg") {
				ch.AuthorizationSignedResponseAlg = &authzAlg
			}
			if fl.Changed("introspection-response-alg") {
				ch.IntrospectionSignedResponseAlg = &introspectAlg
			}
			if fl.Changed("authorization-details-types") {
				ch.AuthorizationDetailsTypes = &detailsTypes
			}
			if fl.Changed("grant-types") {
				ch.GrantTypes = &grantTypes
			}
			if fl.Changed("post-logout-redirect-uri") {
				ch.PostLogoutRedirectURIs = &postLogout
			}
			if fl.Changed("backchannel-logout-uri") {
				ch.BackchannelLogoutURI = &backchannel
			}
			if fl.Changed("backchannel-logout-session-required") {
				ch.BackchannelLogoutSessionRequired = &backchannelSession
			}
			if fl.Changed("logout-revokes-grants") {
				ch.LogoutRevokesGrants = &logoutRevokes
			}
			if fl.Changed("backchannel-delivery-mode") {
				ch.BackchannelTokenDeliveryMode = &cibaMode
			}
			if fl.Changed("backchannel-notification-endpoint") {
				ch.BackchannelClientNotificationEndpoint = &cibaEndpoint
			}
			if fl.Changed("backchannel-signing-alg") {
				ch.BackchannelAuthenticationRequestSigningAlg = &cibaAlg
			}
			ciba := ch.BackchannelTokenDeliveryMode != nil || ch.BackchannelClientNotificationEndpoint != nil || ch.BackchannelAuthenticationRequestSigningAlg != nil
			loggingOut := ciba || ch.PostLogoutRedirectURIs != nil || ch.BackchannelLogoutURI != nil || ch.BackchannelLogoutSessionRequired != nil || ch.LogoutRevokesGrants != nil
			if !loggingOut && ch.GrantTypes == nil && ch.AuthorizationSignedResponseAlg == nil && ch.IntrospectionSignedResponseAlg == nil && ch.AuthorizationDetailsTypes == nil && !anyChanged(fl.Changed, "name", "logo-uri", "redirect-uri", "add-redirect-uri",
				"remove-redirect-uri", "scope", "add-scope", "remove-scope", "require-pkce", "require-par", "require-signed-request-object", "refresh-reuse-interval", "refresh-token-rotation", "id-token-alg", "profile", "dpop", "auth-method", "jwks-file", "jwks-uri") {
				return usagef("nothing to update: give at least one of --name, --logo-uri, --redirect-uri, --add-redirect-uri, --remove-redirect-uri, --scope, --add-scope, --remove-scope, --require-pkce, --require-par, --require-signed-request-object, --refresh-reuse-interval, --refresh-token-rotation, --id-token-alg, --profile, --dpop, --auth-method, --jwks-file, --jwks-uri, --authorization-response-alg, --introspection-response-alg, --authorization-details-types, --grant-types, --post-logout-redirect-uri, --backchannel-logout-uri, --backchannel-logout-session-required, --logout-revokes-grants, --backchannel-delivery-mode, --backchannel-notification-endpoint, --backchannel-signing-alg")
			}
			adm, err := c.admin(cmd.Context(), existingStore)
			if err != nil {
				return err
			}
			cl, err := adm.UpdateClient(cmd.Context(), args[0], ch)
			if err != nil {
				return err
			}
			v := viewClient(cl)
			return c.emit(v, v.text)
		},
	}
	f := cmd.Flags()
	f.StringVar(&name, "name", "", "new name")
	f.StringVar(&logo, "logo-uri", "", "new logo URL (empty removes it)")
	f.StringArrayVar(&setURIs, "redirect-uri", nil, "replace the redirect URIs (repeat for more)")
	f.StringArrayVar(&ch.AddRedirectURIs, "add-redirect-uri", nil, "add a redirect URI (repeatable)")
	f.StringArrayVar(&ch.RemoveRedirectURIs, "remove-redirect-uri", nil, "remove a redirect URI (repeatable)")
	f.StringSliceVar(&scopes, "scope", nil, "replace the allowed scopes")
	f.StringSliceVar(&addScopes, "add-scope", nil, "allow more scopes")
	f.StringSliceVar(&removeScopes, "remove-scope", nil, "withdraw scopes")
	f.BoolVar(&requirePKCE, "require-pkce", false, "require PKCE (--require-pkce=false stops requiring it); codes already issued without it stop working")
	f.BoolVar(&requirePAR, "require-par", false, "accept only pushed authorization requests (--require-par=false accepts plain ones again)")
	f.BoolVar(&requireJAR, "require-signed-request-object", false, requireJARUsage+" (=false accepts unsigned pushes again)")
	f.BoolVar(&dpop, "dpop", false, "bind the client's tokens to a DPoP key (--dpop=false stops requiring proofs; tokens already bound stay bound)")
	f.StringVar(&authMethod, "auth-method", "", authMethodUsage)
	f.StringVar(&jwksFile, "jwks-file", "", jwksFileUsage+" (replaces the registered keys)")
	f.StringVar(&jwksURI, "jwks-uri", "", jwksURIUsage+" (replaces the registered keys)")
	f.StringArrayVar(&postLogout, "post-logout-redirect-uri", nil, postLogoutUsage+" (replaces the list; --post-logout-redirect-uri= empties it)")
	f.StringVar(&backchannel, "backchannel-logout-uri", "", backchannelUsage+" (empty removes it)")
	f.BoolVar(&backchannelSession, "backchannel-logout-session-required", false, backchannelSessionUsage)
	f.BoolVar(&logoutRevokes, "logout-revokes-grants", false, logoutRevokesUsage)
	f.StringVar(&cibaMode, "backchannel-delivery-mode", "", cibaModeUsage)
	f.StringVar(&cibaEndpoint, "backchannel-notification-endpoint", "", cibaEndpointUsage+" (empty removes it)")
	f.StringVar(&cibaAlg, "backchannel-signing-alg", "", cibaAlgUsage)
	f.DurationVar(&reuse, "refresh-reuse-interval", 0, refreshReuseUsage)
	f.StringVar(&rotation, "refresh-token-rotation", "", rotationUsage)
	f.StringVar(&profile, "profile", "", profileUsage+" (--profile= removes it)")
	f.StringVar(&idTokenAlg, "id-token-alg", "", idTokenAlgUsage)
	f.StringVar(&authzAlg, "authorization-response-alg", "", authzResponseAlgUsage+" (--authorization-response-alg= is the default)")
	f.StringVar(&introspectAlg, "introspection-response-alg", "", introspectionResponseAlgUsage+" (--introspection-response-alg= is the default)")
	f.StringSliceVar(&detailsTypes, "authorization-details-types", nil, detailsTypesUsage)
	f.StringSliceVar(&grantTypes, "grant-types", nil, grantTypesUsage+"; on update, replaces the list (empty: the default)")
	return cmd
}

// authzResponseAlgUsage and introspectionResponseAlgUsage document the signed responses' flags.
const (
	authzResponseAlgUsage         = "algorithm of the client's signed authorization responses (JARM authorization_signed_response_alg): RS256, PS256 or ES256; default RS256, the id_token's for fapi2"
	grantTypesUsage               = "grant types the client may use at the token endpoint (RFC 7591 grant_types; comma-separated or repeated): authorization_code, refresh_token, client_credentials; default authorization_code,refresh_token"
	detailsTypesUsage             = "authorization_details types the client may ask for (RFC 9396; comma-separated or repeated): payment_initiation, account_information; on update, replaces the list (empty: none)"
	introspectionResponseAlgUsage = "algorithm of the client's JWT introspection responses (RFC 9701 introspection_signed_response_alg; when set, every one is signed): RS256, PS256 or ES256; default RS256, the id_token's for fapi2"
)

// idTokenAlgUsage documents --id-token-alg.
const idTokenAlgUsage = "algorithm of the client's id_tokens: RS256 (default), PS256 or ES256 (one of AUTH_ID_TOKEN_ALGS)"

func anyChanged(changed func(string) bool, names ...string) bool {
	for _, n := range names {
		if changed(n) {
			return true
		}
	}
	return false
}

func (c *cli) clientsRotate() *cobra.Command {
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "rotate-secret CLIENT_ID [--grace DURATION]",
		Short: "Give a client a new secret; prints it once",
		Long: `Give a client a new secret, printed once. Without --grace the old secret stops working at
once (a leaked secret). With --grace the old one stays valid that long, so the client can deploy
the new one without downtime. A running server sees the change within AUTH_CLIENT_CACHE_TTL.`,
		Example: `  authctl clients rotate-secret cl_x --grace 24h
  authctl clients rotate-secret cl_x            # old secret invalid at once`,
		Args: exactArgs("CLIENT_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, err := c.admin(cmd.Context(), existingStore)
			if err != nil {
				return err
			}
			secret, cl, err := adm.RotateSecret(cmd.Context(), args[0], grace)
			if err != nil {
				return err
			}
			err = c.emit(createdClient{Client: viewClient(cl), ClientSecret: secret}, func(w io.Writer) {
				fmt.Fprintf(w, "client_id:     %s\n", cl.ID)
				fmt.Fprintf(w, "client_secret: %s\n", secret)
			})
			c.note("%s", secretNotice)
			if grace > 0 {
				c.note("The previous secret stays valid until %s.", time.Now().Add(grace).UTC().Format(time.RFC3339))
			} else {
				c.note("The previous secret no longer works.")
			}
			return err
		},
	}
	cmd.Flags().Var((*days)(&grace), "grace", "keep the old secret valid this long (e.g. 24h or 7d); default: invalid at once")
	return cmd
}

// disabledResult is the JSON output of disable and delete.
type disabledResult struct {
	ClientID      string   `json:"client_id,omitempty"`
	UID           string   `json:"uid,omitempty"`
	Username      string   `json:"username,omitempty"`
	Disabled      bool     `json:"disabled"`
	Deleted       bool     `json:"deleted,omitempty"`
	RevokedGrants []string `json:"revoked_grants"`
}

func (c *cli) clientsDisable() *cobra.Command {
	var resweep bool
	cmd := &cobra.Command{
		Use:   "disable CLIENT_ID [--resweep]",
		Short: "Disable a client and revoke all its grants (its tokens fail at once)",
		Long: `Disable a client: it can no longer authenticate or start authorizations, and every grant it
holds is revoked, so its access and refresh tokens fail at once.

A code issued just before can still be exchanged until it expires (AUTH_CODE_TTL, 2m), and a
running server may serve the client from its cache for AUTH_CLIENT_CACHE_TTL (30s). With
--resweep the command waits that long and revokes again, closing that window.`,
		Args: exactArgs("CLIENT_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, err := c.admin(cmd.Context(), existingStore)
			if err != nil {
				return err
			}
			revoked, err := adm.DisableClient(cmd.Context(), args[0])
			if err != nil && len(revoked) == 0 {
				return err
			}
			if resweep {
				wait := c.cfg.Lifetimes.Code + c.cfg.ClientCacheTTL
				c.note("client %s disabled, %d grant(s) revoked; waiting %s to revoke grants from codes issued before ...", args[0], len(revoked), wait)
				more, rerr := adm.Resweep(cmd.Context(), oauth.GrantFilter{ClientID: args[0]}, admin.ReasonClientDisabled, wait)
				revoked, err = append(revoked, more...), errors.Join(err, rerr)
			}
			res := disabledResult{ClientID: args[0], Disabled: true, RevokedGrants: nonNil(revoked)}
			if eerr := c.emit(res, func(w io.Writer) {
				fmt.Fprintf(w, "client %s disabled; %d grant(s) revoked\n", args[0], len(revoked))
			}); eerr != nil {
				return eerr
			}
			return partial(err)
		},
	}
	cmd.Flags().BoolVar(&resweep, "resweep", false, "wait AUTH_CODE_TTL + AUTH_CLIENT_CACHE_TTL, then revoke grants again")
	return cmd
}

func (c *cli) clientsEnable() *cobra.Command {
	return &cobra.Command{
		Use:   "enable CLIENT_ID",
		Short: "Enable a disabled client (revoked grants stay revoked)",
		Args:  exactArgs("CLIENT_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, err := c.admin(cmd.Context(), existingStore)
			if err != nil {
				return err
			}
			if err := adm.EnableClient(cmd.Context(), args[0]); err != nil {
				return err
			}
			return c.emit(disabledResult{ClientID: args[0], RevokedGrants: []string{}}, func(w io.Writer) {
				fmt.Fprintf(w, "client %s enabled\n", args[0])
			})
		},
	}
}

func (c *cli) clientsDelete() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "delete CLIENT_ID --yes",
		Short: "Revoke all of a client's grants and delete it",
		Long: `Delete a client: it is disabled, every grant it holds is revoked (its tokens fail at once),
then it is removed. If a revocation fails the client is left disabled, not deleted; run the
command again. Prefer disable when the client may come back.`,
		Args: exactArgs("CLIENT_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !yes {
				return usagef("deleting client %s cannot be undone: confirm with --yes", args[0])
			}
			adm, err := c.admin(cmd.Context(), existingStore)
			if err != nil {
				return err
			}
			revoked, err := adm.DeleteClient(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return c.emit(disabledResult{ClientID: args[0], Disabled: true, Deleted: true, RevokedGrants: nonNil(revoked)}, func(w io.Writer) {
				fmt.Fprintf(w, "client %s deleted; %d grant(s) revoked\n", args[0], len(revoked))
			})
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "confirm the deletion")
	return cmd
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// partial turns the error of a bulk revocation that got some of the way into exit code 5.
func partial(err error) error {
	if err == nil {
		return nil
	}
	return partialError{msg: "some grants could not be revoked; run the command again: " + err.Error()}
}

// days is a duration flag that also takes a day suffix (7d), as the AUTH_* durations do.
type days time.Duration

func (d *days) String() string { return time.Duration(*d).String() }
func (d *days) Type() string   { return "duration" }

// Set parses "30m", "24h" or "7d".
func (d *days) Set(s string) error {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		v, err := strconv.Atoi(n)
		if err != nil || v < 0 {
			return fmt.Errorf("%q: want a duration like 12h or 7d", s)
		}
		*d = days(time.Duration(v) * 24 * time.Hour)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("%q: want a duration like 12h or 7d", s)
	}
	*d = days(v)
	return nil
}

// Usage of the logout settings (oauth.Client, docs/api.md "Logout").
const (
	postLogoutUsage         = "a registered post_logout_redirect_uri, where the end-session endpoint may send the browser back after a logout (repeatable; the rules of redirect URIs)"
	backchannelUsage        = "the https URL the client's back-channel logout tokens are POSTed to (OpenID Back-Channel Logout 1.0)"
	backchannelSessionUsage = "the client needs sid in its logout tokens (every logout token carries it)"
	logoutRevokesUsage      = "a logout revokes the client's grants given in the session that ends (default: grants outlive the session)"
)

// The CIBA flags (oauth.Client.ValidBackchannelSettings).
const (
	cibaModeUsage     = "CIBA: how the client learns its request is decided, poll (the default) or ping"
	cibaEndpointUsage = "CIBA: the ping client's https notification endpoint (backchannel_client_notification_endpoint)"
	cibaAlgUsage      = "CIBA: the alg of the client's signed authentication requests, PS256 or ES256 (then it must sign them; needs private_key_jwt)"
)
