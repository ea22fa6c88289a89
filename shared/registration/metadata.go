package registration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/acmebank/authserver/shared/admin"
	"github.com/acmebank/authserver/shared/oauth"
)

// request is what a registration asks for: the client's spec as authctl takes it, and what
// RFC 7591 2 adds that an operator does not set.
type request struct {
	spec            admin.ClientSpec
	softwareID      string
	softwareVersion string
}

// field maps one client metadata name of RFC 7591 2 (and of OpenID Connect Dynamic Client
// Registration, RFC 8705, RFC 9126, RFC 9449, RFC 9396, JARM, RFC 9701) onto a request (set)
// and back from a registered client (get; a zero value is left out of the answer).
type field struct {
	name string
	set  func(r *request, raw json.RawMessage) error
	get  func(c *oauth.Client) any
}

// fields is the one table of the metadata registration understands. A metadata name not in it
// is ignored, neither stored nor answered (RFC 7591 2: "The authorization server MUST ignore
// any client metadata sent by the client that it does not understand"). A new one is one line.
var fields = []field{
	str("client_name", func(r *request) *string { return &r.spec.Name }, func(c *oauth.Client) string { return c.Name }),
	list("redirect_uris", func(r *request) *[]string { return &r.spec.RedirectURIs }, func(c *oauth.Client) []string { return c.RedirectURIs }),
	str("logo_uri", func(r *request) *string { return &r.spec.LogoURI }, func(c *oauth.Client) string { return c.LogoURI }),
	{"scope", setScope, func(c *oauth.Client) any { return strings.Join(c.Scopes, " ") }},
	list("grant_types", func(r *request) *[]string { return &r.spec.GrantTypes }, func(c *oauth.Client) []string { return c.EffectiveGrantTypes() }),
	{"response_types", setResponseTypes, func(c *oauth.Client) any { return []string{"code"} }},
	{"token_endpoint_auth_method", setAuthMethod, getAuthMethod},
	{"jwks", setJWKS, func(c *oauth.Client) any { return c.JWKS }},
	str("jwks_uri", func(r *request) *string { return &r.spec.JWKSURI }, func(c *oauth.Client) string { return c.JWKSURI }),
	str("id_token_signed_response_alg", func(r *request) *string { return &r.spec.IDTokenSignedResponseAlg }, func(c *oauth.Client) string { return c.IDTokenSignedResponseAlg }),
	str("authorization_signed_response_alg", func(r *request) *string { return &r.spec.AuthorizationSignedResponseAlg }, func(c *oauth.Client) string { return c.AuthorizationSignedResponseAlg }),
	str("introspection_signed_response_alg", func(r *request) *string { return &r.spec.IntrospectionSignedResponseAlg }, func(c *oauth.Client) string { return c.IntrospectionSignedResponseAlg }),
	list("authorization_details_types", func(r *request) *[]string { return &r.spec.AuthorizationDetailsTypes }, func(c *oauth.Client) []string { return c.AuthorizationDetailsTypes }),
	str("tls_client_auth_subject_dn", func(r *request) *string { return &r.spec.CertSubjectDN }, func(c *oauth.Client) string { return c.CertSubjectDN }),
	str("tls_client_auth_san_dns", func(r *request) *string { return &r.spec.CertSANDNS }, func(c *oauth.Client) string { return c.CertSANDNS }),
	str("tls_client_auth_san_uri", func(r *request) *string { return &r.spec.CertSANURI }, func(c *oauth.Client) string { return c.CertSANURI }),
	str("tls_client_auth_san_ip", func(r *request) *string { return &r.spec.CertSANIP }, func(c *oauth.Client) string { return c.CertSANIP }),
	str("tls_client_auth_san_email", func(r *request) *string { return &r.spec.CertSANEmail }, func(c *oauth.Client) string { return c.CertSANEmail }),
	flag("dpop_bound_access_tokens", func(r *request) *bool { return &r.spec.DPoPBoundAccessTokens }, func(c *oauth.Client) bool { return c.DPoPBoundAccessTokens }),
	flag("require_pushed_authorization_requests", func(r *request) *bool { return &r.spec.RequirePAR }, func(c *oauth.Client) bool { return c.RequirePAR }),
	flag("require_signed_request_object", func(r *request) *bool { return &r.spec.RequireSignedRequestObject }, func(c *oauth.Client) bool { return c.RequireSignedRequestObject }),
	list("post_logout_redirect_uris", func(r *request) *[]string { return &r.spec.PostLogoutRedirectURIs }, func(c *oauth.Client) []string { return c.PostLogoutRedirectURIs }),
	str("backchannel_logout_uri", func(r *request) *string { return &r.spec.BackchannelLogoutURI }, func(c *oauth.Client) string { return c.BackchannelLogoutURI }),
	flag("backchannel_logout_session_required", func(r *request) *bool { return &r.spec.BackchannelLogoutSessionRequired }, func(c *oauth.Client) bool { return c.BackchannelLogoutSessionRequired }),
	// CIBA Core 4's client metadata.
	str("backchannel_token_delivery_mode", func(r *request) *string { return &r.spec.BackchannelTokenDeliveryMode }, func(c *oauth.Client) string { return c.BackchannelTokenDeliveryMode }),
	str("backchannel_client_notification_endpoint", func(r *request) *string { return &r.spec.BackchannelClientNotificationEndpoint }, func(c *oauth.Client) string { return c.BackchannelClientNotificationEndpoint }),
	str("backchannel_authentication_request_signing_alg", func(r *request) *string { return &r.spec.BackchannelAuthenticationRequestSigningAlg }, func(c *oauth.Client) string { return c.BackchannelAuthenticationRequestSigningAlg }),
	str("software_id", func(r *request) *string { return &r.softwareID }, func(c *oauth.Client) string { return c.SoftwareID }),
	str("software_version", func(r *request) *string { return &r.softwareVersion }, func(c *oauth.Client) string { return c.SoftwareVersion }),
}

