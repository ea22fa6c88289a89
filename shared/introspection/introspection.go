// Package introspection is the introspection endpoint's use case (RFC 7662): which client may
// see which token, and what the answer says of it.
//
// Who may learn what (RFC 7662 2.2 and 4): a client may introspect the tokens issued to it; a
// resource server (a client id listed in ResourceServers) may introspect any access token,
// since the tokens it receives were issued to others. Any other token is answered
// {"active":false}, exactly like an unknown one: RFC 7662 2.2 requires active=false when "the
// protected resource is not allowed to introspect this particular token", and answering
// anything else would let a client probe which foreign tokens exist.
//
// Certificate binding (RFC 8705): a client introspecting its own bound token must present that
// certificate, as everywhere else a bound token is used. A resource server gets the binding in
// cnf.x5t#S256 and checks it against the certificate its own caller presented (RFC 8705 3.2).
package introspection

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/url"

	"github.com/acmebank/authserver/shared/oauth"
)

// Deps are what introspection needs: the token domain (clients, grants, replay store, clock,
// issuer) and the resource servers.
type Deps struct {
	Tokens *oauth.Service
	// ResourceServers are the client ids that may introspect every access token.
	ResourceServers map[string]bool
}

// Introspector is the introspection endpoint's use case.
type Introspector struct {
	tokens          *oauth.Service
	resourceServers map[string]bool
}

// New returns the introspection use case over d, or an error naming every dependency it lacks.
func New(d Deps) (*Introspector, error) {
	if err := d.Tokens.Serves("introspection", false); err != nil {
		return nil, err
	}
	return &Introspector{tokens: d.Tokens, resourceServers: d.ResourceServers}, nil
}

// Introspection is the RFC 7662 2.2 response, with the documented metadata object.
type Introspection struct {
	Active    bool          `json:"active"`
	Scope     string        `json:"scope,omitempty"`
	ClientID  string        `json:"client_id,omitempty"`
	Sub       string        `json:"sub,omitempty"`
	Exp       int64         `json:"exp,omitempty"`
	Iat       int64         `json:"iat,omitempty"`
	Iss       string        `json:"iss,omitempty"`
	TokenType string        `json:"token_type,omitempty"`
	Cnf       *Confirmation `json:"cnf,omitempty"`
	// AuthorizationDetails are the token's (RFC 9396 9.1): its grant's, or those a refresh
	// narrowed an access token to.
	AuthorizationDetails json.RawMessage      `json:"authorization_details,omitempty"`
	Metadata             *oauth.TokenMetadata `json:"metadata,omitempty"`
}

// Confirmation is the RFC 8705 3.1 confirmation of a certificate-bound token.
type Confirmation struct {
	X5tS256 string `json:"x5t#S256,omitempty"`
	JKT     string `json:"jkt,omitempty"`
}

// Introspect authenticates the client and answers what it may know of the token its body names.
func (in *Introspector) Introspect(ctx context.Context, params url.Values, cred oauth.ClientCredentials) (*Introspection, error) {
	_, out, err := in.introspect(ctx, params, cred)
	return out, err
}

// Answer is an introspection response: the RFC 7662 JSON, or, for a client that asked for a
// signed response, the RFC 9701 JWT.
type Answer struct {
	JSON *Introspection
	JWT  string
}

// IntrospectAs is Introspect for a caller that may ask for a signed response (RFC 9701 4:
// Accept: application/token-introspection+jwt). The response is a JWT when the client asked
// for one, or when it registered introspection_signed_response_alg (RFC 9701 6: then its
// responses are signed); otherwise the JSON. The same rules decide what the response says.
func (in *Introspector) IntrospectAs(ctx context.Context, params url.Values, cred oauth.ClientCredentials, wantJWT bool) (Answer, error) {
	client, out, err := in.introspect(ctx, params, cred)
	if err != nil {
		return Answer{}, err
	}
	if !wantJWT && client.IntrospectionSignedResponseAlg == "" {
		return Answer{JSON: out}, nil
	}
	j, err := in.tokens.SignIntrospection(ctx, client, out)
	if err != nil {
		return Answer{}, err
	}
	return Answer{JWT: j}, nil
}

// introspect authenticates the client and answers what it may know of the token.
func (in *Introspector) introspect(ctx context.Context, params url.Values, cred oauth.ClientCredentials) (*oauth.Client, *Introspection, error) {
	client, _, err := in.tokens.AuthenticateRequest(ctx, oauth.ClientRequest{Credentials: cred})
	if err != nil {
		return nil, nil, err
	}
	out, err := in.answer(ctx, client, params, cred)
	return client, out, err
}

// answer is what the authenticated client may know of the token its body names.
func (in *Introspector) answer(ctx context.Context, client *oauth.Client, params url.Values, cred oauth.ClientCredentials) (*Introspection, error) {
	token := params.Get("token")
	if token == "" {
		return nil, oauth.InvalidRequest("the token parameter is required")
	}
	// token_type_hint (RFC 7662 2.1) is not needed: a token is found by its hash whatever its
	// kind, and an unknown hint is ignored as the RFC allows.
	now := in.tokens.Clock.Now()
	// A token issued in another region of a multi-region deployment is read at its home when
	// this region's replica does not have it yet.
	t, err := in.tokens.Grants.GetToken(oauth.WithHome(ctx, oauth.HomeOf(token)), oauth.HashToken(token), now)
	if errors.Is(err, oauth.ErrNotFound) {
		return &Introspection{Active: false}, nil
	}
	if err != nil {
		return nil, oauth.AsError(err)
	}
	g := t.Grant
	own := g.ClientID == client.ID
	switch {
	case t.Kind == oauth.KindRefresh && (!own || t.Spent):
		// Refresh tokens concern only their client; a spent one is no longer usable.
		return &Introspection{Active: false}, nil
	case t.Kind == oauth.KindAccess && !own && !in.resourceServers[client.ID]:
		return &Introspection{Active: false}, nil
	case own && g.CertThumbprint != "" && !certEqual(g.CertThumbprint, cred.CertThumbprint):
		return &Introspection{Active: false}, nil
	case !now.Before(t.ExpiresAt) || !now.Before(g.ExpiresAt):
		return &Introspection{Active: false}, nil
	}
	out := &Introspection{
		Active:   true,
		Scope:    t.Scopes.String(),
		ClientID: g.ClientID,
		Sub:      g.UID,
		Exp:      t.ExpiresAt.Unix(),
		Iat:      t.IssuedAt.Unix(),
		Iss:      in.tokens.Issuer,
		Metadata: &oauth.TokenMetadata{UID: g.UID, CompanyProfileID: g.CompanyProfileID, CompanyUserID: g.CompanyUserID},
		// RFC 9396 9.1.
		AuthorizationDetails: t.Details(),
	}
	if g.HasNoUser() {
		// A client_credentials token names no user: no sub (RFC 7662 2.2 makes it optional),
		// no metadata.
		out.Sub, out.Metadata = "", nil
	}
	if t.Kind == oauth.KindAccess {
		out.TokenType = "Bearer"
		if g.DPoPJKT != "" {
			out.TokenType = oauth.TokenTypeDPoP // RFC 9449 6.2
		}
	}
	if g.CertThumbprint != "" || g.DPoPJKT != "" {
		// The resource server checks the binding itself (RFC 8705 3.2, RFC 9449 6.2).
		out.Cnf = &Confirmation{X5tS256: g.CertThumbprint, JKT: g.DPoPJKT}
	}
	return out, nil
}

// certEqual compares two certificate thumbprints in constant time; an empty one never matches.
func certEqual(a, b string) bool {
	return a != "" && b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
