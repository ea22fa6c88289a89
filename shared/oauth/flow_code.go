package oauth

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// CodeExchange is a token request with grant_type=authorization_code (RFC 6749 4.1.3).
type CodeExchange struct {
	Code         string
	RedirectURI  string
	CodeVerifier string
	// CertThumbprint is the client certificate's, when the request came over mutual TLS: the
	// tokens are then bound to it (RFC 8705).
	CertThumbprint string
	// DPoPJKT is the thumbprint of the key of the request's DPoP proof, if any (CheckDPoP):
	// the tokens are then bound to it (RFC 9449 5).
	DPoPJKT string
	// Once are the request's one-time values (AuthenticateTokenRequest), recorded in the
	// code's consuming write or not at all.
	Once []OneTime
	// AuthorizationDetails is the request's authorization_details parameter, which a code
	// exchange refuses: the code's grant has the details the user approved.
	AuthorizationDetails string
}

// ExchangeCode turns a code into tokens for an authenticated client. The code is consumed in
// one conditional write that returns its grant and records the request's one-time values
// (a value used before is refused, as Record refuses it, and consumes nothing); then the
// tokens are written while the id_token is signed. A code presented again revokes what it
// issued.
func (s *Service) ExchangeCode(ctx context.Context, client *Client, req CodeExchange) (*TokenResponse, error) {
	if req.Code == "" {
		return nil, InvalidRequest("the code parameter is required")
	}
	if req.CodeVerifier != "" && !validPKCEValue(req.CodeVerifier) {
		return nil, InvalidRequest("code_verifier must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~")
	}
	if req.AuthorizationDetails != "" {
		// RFC 9396 6.1 lets a server narrow at the exchange; this one narrows at refresh only,
		// and refuses rather than ignores, before the code is spent.
		return nil, InvalidAuthorizationDetails("authorization_details is not accepted at the code exchange: the code carries the approved details; a refresh may narrow them")
	}
	now := s.now()
	// The code's single-use write, and everything the exchange writes after it, go to the
	// store of the home that issued it.
	ctx = WithHome(ctx, HomeOf(req.Code))
	code, err := s.Grants.ConsumeCode(ctx, HashToken(req.Code), client.ID, now, onces(req.Once)...)
	if refusal := replayRefusal(req.Once, err); refusal != nil {
		return nil, refusal
	}
	switch {
	case errors.Is(err, ErrUsed):
		// The values are recorded before the revocation, as when they were recorded ahead of
		// the code: a request replayed whole (its jti used too) is refused for its jti and
		// revokes nothing, whichever refusal a store reported.
		if err := s.Record(ctx, req.Once...); err != nil {
			return nil, err
		}
		return nil, s.codeReused(ctx, &code.Grant, now)
	case errors.Is(err, ErrNotFound):
		return nil, InvalidGrant("the code is invalid or has expired")
	case err != nil:
		return nil, AsError(err)
	}
	// The code is spent from here on: a mismatch below means it was presented by someone who
	// should not have it, and it is not usable again.
	if req.RedirectURI != code.RedirectURI {
		return nil, InvalidGrant("redirect_uri does not match the authorization request")
	}
	if code.CodeChallenge != "" {
		if req.CodeVerifier == "" {
			return nil, InvalidGrant("code_verifier is required")
		}
		if !constantEqual(S256(req.CodeVerifier), code.CodeChallenge) {
			return nil, InvalidGrant("code_verifier does not match the code_challenge")
		}
	} else if req.CodeVerifier != "" {
		return nil, InvalidGrant("code_verifier sent for a code issued without code_challenge")
	} else if client.RequirePKCE { // issued before the client was made to require PKCE
		return nil, InvalidGrant("this client's codes must be bound to a code_challenge")
	}
	if code.Grant.DPoPJKT != "" && !constantEqual(code.Grant.DPoPJKT, req.DPoPJKT) {
		// RFC 9449 10: the authorization request bound the code to a key this request does
		// not prove.
		return nil, InvalidGrant("the code is bound to another DPoP key")
	}
	if err := checkPaymentLink(code.Grant.AuthorizationDetails, code.Grant.PaymentEvidence); err != nil {
		// Dynamic linking (dynamic_linking.go): the details changed after the customer's step.
		s.audit(ctx, "payment_link_broken", &code.Grant)
		return nil, InvalidGrant("the payment's authorization details do not match what the customer confirmed")
	}
	g := code.Grant
	g.CertThumbprint, g.DPoPJKT = req.CertThumbprint, req.DPoPJKT
	is := s.newIssuance(newTokens{Grant: g, Scopes: g.Scopes, Now: now, FromCode: true})
	is.in.Rewrite = code.Rewrite
	resp, err := s.issue(ctx, is, g.Nonce, client.IDTokenSignedResponseAlg, now)
	if err != nil {
		return nil, err
	}
	if rw := code.Rewrite; rw != nil {
		s.audit(ctx, "grant_rewritten", &g, slog.String("action", rw.Action), slog.Int("revision", g.Revision))
	}
	s.audit(ctx, "grant_issued", &g, slog.String("scope", resp.Scope), slog.Bool("cert_bound", g.CertThumbprint != ""), slog.Bool("dpop_bound", g.DPoPJKT != ""))
	return resp, nil
}

// codeReused answers a code presented after it was consumed: the grant it started is revoked
// (RFC 6749 4.1.2), whether the first exchange has written it or is still in flight. In flight,
// RevokeGrant leaves a tombstone that makes that exchange's IssueTokens fail with ErrRevoked, so
// its client gets invalid_grant too: a code presented twice leaves nothing usable, whoever
// presented it first.
func (s *Service) codeReused(ctx context.Context, g *Grant, now time.Time) error {
	s.audit(ctx, "code_reuse_detected", g)
	if err := s.Grants.RevokeGrant(ctx, g.ID, now); err != nil {
		return AsError(err)
	}
	s.audit(ctx, "grant_revoked", g, slog.String("reason", "code_reuse"))
	return InvalidGrant("the code has already been used")
}
