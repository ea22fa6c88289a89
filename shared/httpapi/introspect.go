package httpapi

import (
	"crypto/subtle"
	"errors"
	"log/slog"
	"net/http"

	"github.com/acmebank/authserver/shared/oauth"
)

// IntrospectHandler serves token introspection (RFC 7662) to authenticated clients, with the
// same client authentication as the token and revocation endpoints (secret, Basic or post, or
// the registered certificate of an RFC 8705 client).
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
type IntrospectHandler struct {
	Service *oauth.Service
	Log     *slog.Logger
	// ResourceServers are the client ids that may introspect every access token.
	ResourceServers map[string]bool
}

// Introspection is the RFC 7662 2.2 response, with the documented metadata object.
type Introspection struct {
	Active    bool                 `json:"active"`
	Scope     string               `json:"scope,omitempty"`
	ClientID  string               `json:"client_id,omitempty"`
	Sub       string               `json:"sub,omitempty"`
	Exp       int64                `json:"exp,omitempty"`
	Iat       int64                `json:"iat,omitempty"`
	Iss       string               `json:"iss,omitempty"`
	TokenType string               `json:"token_type,omitempty"`
	Cnf       *Confirmation        `json:"cnf,omitempty"`
	Metadata  *oauth.TokenMetadata `json:"metadata,omitempty"`
}

// Confirmation is the RFC 8705 3.1 confirmation of a certificate-bound token.
type Confirmation struct {
	X5tS256 string `json:"x5t#S256,omitempty"`
	JKT     string `json:"jkt,omitempty"`
}

func (h *IntrospectHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, http.MethodPost)
		return
	}
	resp, err := h.introspect(w, r)
	if err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (h *IntrospectHandler) introspect(w http.ResponseWriter, r *http.Request) (*Introspection, error) {
	v, client, cred, err := authenticatedRequest(w, r, h.Service)
	if err != nil {
		return nil, err
	}
	token := v.Get("token")
	if token == "" {
		return nil, oauth.InvalidRequest("the token parameter is required")
	}
	// token_type_hint (RFC 7662 2.1) is not needed: a token is found by its hash whatever its
	// kind, and an unknown hint is ignored as the RFC allows.
	now := h.Service.Clock.Now()
	// A token issued in another region of a multi-region deployment is read at its home when
	// this region's replica does not have it yet.
	t, err := h.Service.Grants.GetToken(oauth.WithHome(r.Context(), oauth.HomeOf(token)), oauth.HashToken(token), now)
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
	case t.Kind == oauth.KindAccess && !own && !h.ResourceServers[client.ID]:
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
		Iss:      h.Service.Issuer,
		Metadata: &oauth.TokenMetadata{UID: g.UID, CompanyProfileID: g.CompanyProfileID, CompanyUserID: g.CompanyUserID},
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
