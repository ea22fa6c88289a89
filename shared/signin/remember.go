package signin

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/oauth/rar"
)

// Remembered consent (issue 29): a user who already holds a live grant for the client that
// covers what the request asks is not asked again; enter skips the consent page and issues
// the code. This file is the rule's one place. It is asked only where enter would show the
// consent page, so the sign-in's other rules (the session's age, a strong sign-in where one
// is needed) have all run first. The consent page is shown all the same when
//
//   - the request has prompt=consent (OIDC Core 3.1.2.1: the client asks for it);
//   - the request can move money: a payment_initiation detail, or the transfers scope
//     (a payment is consented to each time, PSD2 RTS article 5's spirit);
//   - the request asks for authorization details of another type than account_information
//     (the only type that may be remembered);
//   - no live grant of this user and client covers it: its scopes hold every scope asked,
//     and its authorization_details cover the request's (rar.Covers, the rule a refresh's
//     narrowing keeps); a payment grant covers nothing.
//
// The user's grants are listed by user (GrantStore.ListGrants: one index Query on DynamoDB,
// no Scan), and the grant relied on is then read again (GetGrant, a strongly consistent read),
// so a grant withdrawn a moment ago, which an eventually consistent index may still list,
// is never relied on.

// mayRemember reports whether req may skip the consent page at all, before any store is read.
func mayRemember(req *oauth.AuthRequest) bool {
	if req.HasPrompt("consent") || req.Scopes.Has(oauth.ScopeTransfersWrite) {
		return false
	}
	return onlyAccountInformation(req.AuthorizationDetails)
}

// onlyAccountInformation reports whether every detail of details (a validated array, or
// empty) is an account_information.
func onlyAccountInformation(details json.RawMessage) bool {
	if len(details) == 0 {
		return true
	}
	var list []struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(details, &list) != nil {
		return false
	}
	for _, d := range list {
		if d.Type != rar.TypeAccountInformation {
			return false
		}
	}
	return true
}

// covers reports whether the grant rec, of the request's user, covers req: the same client,
// live at now, no payment grant, every scope asked, and the details asked within its own.
func covers(rec *oauth.GrantRecord, req *oauth.AuthRequest, now time.Time) bool {
	g := &rec.Grant
	switch {
	case rec.Revoked, g.ClientID != req.ClientID, g.UID != req.UID, !now.Before(g.ExpiresAt):
		return false
	case g.IsPayment(), !g.Scopes.Contains(req.Scopes):
		return false
	case len(req.AuthorizationDetails) == 0:
		return true
	}
	return rar.Covers(g.AuthorizationDetails, req.AuthorizationDetails) == nil
}

// remembered returns the user's live grant for the request's client that lets req skip the
// consent page, or nil when the page must be shown.
func (m *Machine) remembered(ctx context.Context, req *oauth.AuthRequest) (*oauth.GrantRecord, error) {
	if !mayRemember(req) || m.svc.Grants == nil {
		return nil, nil
	}
	now := m.svc.Clock.Now()
	list, err := m.svc.Grants.ListGrants(ctx, oauth.GrantFilter{UID: req.UID}, now)
	if err != nil {
		return nil, oauth.AsError(err)
	}
	for i := range list {
		if !covers(&list[i], req, now) {
			continue
		}
		rec, err := m.svc.Grants.GetGrant(ctx, list[i].Grant.ID, now)
		if errors.Is(err, oauth.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, oauth.AsError(err)
		}
		if covers(&rec, req, now) {
			return &rec, nil
		}
	}
	return nil, nil
}

// approveRemembered issues the code of req on the strength of the grant rec (remembered): the
// decision the consent page's allow would make, audited as remembered, naming the grant.
func (m *Machine) approveRemembered(ctx context.Context, req *oauth.AuthRequest, client *oauth.Client, user *oauth.User, sess *oauth.Session, rec *oauth.GrantRecord) (Outcome, error) {
	to, err := m.svc.Approve(ctx, req, client, user, sess)
	if errors.Is(err, oauth.ErrRequestURIUsed) {
		return Outcome{}, ErrExpired // another page of the same pushed request was decided first
	}
	if err != nil {
		return Outcome{}, err
	}
	m.users.AuditSignIn(ctx, "consent_remembered", user.UID, slog.String("remembered_grant_id", rec.Grant.ID))
	return Outcome{Redirect: to}, nil
}
