package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/tokenendpoint"
)

// JWKSHandler serves the public signing keys from the key registry. The document is kept in
// memory for RefreshEvery, so a warm function answers with no call to AWS; browsers and
// clients may cache it for MaxAge (the rotation policy publishes keys longer than that before
// they sign).
type JWKSHandler struct {
	Keys         oauth.KeyStore
	Clock        oauth.Clock
	MaxAge       time.Duration
	RefreshEvery time.Duration
	Log          *slog.Logger

	mu      sync.Mutex
	body    []byte
	etag    string
	fetched time.Time
}

func (h *JWKSHandler) document(ctx context.Context) ([]byte, string, error) {
	now := h.Clock.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.body != nil && now.Sub(h.fetched) < h.RefreshEvery {
		return h.body, h.etag, nil
	}
	set, err := h.Keys.Keys(ctx)
	if err != nil {
		if h.body != nil { // serve the last known keys rather than nothing
			return h.body, h.etag, nil
		}
		return nil, "", err
	}
	h.body, h.etag = keys.PublicJWKS(set)
	h.fetched = now
	return h.body, h.etag, nil
}

func (h *JWKSHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, "GET, HEAD")
		return
	}
	body, etag, err := h.document(r.Context())
	if err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	hd := w.Header()
	hd.Set("Cache-Control", "public, max-age="+strconv.Itoa(int(h.MaxAge/time.Second)))
	hd.Set("ETag", etag)
	hd.Set("Access-Control-Allow-Origin", "*")
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hd.Set("Content-Type", "application/jwk-set+json")
	_, _ = w.Write(body)
}

// DiscoveryHandler serves the OpenID Provider metadata (OIDC Discovery 1.0, RFC 8414),
// rendered once.
type DiscoveryHandler struct {
	body []byte
}

// Provider is what the metadata says of a deployment.
type Provider struct {
	BaseURL string // where the endpoints are
	Issuer  string
	// MTLSBaseURL, when not empty, is the connect host, announced as mtls_endpoint_aliases
	// (RFC 8705 5).
	MTLSBaseURL string
	Locales     []string // the pages' languages (ui_locales_supported)
	// RequirePAR announces that every client must push its authorization requests (RFC 9126 5).
	RequirePAR bool
	// IDTokenAlgs are the id_token algorithms the deployment keeps keys for
	// (AUTH_ID_TOKEN_ALGS; every one of keys.Algs when empty).
	IDTokenAlgs []string
	// AuthorizationDetailsTypes are the authorization_details types accepted (RFC 9396 10:
	// authorization_details_types_supported).
	AuthorizationDetailsTypes []string
	// Registration announces the dynamic client registration endpoint (RFC 8414 2
	// registration_endpoint) when AUTH_REGISTRATION is on.
	Registration bool
}

// PromptValues are the prompt values announced (prompt_values_supported). "none" is not among
// them: silent authentication is not supported yet (a prompt=none request is answered
// login_required or consent_required, never with a code), and announcing it would make a
// client rely on it.
var PromptValues = []string{"login", "consent", "select_account"}

