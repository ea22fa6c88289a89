package authorizer

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/acmebank/authserver/shared/oauth"
)

// Routes maps an API Gateway route key ("GET /invoicing/invoices/{invoiceId}", exactly as the
// HTTP API names the route and as Go's ServeMux writes the same pattern) to the scopes an
// access token needs on it: every one of them. An empty list admits any valid access token of
// a user. A route missing from the table admits nobody, so a route attached to the authorizer
// by mistake fails closed.
type Routes map[string]oauth.Scopes

// The bank API's route keys: the protected routes of DESIGN.md, the deprecated invoice routes
// among them.
const (
	RouteAccounts         = "GET /v2/bank/accounts"
	RouteInvoices         = "GET /invoicing/invoices"
	RouteInvoice          = "GET /invoicing/invoices/{invoiceId}"
	RouteInvoicesQueryOld = "GET /invoices/query"
	RouteInvoiceOld       = "GET /invoices/{invoiceId}"
)

// DefaultRoutes is the documented default table (docs/api.md). The service issues no read
// scope for bank data, and every one of these routes hands the backend the user's identity
// (uid, companyProfileId, companyUserId): the openid scope is the user's consent to exactly
// that, so it is what each route asks for. A deprecated route needs what its successor needs,
// so moving to the successor never needs a new consent. AUTH_ROUTE_SCOPES overrides entries.
func DefaultRoutes() Routes {
	openid := oauth.Scopes{oauth.ScopeOpenID}
	return Routes{
		RouteAccounts:         openid,
		RouteInvoices:         openid,
		RouteInvoice:          openid,
		RouteInvoicesQueryOld: openid,
		RouteInvoiceOld:       openid,
	}
}

// ParseRoutes returns DefaultRoutes with the entries of a JSON object laid over it, as the
// AUTH_ROUTE_SCOPES variable holds it: {"GET /v2/bank/accounts": ["openid", "bank:transfers:write"]}.
// A route named there replaces its default entry; routes not named keep theirs; a new route
// key adds a route. An empty string means the defaults. Unknown scopes and keys that are not
// "METHOD /path" are refused, so a typo stops the function at start rather than locking
// clients out at run time.
func ParseRoutes(js string) (Routes, error) {
	routes := DefaultRoutes()
	if strings.TrimSpace(js) == "" {
		return routes, nil
	}
	var over map[string][]string
	if err := json.Unmarshal([]byte(js), &over); err != nil {
		return nil, fmt.Errorf("route scopes: want a JSON object of route key to list of scopes: %w", err)
	}
	for _, key := range slices.Sorted(maps.Keys(over)) {
		method, path, ok := strings.Cut(key, " ")
		if !ok || method == "" || method != strings.ToUpper(method) || !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \t") {
			return nil, fmt.Errorf("route scopes: %q is not a route key like \"GET /v2/bank/accounts\"", key)
		}
		scopes := oauth.Scopes{}
		for _, s := range over[key] {
			if !oauth.IsKnownScope(s) {
				return nil, fmt.Errorf("route scopes: %s: unknown scope %q", key, s)
			}
			if !scopes.Has(s) {
				scopes = append(scopes, s)
			}
		}
		routes[key] = scopes
	}
	return routes, nil
}

// Required returns the scopes route needs, and false when the route is not in the table.
func (r Routes) Required(route string) (oauth.Scopes, bool) {
	s, ok := r[route]
	return s, ok
}

// ClientRoutes is the set of route keys that accept client-only tokens (Authorizer.ClientRoutes).
type ClientRoutes map[string]bool

// ParseClientRoutes reads AUTH_CLIENT_TOKEN_ROUTES: route keys separated by commas, each one
// of routes (the table after AUTH_ROUTE_SCOPES), so a typo stops the function at start rather
// than refusing clients at run time. Empty is none.
func ParseClientRoutes(v string, routes Routes) (ClientRoutes, error) {
	out := ClientRoutes{}
	for _, key := range strings.Split(v, ",") {
		if key = strings.TrimSpace(key); key == "" {
			continue
		}
		if _, ok := routes.Required(key); !ok {
			return nil, fmt.Errorf("client token routes: %q is not a route of the scope table (AUTH_ROUTE_SCOPES)", key)
		}
		out[key] = true
	}
	return out, nil
}
