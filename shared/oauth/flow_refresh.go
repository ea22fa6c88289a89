package oauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"
)

// RefreshRequest is a token request with grant_type=refresh_token (RFC 6749 6).
type RefreshRequest struct {
	RefreshToken string
	// Scope, when given, narrows the new access token to a subset of the grant's scopes.
	Scope string
	// AuthorizationDetails, when given, narrows the new access token's authorization_details
	// to ones the grant's cover (RFC 9396 7.2, rar.Covers).
	AuthorizationDetails string
	CertThumbprint       string
	// DPoPJKT is the thumbprint of the request's DPoP proof key, if any.
	DPoPJKT string
	// Once are the request's one-time values (AuthenticateTokenRequest), recorded in the
	// refresh's write (the spend and the issuance) or not at all.
	Once []OneTime
}

// Refresh spends a refresh token and issues a new access and refresh token (rotation). A spent
// token presented again revokes the whole grant (RFC 9700 4.14.2), unless the client has a
// retry window (Client.RefreshReuseInterval) and this is a retry within it: see refreshRetry.
//
// A client whose refresh tokens do not rotate (Client.RotatesRefreshTokens: a FAPI 2.0 client
// by default, FAPI 2.0 Security Profile (Final) 5.3.2.1) keeps its refresh token: the refresh
// issues a new access token only, which replaces the older of the grant's live ones as in a
// rotation, and answers with the same refresh token, which works until it expires or its grant
// is revoked.
//
// Every check that can fail (the token's binding to the certificate or DPoP key, the grant's
// end, the scope and authorization_details, the id_token's signature) is made on the token as read, before anything is
// written; the spend and the issuance are then one write (GrantStore.IssueTokens). So a
// refused or failed refresh (a 503 included) leaves the token as it was, and the client's
// retry of the same request works.
func (s *Service) Refresh(ctx context.Context, client *Client, req RefreshRequest) (*TokenResponse, error) {
	if req.RefreshToken == "" {
		return nil, InvalidRequest("the refresh_token parameter is required")
	}
	var want Scopes
	if req.Scope != "" {
		want = ParseScopes(req.Scope)
		for _, sc := range want {
			if !IsKnownScope(sc) {
				return nil, InvalidScope("unknown scope '%s'", sc)
			}
		}
	}
	now := s.now()
	hash := HashToken(req.RefreshToken)
	// The token's spend, its reuse detection and the new pair go to the store of the home that
	// issued it.
	ctx = WithHome(ctx, HomeOf(req.RefreshToken))
	rt, err := s.Grants.GetToken(ctx, hash, now)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, InvalidGrant("the refresh token is invalid, expired or revoked")
	case err != nil:
		return nil, AsError(err)
	case rt.Kind != KindRefresh || rt.Grant.ClientID != client.ID:
		// Another client's token is as unknown to this one: nothing tells it the token exists.
		return nil, InvalidGrant("the refresh token is invalid, expired or revoked")
	}
	g := rt.Grant
	// The binding comes first, before reuse detection: a request without the token's
	// certificate or DPoP key proves nothing about its holder, so it changes nothing, spent
	// token or not (RFC 8705 3, RFC 9449 5). A thief without the key can neither use the token
	// nor burn it nor revoke its grant.
	if g.CertThumbprint != "" && !constantEqual(g.CertThumbprint, req.CertThumbprint) {
		return nil, InvalidGrant("the refresh token is bound to another client certificate")
	}
	if g.DPoPJKT != "" && !constantEqual(g.DPoPJKT, req.DPoPJKT) {
		return nil, InvalidGrant("the refresh token is bound to another DPoP key")
	}
	var retry *Retry
	if rt.Spent {
		if retry = retryOf(client, &rt, now); retry == nil {
			// Reuse: the values are recorded before the revocation, as when they were recorded
			// ahead of the grant, so a refresh replayed whole is refused for its jti and
			// revokes nothing.
			if err := s.Record(ctx, req.Once...); err != nil {
				return nil, err
			}
			return nil, s.refreshReused(ctx, &rt, now)
		}
	}
	if !now.Before(g.ExpiresAt) {
		return nil, InvalidGrant("the grant has reached its end; a new authorization is needed")
	}
	scopes := g.Scopes
	if want != nil {
		if !g.Scopes.Contains(want) {
			return nil, InvalidScope("the requested scope exceeds the granted scope")
		}
		scopes = g.Scopes.Narrow(want)
	}
	details, derr := s.narrowDetails(client, g.AuthorizationDetails, req.AuthorizationDetails)
	if derr != nil {
		return nil, derr
	}
	// The grant keeps at most two live access tokens: the new one and the one issued with the
	// spent refresh token; any older one is revoked now.
	var live, retire []string
	if len(rt.Live) > 0 {
		live = rt.Live[:1]
		retire = rt.Live[1:]
	}
	n := newTokens{Grant: g, Scopes: scopes, Details: details, Now: now, Live: live, Retire: retire}
	if retry == nil && !rt.Spent && !client.RotatesRefreshTokens() {
		n.Keep = &kept{value: req.RefreshToken, token: &rt}
	}
	is := s.newIssuance(n)
	if n.Keep == nil {
		is.in.Spent = rt.Hash
		is.in.Retry = retry
	}
	is.in.Once = onces(req.Once)
	// Signed before the write: a signature that fails (KMS down, a key gone) must not find the
	// token spent.
	idToken, err := s.signIDToken(ctx, is, "", client.IDTokenSignedResponseAlg, now)
	if err != nil {
		return nil, AsError(err)
	}
	err = s.Grants.IssueTokens(ctx, is.in, now)
	if refusal := replayRefusal(req.Once, err); refusal != nil {
		return nil, refusal
	}
	switch {
	case retry != nil && err != nil:
		return nil, s.refreshRetryFailed(ctx, &rt, err, now)
	case n.Keep != nil && errors.Is(err, ErrConflict):
		// A racing refresh of the same kept token wrote first (or the token was revoked or
		// spent since it was read): nothing was written, and the token, if still valid, works
		// again on the client's retry.
		s.audit(ctx, "refresh_race_lost", &g)
		return nil, Unavailable(fmt.Errorf("refresh of a kept token lost a race: %w", err))
	case errors.Is(err, ErrConflict):
		// Spent by a racing refresh between the read and the write: that one wins, this one is
		// refused, and nothing is revoked (the token was unspent when this request read it).
		s.audit(ctx, "refresh_race_lost", &g)
		return nil, InvalidGrant("the refresh token has already been used")
	case errors.Is(err, ErrRevoked):
		return nil, InvalidGrant("the grant has been revoked")
	case err != nil:
		return nil, AsError(err)
	}
	resp := s.response(is, idToken, now)
	if retry != nil {
		s.audit(ctx, "refresh_retry", &g, slog.String("scope", resp.Scope))
		return resp, nil
	}
	s.audit(ctx, "grant_refreshed", &g, slog.String("scope", resp.Scope))
	return resp, nil
}