// NewDiscoveryHandler renders the metadata of p.
func NewDiscoveryHandler(p Provider) *DiscoveryHandler {
	idTokenAlgs := p.IDTokenAlgs
	if len(idTokenAlgs) == 0 {
		idTokenAlgs = keys.Algs
	}
	auth := []string{oauth.AuthMethodSecretBasic, oauth.AuthMethodSecretPost, oauth.AuthMethodPrivateKeyJWT, oauth.AuthMethodTLSClient, oauth.AuthMethodSelfSigned}
	doc := map[string]any{
		"issuer":                                p.Issuer,
		"authorization_endpoint":                p.BaseURL + PathAuthorize,
		"token_endpoint":                        p.BaseURL + PathToken,
		"pushed_authorization_request_endpoint": p.BaseURL + PathPAR,
		"require_pushed_authorization_requests": p.RequirePAR,
		"revocation_endpoint":                   p.BaseURL + PathRevoke,
		"introspection_endpoint":                p.BaseURL + PathIntrospect,
		"userinfo_endpoint":                     p.BaseURL + PathUserinfo,
		"jwks_uri":                              p.BaseURL + PathJWKS,
		"response_types_supported":              []string{"code"},
		"response_modes_supported":              oauth.ResponseModes,
		"grant_types_supported":                 tokenendpoint.GrantTypes(),
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": idTokenAlgs,
		"scopes_supported":                      append(append([]string{}, oauth.KnownScopes...), oauth.ScopeTransfersWriteDotted),
		"acr_values_supported":                  oauth.ACRValues,
		"claims_supported": []string{"iss", "sub", "aud", "exp", "iat", "auth_time", "sid", "nonce", "at_hash", "azp", "acr", "amr",
			"email", "email_verified", "phone", "phone_number", "name", "given_name", "family_name", "birthdate",
			"gender", "picture", "locale", "updated_at", "zone_info", "zoneinfo"},
		"token_endpoint_auth_methods_supported":                    auth,
		"revocation_endpoint_auth_methods_supported":               auth,
		"introspection_endpoint_auth_methods_supported":            auth,
		"code_challenge_methods_supported":                         []string{"S256"},
		"prompt_values_supported":                                  PromptValues,
		"ui_locales_supported":                                     p.Locales,
		"claims_parameter_supported":                               false,
		"request_parameter_supported":                              false,
		"request_uri_parameter_supported":                          false,
		"authorization_response_iss_parameter_supported":           true,
		"dpop_signing_alg_values_supported":                        oauth.DPoPAlgs,
		"token_endpoint_auth_signing_alg_values_supported":         oauth.AssertionAlgs,
		"revocation_endpoint_auth_signing_alg_values_supported":    oauth.AssertionAlgs,
		"introspection_endpoint_auth_signing_alg_values_supported": oauth.AssertionAlgs,
		// JARM 4 and RFC 9701 7: signed responses use the id_token keys, so their algorithms.
		"authorization_signing_alg_values_supported": idTokenAlgs,
		"introspection_signing_alg_values_supported": idTokenAlgs,
		// RFC 9396 10.
		"authorization_details_types_supported": nonNil(p.AuthorizationDetailsTypes),
		// Grant Management for OAuth 2.0: a grant is at grant_management_endpoint/{grant_id}.
		"grant_management_endpoint":          p.BaseURL + PathGrants,
		"grant_management_actions_supported": oauth.GrantManagementActions,
		"grant_management_action_required":   false,
		// OpenID RP-Initiated Logout 1.0 and Back-Channel Logout 1.0 (shared/logout): every
		// logout token carries sid.
		"end_session_endpoint":                 p.BaseURL + PathLogout,
		"backchannel_logout_supported":         true,
		"backchannel_logout_session_supported": true,
		// OpenID CIBA Core 1.0 4 (shared/ciba): poll and ping (push is not offered, and
		// FAPI-CIBA forbids it); signed authentication requests with the request object algs;
		// no user_code.
		"backchannel_authentication_endpoint":                             p.BaseURL + PathBackchannel,
		"backchannel_token_delivery_modes_supported":                      []string{oauth.CIBAModePoll, oauth.CIBAModePing},
		"backchannel_authentication_request_signing_alg_values_supported": oauth.RequestObjectAlgs,
		"backchannel_user_code_parameter_supported":                       false,
	}
	// Signed request objects (RFC 9101) are taken at the PAR endpoint only (FAPI 2.0 Message
	// Signing (Final) 5.3.1-1), so request_parameter_supported, which is about the
	// authorization endpoint (OIDC Discovery 3), stays false; the algorithms are advertised
	// (RFC 8414 2). require_signed_request_object is per client (RFC 9101 10.5), not the
	// server's, so the server metadata of that name is left out (false).
	doc["request_object_signing_alg_values_supported"] = oauth.RequestObjectAlgs
	if p.Registration {
		doc["registration_endpoint"] = p.BaseURL + PathRegister
	}
	if p.MTLSBaseURL != "" {
		// Certificate-bound tokens (RFC 8705 3) need the connect host where clients present
		// their certificates; without one they are not announced.
		doc["tls_client_certificate_bound_access_tokens"] = true
		doc["mtls_endpoint_aliases"] = map[string]string{
			"token_endpoint":                        p.MTLSBaseURL + PathToken,
			"pushed_authorization_request_endpoint": p.MTLSBaseURL + PathPAR,
			"revocation_endpoint":                   p.MTLSBaseURL + PathRevoke,
			"introspection_endpoint":                p.MTLSBaseURL + PathIntrospect,
			"userinfo_endpoint":                     p.MTLSBaseURL + PathUserinfo,
			"grant_management_endpoint":             p.MTLSBaseURL + PathGrants,
			"backchannel_authentication_endpoint":   p.MTLSBaseURL + PathBackchannel,
		}
	}
	body, _ := json.Marshal(doc)
	return &DiscoveryHandler{body: body}
}

// nonNil makes an empty list [] rather than null in the document.
func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

func (h *DiscoveryHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, "GET, HEAD")
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "public, max-age=3600")
	hd.Set("Access-Control-Allow-Origin", "*")
	_, _ = w.Write(h.body)
}