// maxString bounds every string value of the metadata (the body's bound bounds the rest).
const maxString = 2048

func str(name string, at func(*request) *string, of func(*oauth.Client) string) field {
	return field{name, func(r *request, raw json.RawMessage) error {
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("%s must be a string", name)
		}
		if len(v) > maxString {
			return fmt.Errorf("%s is longer than %d bytes", name, maxString)
		}
		*at(r) = v
		return nil
	}, func(c *oauth.Client) any { return of(c) }}
}

func list(name string, at func(*request) *[]string, of func(*oauth.Client) []string) field {
	return field{name, func(r *request, raw json.RawMessage) error {
		v, err := stringArray(name, raw)
		*at(r) = v
		return err
	}, func(c *oauth.Client) any { return of(c) }}
}

func flag(name string, at func(*request) *bool, of func(*oauth.Client) bool) field {
	return field{name, func(r *request, raw json.RawMessage) error {
		if err := json.Unmarshal(raw, at(r)); err != nil {
			return fmt.Errorf("%s must be true or false", name)
		}
		return nil
	}, func(c *oauth.Client) any { return of(c) }}
}

func stringArray(name string, raw json.RawMessage) ([]string, error) {
	var v []string
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("%s must be an array of strings", name)
	}
	for _, s := range v {
		if len(s) > maxString {
			return nil, fmt.Errorf("a value of %s is longer than %d bytes", name, maxString)
		}
	}
	return v, nil
}

// setScope reads RFC 7591 2's scope: space-separated, as in a request.
func setScope(r *request, raw json.RawMessage) error {
	var v string
	if err := json.Unmarshal(raw, &v); err != nil || len(v) > maxString {
		return errors.New("scope must be a string of space-separated scopes")
	}
	r.spec.Scopes = strings.Fields(v)
	return nil
}

func setResponseTypes(r *request, raw json.RawMessage) error {
	v, err := stringArray("response_types", raw)
	if err != nil {
		return err
	}
	for _, t := range v {
		if t != "code" {
			return fmt.Errorf("response type %q is not offered (code only)", t)
		}
	}
	return nil
}

// setAuthMethod maps RFC 7591's token_endpoint_auth_method onto the spec: the two secret
// methods are one registration (a secret, presented either way).
func setAuthMethod(r *request, raw json.RawMessage) error {
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return errors.New("token_endpoint_auth_method must be a string")
	}
	switch v {
	case oauth.AuthMethodSecretBasic, oauth.AuthMethodSecretPost:
		v = ""
	case oauth.AuthMethodPrivateKeyJWT, oauth.AuthMethodTLSClient:
	default:
		return fmt.Errorf("token_endpoint_auth_method %q is not offered (%s, %s, %s or %s)", v, oauth.AuthMethodPrivateKeyJWT,
			oauth.AuthMethodTLSClient, oauth.AuthMethodSecretBasic, oauth.AuthMethodSecretPost)
	}
	r.spec.TokenEndpointAuthMethod = v
	return nil
}

func getAuthMethod(c *oauth.Client) any {
	switch {
	case c.TokenEndpointAuthMethod != "":
		return c.TokenEndpointAuthMethod
	case c.UsesMTLS():
		return oauth.AuthMethodTLSClient
	}
	return oauth.AuthMethodSecretBasic
}

func setJWKS(r *request, raw json.RawMessage) error {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	r.spec.JWKS = append(json.RawMessage(nil), raw...)
	return nil
}

// decodeObject decodes a JSON object's members, refusing a member given twice (which one
// would win is decoder-specific: an attacker's way to have two readers disagree).
func decodeObject(body []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("the body must be a JSON object")
	}
	out := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, errors.New("the body must be a JSON object")
		}
		name, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, errors.New("the body must be a JSON object")
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("metadata %q is given twice", name)
		}
		out[name] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, errors.New("the body must be a JSON object")
	}
	if dec.More() {
		return nil, errors.New("the body must be one JSON object")
	}
	return out, nil
}

// applyFields sets r from the metadata members the table knows; others are ignored. null is
// absent. A value of the wrong shape is invalid_client_metadata (invalid_redirect_uri for
// redirect_uris).
func applyFields(r *request, members map[string]json.RawMessage) error {
	for _, f := range fields {
		raw, ok := members[f.name]
		if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			continue
		}
		if err := f.set(r, raw); err != nil {
			if f.name == "redirect_uris" {
				return oauth.InvalidRedirectURI("%s", err)
			}
			return oauth.InvalidClientMetadata("%s", err)
		}
	}
	return nil
}

// metadataOf is the metadata of a registered client, as the answers carry it (RFC 7591 3.2.1:
// "all registered metadata about the client").
func metadataOf(c *oauth.Client) map[string]any {
	out := map[string]any{}
	for _, f := range fields {
		v := f.get(c)
		switch x := v.(type) {
		case string:
			if x == "" {
				continue
			}
		case []string:
			if len(x) == 0 {
				continue
			}
		case bool:
			if !x {
				continue
			}
		case json.RawMessage:
			if len(x) == 0 {
				continue
			}
		}
		out[f.name] = v
	}
	return out
}