// retryOf returns the retry that a spent refresh token presented again may be, or nil when it
// can only be reuse: the client has a retry window (capped at MaxRefreshReuseInterval), the
// spend recorded its successors and now is within the window of the spend. The store checks
// all of it again in the write, and whether the token was retried already or its successor
// used (GrantStore.IssueTokens).
//
// A retry is a new rotation, not the first answer again (that would mean keeping token values,
// which are stored only as hashes): the tokens the first spend issued, which a client whose
// answer was lost never received, are retired in the same write, so a thief holding them
// loses them. Each spent token has one retry: of racing retries one wins and the others get
// invalid_grant without revoking, as long as the winner's refresh token is unused.
func retryOf(client *Client, rt *Token, now time.Time) *Retry {
	w := min(client.RefreshReuseInterval, MaxRefreshReuseInterval)
	if w <= 0 || len(rt.Successors) != 2 || rt.SpentAt.IsZero() || now.After(rt.SpentAt.Add(w)) {
		return nil
	}
	return &Retry{Token: *rt, Window: w}
}

// refreshRetryFailed answers a retry the store refused: reuse (the window passed, or the
// tokens the spend or an earlier retry issued were used) revokes the grant as any reuse does;
// a duplicate of a retry that won is refused and revokes nothing.
func (s *Service) refreshRetryFailed(ctx context.Context, rt *Token, err error, now time.Time) error {
	switch {
	case errors.Is(err, ErrUsed):
		s.audit(ctx, "refresh_reuse_detected", &rt.Grant, slog.String("reason", "retry_after_use"))
		if err := s.Grants.RevokeGrant(ctx, rt.Grant.ID, now); err != nil {
			return AsError(err)
		}
		s.audit(ctx, "grant_revoked", &rt.Grant, slog.String("reason", "refresh_token_reuse"))
		return InvalidGrant("the refresh token has already been used")
	case errors.Is(err, ErrConflict):
		s.audit(ctx, "refresh_retry_refused", &rt.Grant)
		return InvalidGrant("the refresh token has already been used")
	}
	return err
}

// refreshReused answers a refresh token presented after it was spent: reuse, and the grant is
// revoked (RFC 9700 4.14.2). A spend and its issuance are one write, so a spent token is never
// listed by its grant any more, except one spent by a version that wrote them apart and whose
// issuance never completed: such a token is refused without revoking the grant, as it was.
func (s *Service) refreshReused(ctx context.Context, rt *Token, now time.Time) error {
	rec, err := s.Grants.GetGrant(ctx, rt.Grant.ID, now)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return AsError(err)
	}
	if err == nil && !rec.Revoked && slices.Contains(rec.Tokens, rt.Hash) {
		s.audit(ctx, "refresh_reuse_in_flight", &rt.Grant)
		return InvalidGrant("the refresh token has already been used")
	}
	s.audit(ctx, "refresh_reuse_detected", &rt.Grant)
	if err := s.Grants.RevokeGrant(ctx, rt.Grant.ID, now); err != nil {
		return AsError(err)
	}
	s.audit(ctx, "grant_revoked", &rt.Grant, slog.String("reason", "refresh_token_reuse"))
	return InvalidGrant("the refresh token has already been used")
}
