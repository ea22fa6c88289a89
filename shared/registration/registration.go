// Package registration is dynamic client registration (RFC 7591) and its management (RFC
// 7592): a third party registers a client with an operator's initial access token or a
// software statement of a directory the deployment trusts, and reads, replaces and deletes it
// with the registration access token it was given. The metadata go through the operator's
// own rules (admin.Service.NewClient, the fapi2 profile included), so a registered client is
// one authctl could have made; the rules of who may register, and what a registration may
// ask for beyond authctl's, are this package's alone.
package registration

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/acmebank/authserver/shared/admin"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/oauth"
)

// MaxBodyBytes bounds a registration or update request: what an authorized caller can have
// stored is at most this (an inline jwks holds at most 10 keys, oauth.ValidClientJWKS); an
// unauthorized caller stores nothing.
const MaxBodyBytes = 64 << 10

// Store is what registration keeps: clients, and the operator's initial access tokens.
type Store interface {
	oauth.ClientStore
	oauth.RegistrationStore
}

// Deps are what a Registrar is built from.
type Deps struct {
	// Admin is the operator's service over the store: its NewClient checks every registration
	// and its DeleteClient deletes (revoking the client's grants, as authctl does).
	Admin *admin.Service
	// Store holds the clients and the initial access tokens.
	Store Store
	// Clock is the one clock; Audit receives client_registered, client_updated,
	// client_deleted and registration_refused (ids and reasons, never a token).
	Clock oauth.Clock
	Audit *slog.Logger
	// Endpoint is the registration endpoint's absolute URL; a client's registration_client_uri
	// is Endpoint/{client_id}.
	Endpoint string
	// Directories are the software statement issuers the deployment trusts
	// (AUTH_REGISTRATION_DIRECTORIES); DirectoryJWKS fetches those published at a jwks_uri
	// (nil: such directories' statements are refused).
	Directories   []config.Directory
	DirectoryJWKS *oauth.JWKSCache
}

// Registrar serves registrations and their management.
type Registrar struct {
	d      Deps
	keysOf directoryKeys
}

