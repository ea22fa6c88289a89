package tokenendpoint

import (
	"context"
	"maps"
	"net/url"
	"slices"

	"github.com/acmebank/authserver/shared/oauth"
)

// grant is one grant type of the token endpoint: a value in its own file
// (grant_<type>.go), registered in registry.
type grant struct {
	// spends names the parameter carrying the single-use value the grant spends, "" when it
	// spends none: the request's one-time values are recorded at that value's home
	// (docs/multiregion.md), or in the local replica for a grant that spends nothing.
	spends string
	// issue runs the grant for an authenticated client whose sender constraint is checked.
	issue func(e *Endpoint, ctx context.Context, client *oauth.Client, v url.Values, b binding) (*oauth.TokenResponse, error)
}

// registry is the one list of the grant types the token endpoint accepts: Token dispatches on
// it and GrantTypes returns it, which is what discovery's grant_types_supported and the client
// registration's check of grant_types read. A new grant is its file and one line here.
var registry = map[string]grant{
	oauth.GrantTypeAuthorizationCode: grantAuthorizationCode,
	oauth.GrantTypeRefreshToken:      grantRefreshToken,
	oauth.GrantTypeClientCredentials: grantClientCredentials,
	oauth.GrantTypeCIBA:              grantCIBA,
}

// GrantTypes are the grant types the token endpoint accepts, sorted.
func GrantTypes() []string {
	return slices.Sorted(maps.Keys(registry))
}
