// Package grantmgmt is the grant management endpoint's use case (Grant Management for OAuth
// 2.0, the OpenID Foundation's FAPI draft): a client queries (GET) or revokes (DELETE) one of
// its grants at /grants/{grant_id} with an access token of its own. The token is checked as a
// resource checks it (oauth.Service.ValidatePresented: one read, its certificate or DPoP
// binding, the proof's jti recorded last), so the endpoint is sender-constrained as the token
// endpoint is. Its rules, all here:
//
//   - GET needs a token with scope grant_management_query, DELETE one with
//     grant_management_revoke: else 403 insufficient_scope;
//   - the grant must be live and belong to the token's client and to the token's user: a grant
//     that is unknown, revoked, expired, another client's or another user's is one answer,
//     404 invalid_grant_id, so a client learns nothing of grants not its own;
//   - every refusal is decided before the proof's jti is recorded, so a refused request writes
//     nothing; a revocation ends the grant and every token of it at once (GrantStore.RevokeGrant)
//     and is audited (grant_revoked, reason grant_management);
//   - the query answer carries the grant's signed consent receipt (shared/receipt), made on
//     demand; a client for which no receipt can be made (receipt.ErrNoSector) gets the answer
//     without one, a key backend that fails is a 5xx as at the token endpoint.
package grantmgmt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/acmebank/authserver/shared/authorizer"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/receipt"
)

// Deps are what the endpoint needs: the token domain with its grants, replay store, clock,
// origins (a DPoP proof's htu) and audit log, and the maker of consent receipts.
type Deps struct {
	Tokens *oauth.Service
	// Receipts signs the consent receipt of the query answer (through the key backend).
	Receipts *receipt.Maker
}

// Manager answers grant management requests.
type Manager struct {
	tokens   *oauth.Service
	receipts *receipt.Maker
}

// New returns the use case over d, or an error naming every dependency it lacks.
func New(d Deps) (*Manager, error) {
	if d.Tokens == nil {
		return nil, errors.New("grantmgmt: missing Tokens")
	}
	var missing []string
	if d.Receipts == nil {
		missing = append(missing, "Receipts")
	}
	if d.Tokens.Grants == nil {
		missing = append(missing, "Tokens.Grants")
	}
	if d.Tokens.Replay == nil {
		missing = append(missing, "Tokens.Replay")
	}
	if d.Tokens.Clock == nil {
		missing = append(missing, "Tokens.Clock")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("grantmgmt: missing %s", strings.Join(missing, ", "))
	}
	return &Manager{tokens: d.Tokens, receipts: d.Receipts}, nil
}

// Request is a grant management request as the HTTP adapter read it.
type Request struct {
	// Method is GET (query) or DELETE (revoke).
	Method  string
	GrantID string
	Token   string
	// DPoP reports the DPoP scheme (Authorization: DPoP …); false is Bearer.
	DPoP           bool
	CertThumbprint string
	Proof          oauth.ProofHeaders
}

// Scope is one entry of a grant's scopes in the query response: the scopes, space-separated
// (the spec groups them by resource; this server has one resource, so one entry).
type Scope struct {
	Scope string `json:"scope"`
}

// Status is the query response (Grant Management 6.2): the grant's scopes, the names of the
// claims they release and its authorization_details, with when the grant was created, last
// rewritten (a merge or a replace) and ends, in seconds since the epoch, and its signed
// consent receipt (this server's additions).
type Status struct {
	Scopes               []Scope         `json:"scopes"`
	Claims               []string        `json:"claims,omitempty"`
	AuthorizationDetails json.RawMessage `json:"authorization_details,omitempty"`
	CreatedAt            int64           `json:"created_at"`
	UpdatedAt            int64           `json:"updated_at,omitempty"`
	ExpiresAt            int64           `json:"expires_at"`
	// ConsentReceipt is the grant's consent receipt, a compact JWS (receipt.Type); absent
	// when none can be made for the client (receipt.ErrNoSector).
	ConsentReceipt string `json:"consent_receipt,omitempty"`
}

// notFound is the one answer to a grant the client may not see.
func notFound() *oauth.Error {
	return &oauth.Error{Code: oauth.ErrCodeInvalidGrantID, Description: "no such grant for this client and user", Status: http.StatusNotFound}
}

