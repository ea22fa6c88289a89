package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/acmebank/authserver/shared/oauth/rar"
)

// Grant Management for OAuth 2.0 (OpenID Foundation, FAPI working group): a client names the
// grant it wants at authorization and may then query and revoke it. This file is its rules'
// one place at authorization and at the exchange; the query and revocation of /grants/{id}
// are package grantmgmt's.
//
//   - grant_management_action=create (or no action): a new grant. With an action (any of the
//     three) the grant is Managed: its token responses carry grant_id (the spec's token
//     response, as its editors settled it: the AS returns grant_id when the request carried
//     grant_management_action).
//   - merge or replace need grant_id; create refuses one, and grant_id without an action is
//     refused too. The grant must exist, be live and be this client's (checked at the request,
//     PAR or authorize) and the signed-in user's (checked at the consent's decision); else
//     invalid_grant_id, and nothing is stored. A payment grant is one-time: it cannot be
//     merged or replaced, nor can payment details be merged or replaced into a grant.
//   - the decision computes the new grant from the stored one as read (merge: the union of
//     its scopes and details and the request's; replace: the request's only) under the same
//     id, and its code names the revision it was computed from (Code.Rewrite). The code's
//     exchange then rewrites the grant in one atomic write (GrantStore.IssueTokens with
//     Issue.Rewrite): every old token dies, the new tokens carry the new grant. Of racing
//     merges of one grant one wins, and the others get invalid_grant and write nothing.

// Grant management actions (grant_management_action, and the metadata's
// grant_management_actions_supported with query and revoke).
const (
	GrantActionCreate  = "create"
	GrantActionMerge   = "merge"
	GrantActionReplace = "replace"
	GrantActionQuery   = "query"
	GrantActionRevoke  = "revoke"
)

// GrantManagementActions are the actions this server supports, as discovery lists them.
var GrantManagementActions = []string{GrantActionCreate, GrantActionMerge, GrantActionReplace, GrantActionQuery, GrantActionRevoke}

// The scopes of an access token that may call the grant management endpoint: GET needs
// ScopeGrantQuery, DELETE ScopeGrantRevoke.
const (
	ScopeGrantQuery  = "grant_management_query"
	ScopeGrantRevoke = "grant_management_revoke"
)

// ErrCodeInvalidGrantID is the authorization error of a grant_id that is unknown, revoked,
// not the client's or not the user's.
const ErrCodeInvalidGrantID = "invalid_grant_id"

// InvalidGrantID is an invalid_grant_id error (400).
func InvalidGrantID(format string, args ...any) *Error {
	return newError(ErrCodeInvalidGrantID, http.StatusBadRequest, format, args...)
}

// maxGrantIDBytes bounds the grant_id parameter: ours are short ids.
const maxGrantIDBytes = 128

// checkGrantManagement checks the request's grant_management_action and grant_id for client
// c (details are the request's validated authorization_details): nil when they may be kept
// with the pending request. For merge and replace it reads the grant once.
func (s *Service) checkGrantManagement(ctx context.Context, c *Client, p AuthorizeParams, details json.RawMessage) *Error {
	action, id := p.GrantManagementAction, p.GrantID
	switch action {
	case "":
		if id != "" {
			return InvalidRequest("grant_id needs grant_management_action merge or replace")
		}
		return nil
	case GrantActionCreate:
		if id != "" {
			return InvalidRequest("grant_management_action=create makes a new grant: send no grant_id")
		}
		return nil
	case GrantActionMerge, GrantActionReplace:
	default:
		return InvalidRequest("grant_management_action must be create, merge or replace")
	}
	if id == "" {
		return InvalidRequest("grant_management_action=%s needs grant_id", action)
	}
	if holdsPayment(details) {
		return InvalidRequest("a payment is authorized once: ask for it with grant_management_action=create, not %s", action)
	}
	_, err := s.managedGrant(ctx, c.ID, id, "")
	return err
}

