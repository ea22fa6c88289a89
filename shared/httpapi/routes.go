// Package httpapi is the HTTP face of the service: one http.Handler per endpoint, served alike
// by the local server, the tests and (through the API Gateway adapter) each Lambda function.
package httpapi

// The service's fixed paths (DESIGN.md, "The protocol surface").
const (
	PathPrefix       = "/v2/authentication/oauth2"
	PathAuthorize    = PathPrefix + "/authorize"
	PathToken        = PathPrefix + "/token"
	PathPAR          = PathPrefix + "/par"
	PathRevoke       = PathPrefix + "/token/revoke"
	PathRevokeLegacy = "/v2/authentication/token/revoke"
	PathIntrospect   = PathPrefix + "/token/introspect"
	PathUserinfo     = PathPrefix + "/userinfo"
	PathJWKS         = PathPrefix + "/.well-known/jwks.json"
	PathDiscovery    = PathPrefix + "/.well-known/openid-configuration"
	PathAssets       = PathPrefix + "/assets/"
	// PathGrants is the grant management endpoint (Grant Management for OAuth 2.0): a grant
	// is PathGrants/{grant_id}.
	PathGrants = PathPrefix + "/grants"
	// PathRegister is the dynamic client registration endpoint (RFC 7591); a client's
	// registration_client_uri (RFC 7592) is PathRegister/{client_id}.
	PathRegister = PathPrefix + "/register"
	// PathBackchannel is the backchannel authentication endpoint (OpenID CIBA Core 1.0 7;
	// the path is ours to choose).
	PathBackchannel = PathPrefix + "/bc-authorize"
)

// PathApps is the customer's Connected apps page (a page of the authorize function): their
// apps' live grants, each with a withdraw form posted back to it.
const PathApps = PathPrefix + "/account/apps"

// PathAppsReceipt is where the Connected apps page's user downloads a grant's signed consent
// receipt: PathAppsReceipt?grant={grant_id}.
const PathAppsReceipt = PathApps + "/receipt"

// PathLogout is the end-session endpoint (OpenID RP-Initiated Logout 1.0: a page of the
// authorize function, shared/web): GET or POST the logout request, POST the confirmation.
const PathLogout = PathPrefix + "/logout"