// maxGrantIDBytes bounds the path's grant id before any read: ours are short ids.
const maxGrantIDBytes = 128

// Query answers GET /grants/{grant_id}.
func (m *Manager) Query(ctx context.Context, r Request) (*Status, error) {
	rec, err := m.check(ctx, r, oauth.ScopeGrantQuery)
	if err != nil {
		return nil, err
	}
	g := rec.Grant
	st := &Status{Scopes: []Scope{{Scope: g.Scopes.String()}}, AuthorizationDetails: g.AuthorizationDetails,
		CreatedAt: g.CreatedAt.Unix(), ExpiresAt: g.ExpiresAt.Unix()}
	if !g.UpdatedAt.IsZero() {
		st.UpdatedAt = g.UpdatedAt.Unix()
	}
	for name := range g.Claims.ForScopes(g.Scopes) {
		st.Claims = append(st.Claims, name)
	}
	slices.Sort(st.Claims)
	jws, err := m.receipts.Receipt(ctx, g)
	switch {
	case errors.Is(err, receipt.ErrNoSector):
		// The client model has no sector identifier yet: the answer goes without a receipt.
	case err != nil:
		return nil, oauth.AsError(err)
	default:
		st.ConsentReceipt = jws
	}
	return st, nil
}

// Revoke answers DELETE /grants/{grant_id}: the grant and every token of it end at once.
func (m *Manager) Revoke(ctx context.Context, r Request) error {
	rec, err := m.check(ctx, r, oauth.ScopeGrantRevoke)
	if err != nil {
		return err
	}
	ctx = oauth.WithHome(ctx, oauth.HomeOf(r.Token))
	if err := m.tokens.Grants.RevokeGrant(ctx, rec.Grant.ID, m.tokens.Clock.Now()); err != nil {
		return oauth.AsError(err)
	}
	oauth.WriteAudit(ctx, m.auditLog(), "grant_revoked", &rec.Grant, slog.String("reason", "grant_management"))
	return nil
}

func (m *Manager) auditLog() *slog.Logger {
	if m.tokens.Audit != nil {
		return m.tokens.Audit
	}
	return m.tokens.Log
}

// check validates the presented token, with scope need, and reads the grant it names, which
// must be the token's client's and user's, live and not revoked. Every refusal comes before
// the DPoP proof's jti is recorded (Presentation.Allow), so it writes nothing. Errors are
// shaped for RFC 6750's challenge (authorizer.ScopeError, authorizer.DPoPAware).
func (m *Manager) check(ctx context.Context, r Request, need string) (oauth.GrantRecord, error) {
	var rec oauth.GrantRecord
	var refused error
	allow := func(t oauth.Token) error {
		if !t.Scopes.Has(need) {
			refused = &authorizer.ScopeError{Err: oauth.InsufficientScope("the access token was not granted the %s scope", need),
				Required: oauth.Scopes{need}}
			return refused
		}
		if r.GrantID == "" || len(r.GrantID) > maxGrantIDBytes {
			refused = notFound()
			return refused
		}
		got, err := m.tokens.Grants.GetGrant(oauth.WithHome(ctx, oauth.HomeOf(r.Token)), r.GrantID, m.tokens.Clock.Now())
		switch {
		case errors.Is(err, oauth.ErrNotFound):
			refused = notFound()
			return refused
		case err != nil:
			refused = oauth.AsError(err)
			return refused
		}
		g := &got.Grant
		if got.Revoked || g.ClientID != t.Grant.ClientID || g.UID != t.Grant.UID || !g.ExpiresAt.After(m.tokens.Clock.Now()) {
			refused = notFound()
			return refused
		}
		rec = got
		return nil
	}
	_, err := m.tokens.ValidatePresented(ctx, oauth.Presentation{Token: r.Token, DPoP: r.DPoP, CertThumbprint: r.CertThumbprint,
		Proof: m.tokens.ProofRequest(r.Proof), Allow: allow})
	if refused != nil {
		return oauth.GrantRecord{}, refused
	}
	if err != nil {
		return oauth.GrantRecord{}, authorizer.DPoPAware(err, r.DPoP)
	}
	return rec, nil
}