// New returns a Registrar, or an error naming every missing dependency.
func New(d Deps) (*Registrar, error) {
	var errs []error
	if d.Admin == nil {
		errs = append(errs, errors.New("registration: missing Admin"))
	}
	if d.Store == nil {
		errs = append(errs, errors.New("registration: missing Store"))
	}
	if d.Clock == nil {
		errs = append(errs, errors.New("registration: missing Clock"))
	}
	if d.Audit == nil {
		errs = append(errs, errors.New("registration: missing Audit"))
	}
	if u, err := url.Parse(d.Endpoint); d.Endpoint == "" || err != nil || !u.IsAbs() {
		errs = append(errs, errors.New("registration: missing Endpoint (an absolute URL)"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Registrar{d: d, keysOf: inlineOrFetched(d.DirectoryJWKS)}, nil
}

// Request is what a call carries: a management request names its client (the registration_client_uri's last
// segment) and presents a bearer token; a registration's token is the initial access token
// ("" when none), and its body the JSON metadata.
type Request struct {
	Token    string
	Body     []byte
	ClientID string
}

// Response is RFC 7591 3.2.1's client information response: the client's metadata as
// registered, with what the server provisioned. Its secrets (client_secret,
// registration_access_token) exist here only: the store keeps their hashes.
type Response = map[string]any

// Register registers a client. The request is authorized by an initial access token (taken:
// it registers one client) or a software statement, or both; with neither it is refused with
// invalid_token (401, RFC 6750 3.1, as RFC 7591 3 says for a missing or bad initial access
// token). Every check that can fail runs before the token is taken, so a refused request
// writes nothing and leaves the token usable.
func (g *Registrar) Register(ctx context.Context, token string, body []byte) (Response, error) {
	req := Request{Token: token, Body: body}
	if req.Token == "" {
		// No token: only a software statement can authorize; without one the caller learns
		// nothing of what the server makes of its metadata.
		if m, err := decodeObject(req.Body); err != nil || m["software_statement"] == nil {
			return nil, g.refuse(ctx, "", "no_authorization", oauth.InvalidToken("registration needs an initial access token or a software statement"))
		}
	}
	now := g.d.Clock.Now()
	if req.Token != "" {
		// An unknown token is refused before the metadata are read: nothing of them (a
		// jwks_uri to fetch, a directory's keys) is acted on for a caller the operator did not
		// authorize. One read at the token's home; the take below decides its single use.
		_, err := g.d.Store.GetInitialAccessToken(oauth.WithHome(ctx, oauth.HomeOf(req.Token)), oauth.HashToken(req.Token), now)
		if errors.Is(err, oauth.ErrNotFound) {
			return nil, g.refuse(ctx, "", "initial_access_token", oauth.InvalidToken("the initial access token is unknown, expired or used"))
		}
		if err != nil {
			return nil, g.refuse(ctx, "", "store", oauth.AsError(err))
		}
	}
	r, st, err := g.read(ctx, req.Body, now)
	if err != nil {
		return nil, g.refuse(ctx, "", "metadata", err)
	}
	g.profile(&r, st, "")
	if p := oauth.InitialAccessProfile(req.Token); p != "" {
		r.spec.Profile = p // the token's profile binds the client too
	}
	r.spec.ID = ""
	c, secret, err := g.d.Admin.NewClient(ctx, r.spec)
	if err != nil {
		return nil, g.refuse(ctx, "", "metadata", asMetadataError(err))
	}
	if req.Token != "" {
		iat, err := g.d.Store.TakeInitialAccessToken(oauth.WithHome(ctx, oauth.HomeOf(req.Token)), oauth.HashToken(req.Token), now)
		if errors.Is(err, oauth.ErrNotFound) {
			return nil, g.refuse(ctx, "", "initial_access_token", oauth.InvalidToken("the initial access token is unknown, expired or used"))
		}
		if err != nil {
			return nil, g.refuse(ctx, "", "store", oauth.AsError(err))
		}
		if iat.Profile != oauth.InitialAccessProfile(req.Token) {
			// The prefix is covered by the hash, so the stored profile is the prefix's; a
			// token stored otherwise is the operator tool's bug, and registers nothing.
			return nil, g.refuse(ctx, "", "initial_access_token", oauth.ServerError(errors.New("initial access token stored with another profile than its prefix names")))
		}
	}
	rat := oauth.NewSecret(oauth.PrefixRegistrationAccess)
	g.stamp(&c, r, st, rat)
	if err := g.d.Store.CreateClient(ctx, c); err != nil {
		return nil, g.refuse(ctx, c.ID, "store", oauth.AsError(err))
	}
	g.audit(ctx, "client_registered", c.ID, directoryOf(st))
	out := g.response(&c)
	if secret != "" {
		out["client_secret"] = secret
		out["client_secret_expires_at"] = 0
	}
	out["registration_access_token"] = rat
	return out, nil
}

// Read answers a client's registration (RFC 7592 2.1). Its secrets are not answered again:
// the store keeps their hashes only.
func (g *Registrar) Read(ctx context.Context, clientID, token string) (Response, error) {
	req := Request{Token: token, ClientID: clientID}
	c, err := g.authorize(ctx, req, "read")
	if err != nil {
		return nil, err
	}
	return g.response(&c), nil
}

// Replace replaces a client's registration with the request's metadata (RFC 7592 2.2): a
// metadata member left out is removed, and the whole is checked as a registration is, the
// client's software statement (or a new one in the request) taking precedence again. Its
// client_id must be the client's. The client keeps its id, its secret (a client that moves to
// a secret-based method gets a new one, answered once) and its registration access token,
// which is not rotated: a client that lost the answer still holds a working token.
func (g *Registrar) Replace(ctx context.Context, clientID, token string, body []byte) (Response, error) {
	req := Request{Token: token, ClientID: clientID, Body: body}
	old, err := g.authorize(ctx, req, "update")
	if err != nil {
		return nil, err
	}
	now := g.d.Clock.Now()
	r, st, err := g.read(ctx, req.Body, now)
	if err != nil {
		return nil, g.refuse(ctx, old.ID, "metadata", err)
	}
	members, _ := decodeObject(req.Body) // decoded by read
	var id string
	if raw, ok := members["client_id"]; !ok || json.Unmarshal(raw, &id) != nil || id != old.ID {
		return nil, g.refuse(ctx, old.ID, "metadata", oauth.InvalidClientMetadata("client_id must be the client's own"))
	}
	if st == nil && old.SoftwareStatement != "" {
		// The statement the client registered with still takes precedence over the request,
		// its signature already verified at registration.
		if st, err = storedStatement(old); err != nil {
			return nil, g.refuse(ctx, old.ID, "store", oauth.ServerError(err))
		}
		if err := applyFields(&r, st.claims); err != nil {
			return nil, g.refuse(ctx, old.ID, "metadata", err)
		}
	}
	g.profile(&r, st, old.Profile)
	r.spec.ID = old.ID
	next, secret, err := g.d.Admin.NewClient(ctx, r.spec)
	if err != nil {
		return nil, g.refuse(ctx, old.ID, "metadata", asMetadataError(err))
	}
	var out oauth.Client
	err = g.d.Store.UpdateClient(ctx, old.ID, func(cur oauth.Client) (oauth.Client, error) {
		if !sameToken(cur.RegistrationTokenHash, old.RegistrationTokenHash) {
			return cur, oauth.InvalidToken("the registration access token is not this client's")
		}
		c := next
		c.CreatedAt, c.Disabled = cur.CreatedAt, cur.Disabled
		if len(c.SecretHashes) > 0 && len(cur.SecretHashes) > 0 {
			c.SecretHashes, secret = cur.SecretHashes, "" // the client keeps its secret
		}
		g.stamp(&c, r, st, "")
		c.RegistrationTokenHash = cur.RegistrationTokenHash
		if st == nil {
			c.SoftwareStatement, c.Directory = "", ""
		}
		out = c
		return c, nil
	})
	if err != nil {
		return nil, g.storeRefusal(ctx, old.ID, "update", err)
	}
	g.audit(ctx, "client_updated", out.ID, out.Directory)
	resp := g.response(&out)
	if secret != "" {
		resp["client_secret"] = secret
		resp["client_secret_expires_at"] = 0
	}
	return resp, nil
}

// Delete deletes a client (RFC 7592 2.3) as authctl does: disabled, every grant revoked (its
// tokens fail at once), then deleted.
func (g *Registrar) Delete(ctx context.Context, clientID, token string) error {
	req := Request{Token: token, ClientID: clientID}
	c, err := g.authorize(ctx, req, "delete")
	if err != nil {
		return err
	}
	if _, err := g.d.Admin.DeleteClient(ctx, c.ID); err != nil {
		return g.storeRefusal(ctx, c.ID, "delete", err)
	}
	g.audit(ctx, "client_deleted", c.ID, c.Directory)
	return nil
}

// storeRefusal answers a management write the store refused: the client deleted meanwhile (by
// a racing delete) is invalid_token, as for a deleted client's token; other writes to the
// client that kept winning the store's compare-and-swap (it retries) are
// temporarily_unavailable, nothing written and the request fit to be sent again; anything else
// is the store's failure.
func (g *Registrar) storeRefusal(ctx context.Context, clientID, action string, err error) error {
	switch {
	case errors.Is(err, oauth.ErrNotFound):
		return g.refuse(ctx, clientID, action+"_unauthorized", oauth.InvalidToken("the registration access token is unknown or not this client's"))
	case errors.Is(err, oauth.ErrConflict):
		return g.refuse(ctx, clientID, "conflict", oauth.Unavailable(err))
	}
	return g.refuse(ctx, clientID, "store", oauth.AsError(err))
}

// authorize reads the client of a management request and checks its registration access
// token in constant time. An unknown client, one registered by an operator (no token) and a
// wrong token are one answer, invalid_token (401), so the answer does not tell which.
func (g *Registrar) authorize(ctx context.Context, req Request, action string) (oauth.Client, error) {
	deny := oauth.InvalidToken("the registration access token is unknown or not this client's")
	if req.Token == "" || req.ClientID == "" {
		return oauth.Client{}, g.refuse(ctx, req.ClientID, action+"_unauthorized", deny)
	}
	c, err := g.d.Store.GetClient(ctx, req.ClientID)
	if errors.Is(err, oauth.ErrNotFound) {
		return oauth.Client{}, g.refuse(ctx, req.ClientID, action+"_unauthorized", deny)
	}
	if err != nil {
		return oauth.Client{}, g.refuse(ctx, req.ClientID, "store", oauth.AsError(err))
	}
	if c.RegistrationTokenHash == "" || !sameToken(oauth.HashToken(req.Token), c.RegistrationTokenHash) {
		return oauth.Client{}, g.refuse(ctx, req.ClientID, action+"_unauthorized", deny)
	}
	return c, nil
}

func sameToken(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// read decodes a request's metadata, verifies its software statement if it has one and lays
// the statement's claims over the request's (RFC 7591 2.3: they take precedence), then
// applies the registration's own rules.
func (g *Registrar) read(ctx context.Context, body []byte, now time.Time) (request, *statement, error) {
	var r request
	if len(body) > MaxBodyBytes {
		return r, nil, oauth.InvalidClientMetadata("the request is larger than %d bytes", MaxBodyBytes)
	}
	members, err := decodeObject(body)
	if err != nil {
		return r, nil, oauth.InvalidClientMetadata("%s", err)
	}
	var st *statement
	if raw, ok := members["software_statement"]; ok {
		var jws string
		if err := json.Unmarshal(raw, &jws); err != nil {
			return r, nil, oauth.InvalidSoftwareStatement("software_statement must be a string (a JWT)")
		}
		if st, err = verifyStatement(ctx, jws, g.d.Directories, g.keysOf, now); err != nil {
			return r, nil, err
		}
	}
	if err := applyFields(&r, members); err != nil {
		return r, nil, err
	}
	if st != nil {
		if err := applyFields(&r, st.claims); err != nil {
			return r, nil, oauth.InvalidSoftwareStatement("the software statement's metadata: %s", oauth.AsError(err).Description)
		}
	}
	if err := thirdPartyRules(&r); err != nil {
		return r, nil, err
	}
	return r, st, nil
}

// thirdPartyRules are what a registration must meet beyond the operator's rules: redirect
// URIs over https to a named host (no loopback http, no custom scheme, no wildcard), since a
// third party's client is a web application; and PKCE always.
func thirdPartyRules(r *request) error {
	for _, raw := range r.spec.RedirectURIs {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "https" || u.Hostname() == "" || strings.ContainsAny(u.Host, "*%") {
			return oauth.InvalidRedirectURI("redirect URI %q must be an https URL with a host name (no wildcard)", raw)
		}
	}
	r.spec.RequirePKCE = true
	return nil
}

// profile sets the security profile the registration is held to: the directory's, else the
// one the client had (an update), else none; an initial access token's is applied by Register.
func (g *Registrar) profile(r *request, st *statement, current string) {
	r.spec.Profile = current
	if st != nil && st.directory.Profile != "" {
		r.spec.Profile = st.directory.Profile
	}
}

// stamp sets on c what the registration adds to a spec.
func (g *Registrar) stamp(c *oauth.Client, r request, st *statement, rat string) {
	c.SoftwareID, c.SoftwareVersion = r.softwareID, r.softwareVersion
	if st != nil {
		c.SoftwareStatement, c.Directory = st.raw, st.directory.Issuer
	}
	if rat != "" {
		c.RegistrationTokenHash = oauth.HashToken(rat)
	}
}

// response is the client information response of c, without its secrets.
func (g *Registrar) response(c *oauth.Client) Response {
	out := Response(metadataOf(c))
	out["client_id"] = c.ID
	out["client_id_issued_at"] = c.CreatedAt.Unix()
	out["registration_client_uri"] = strings.TrimSuffix(g.d.Endpoint, "/") + "/" + url.PathEscape(c.ID)
	if c.SoftwareStatement != "" {
		out["software_statement"] = c.SoftwareStatement
	}
	return out
}

// storedStatement is the statement a client registered with, its claims decoded again (its
// signature was verified when it was presented).
func storedStatement(c oauth.Client) (*statement, error) {
	// Verified at registration; read again here with the library, not re-verified (the
	// directory's key may have rotated since).
	tok, err := jwt.ParseSigned(c.SoftwareStatement, StatementAlgs)
	if err != nil {
		return nil, fmt.Errorf("client %s: stored software statement: %w", c.ID, err)
	}
	var members map[string]json.RawMessage
	if err := tok.UnsafeClaimsWithoutVerification(&members); err != nil {
		return nil, fmt.Errorf("client %s: stored software statement: %w", c.ID, err)
	}
	return &statement{raw: c.SoftwareStatement, directory: config.Directory{Issuer: c.Directory}, claims: members}, nil
}

// asMetadataError turns admin's refusal into RFC 7591's error: a redirect URI's is
// invalid_redirect_uri, every other rule's invalid_client_metadata; anything else (a store
// failure fetching nothing here) is passed on.
func asMetadataError(err error) error {
	if !errors.Is(err, admin.ErrInvalid) {
		return oauth.AsError(err)
	}
	msg := err.Error()
	if strings.Contains(msg, "redirect URI") {
		return oauth.InvalidRedirectURI("%s", msg)
	}
	return oauth.InvalidClientMetadata("%s", msg)
}

func directoryOf(st *statement) string {
	if st == nil {
		return ""
	}
	return st.directory.Issuer
}

// audit records a registration event: the client and the directory, never a token.
func (g *Registrar) audit(ctx context.Context, event, clientID, directory string) {
	g.d.Audit.LogAttrs(ctx, slog.LevelInfo, "audit", slog.String("event", event), slog.String("client_id", clientID),
		slog.String("uid", ""), slog.String("grant_id", ""), slog.String("ip", ""), slog.String("reason", ""),
		slog.String("directory", directory))
}

// refuse audits a refused request (registration_refused with its reason and the error code)
// and returns err.
func (g *Registrar) refuse(ctx context.Context, clientID, reason string, err error) error {
	code := oauth.AsError(err).Code
	g.d.Audit.LogAttrs(ctx, slog.LevelInfo, "audit", slog.String("event", "registration_refused"), slog.String("client_id", clientID),
		slog.String("uid", ""), slog.String("grant_id", ""), slog.String("ip", ""), slog.String("reason", reason),
		slog.String("error", code))
	return err
}