// managedGrant reads the grant a merge or replace names and checks it may be rewritten for
// client clientID and, when uid is not empty, user uid: live, not revoked, theirs, not a
// payment grant. Every refusal is invalid_grant_id with the same description, so a client
// learns nothing of grants not its own.
func (s *Service) managedGrant(ctx context.Context, clientID, id, uid string) (GrantRecord, *Error) {
	unknown := InvalidGrantID("the grant_id is unknown, revoked, or not of this client and user")
	if len(id) > maxGrantIDBytes {
		return GrantRecord{}, unknown
	}
	rec, err := s.Grants.GetGrant(ctx, id, s.now())
	if errors.Is(err, ErrNotFound) {
		return GrantRecord{}, unknown
	}
	if err != nil {
		return GrantRecord{}, AsError(err)
	}
	g := &rec.Grant
	if rec.Revoked || g.ClientID != clientID || (uid != "" && g.UID != uid) || !g.ExpiresAt.After(s.now()) {
		return GrantRecord{}, unknown
	}
	if g.IsPayment() {
		return GrantRecord{}, InvalidGrantID("a payment grant is one-time: it cannot be merged or replaced")
	}
	return rec, nil
}

// rewrite turns the grant g a decision is about to issue into the rewrite of the grant the
// request names (merge or replace), read again now that the user is known: the same id and
// creation, the merged scopes and details for a merge, the next revision; rw names the
// revision it was computed from. For a request without merge or replace it returns g as it is.
func (s *Service) rewrite(ctx context.Context, r *AuthRequest, u *User, g Grant) (Grant, *Rewrite, *Error) {
	g.Managed = r.GrantManagementAction != ""
	if r.GrantManagementAction != GrantActionMerge && r.GrantManagementAction != GrantActionReplace {
		return g, nil, nil
	}
	rec, gerr := s.managedGrant(ctx, r.ClientID, r.GrantID, u.UID)
	if gerr != nil {
		return Grant{}, nil, gerr
	}
	old := rec.Grant
	if r.GrantManagementAction == GrantActionMerge {
		g.Scopes = mergeScopes(old.Scopes, g.Scopes)
		details, err := mergeDetails(old.AuthorizationDetails, g.AuthorizationDetails)
		if err != nil {
			return Grant{}, nil, AsError(err)
		}
		if len(details) > rar.MaxBytes {
			return Grant{}, nil, InvalidAuthorizationDetails("the merged authorization_details would exceed %d bytes", rar.MaxBytes)
		}
		g.AuthorizationDetails = details
		g.Claims = u.Claims.Only(g.Scopes)
	}
	g.ID, g.CreatedAt, g.UpdatedAt, g.Revision = old.ID, old.CreatedAt, g.CreatedAt, old.Revision+1
	return g, &Rewrite{Action: r.GrantManagementAction, Revision: old.Revision}, nil
}

// mergeScopes is the union of two scope lists: a's, then those of b it lacks.
func mergeScopes(a, b Scopes) Scopes {
	out := append(Scopes{}, a...)
	for _, x := range b {
		if !out.Has(x) {
			out = append(out, x)
		}
	}
	return out
}

// mergeDetails is the union of two validated authorization_details arrays: a's objects, then
// those of b not already in a (compared as compacted JSON).
func mergeDetails(a, b json.RawMessage) (json.RawMessage, error) {
	if len(a) == 0 {
		return b, nil
	}
	if len(b) == 0 {
		return a, nil
	}
	var as, bs []json.RawMessage
	if err := json.Unmarshal(a, &as); err != nil {
		return nil, fmt.Errorf("merge authorization_details: %w", err)
	}
	if err := json.Unmarshal(b, &bs); err != nil {
		return nil, fmt.Errorf("merge authorization_details: %w", err)
	}
	out := as
	for _, d := range bs {
		var cd bytes.Buffer
		if err := json.Compact(&cd, d); err != nil {
			return nil, fmt.Errorf("merge authorization_details: %w", err)
		}
		dup := false
		for _, e := range as {
			var ce bytes.Buffer
			if json.Compact(&ce, e) == nil && bytes.Equal(ce.Bytes(), cd.Bytes()) {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, d)
		}
	}
	return json.Marshal(out)
}

// rewriteRefused answers the exchange of a merge's or replace's code whose rewrite the store
// refused: the grant changed (another merge or replace won) or is gone.
func rewriteRefused(err error) *Error {
	if errors.Is(err, ErrConflict) {
		return InvalidGrant("the grant was changed by another authorization since this code was issued: authorize again")
	}
	return InvalidGrant("the grant has been revoked")
}

// managedGrantID is the grant_id a token response carries: the grant's id when its client
// manages it, else none.
func managedGrantID(g *Grant) string {
	if g.Managed {
		return g.ID
	}
	return ""
}
