package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/acmebank/authserver/shared/oauth/rar"
)

// Payment grants are one-time (issue 29, PSD2 RTS article 5's spirit: an authorization is for
// one payment). This file is the rule's one place:
//
//   - a grant is a payment grant when its authorization_details hold a payment_initiation
//     (IsPayment);
//   - its code exchange issues no refresh token, whatever the scopes (offline_access too):
//     newIssuance asks PaymentGrant;
//   - its access token lives Lifetimes.PaymentAccessToken (minutes, AUTH_PAYMENT_TOKEN_TTL,
//     bounded by MinPaymentTokenTTL and MaxPaymentTokenTTL);
//   - the bank API accepts it once: a presentation with Presentation.Spend consumes the grant
//     in one conditional write (GrantStore.ConsumeGrant) after every other check, so of N
//     racing calls exactly one passes, a second use is invalid_token, and a refused call
//     writes nothing.

// Bounds of the payment access token's lifetime: long enough for the client to call the bank
// API once, short enough that a leaked token is soon worthless.
const (
	MinPaymentTokenTTL     = time.Minute
	MaxPaymentTokenTTL     = 15 * time.Minute
	DefaultPaymentTokenTTL = 5 * time.Minute
)

// IsPayment reports whether g is a payment grant: its authorization_details hold at least one
// payment_initiation. Details that do not parse (never stored: they were validated) are not.
func (g *Grant) IsPayment() bool {
	return holdsPayment(g.AuthorizationDetails)
}

func holdsPayment(details json.RawMessage) bool {
	if len(details) == 0 {
		return false
	}
	var list []struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(details, &list) != nil {
		return false
	}
	for _, d := range list {
		if d.Type == rar.TypePaymentInitiation {
			return true
		}
	}
	return false
}

// accessLifetime is how long an access token of g lives before the grant's end caps it: the
// payment lifetime for a payment grant (its default when unset), else the deployment's.
func (s *Service) accessLifetime(g *Grant) time.Duration {
	if !g.IsPayment() {
		return s.Lifetimes.AccessToken
	}
	if d := s.Lifetimes.PaymentAccessToken; d > 0 {
		return d
	}
	return DefaultPaymentTokenTTL
}

// spendPayment consumes the payment grant of t, whose token passed every other check, in one
// conditional write that also records the DPoP proof's jti (once): the first use passes; a
// later or losing one is invalid_token, and writes nothing.
func (s *Service) spendPayment(ctx context.Context, t *Token, once OneTime) error {
	err := s.Grants.ConsumeGrant(ctx, t.Grant.ID, s.now(), onces([]OneTime{once})...)
	if refusal := replayRefusal([]OneTime{once}, err); refusal != nil {
		return refusal
	}
	switch {
	case errors.Is(err, ErrUsed):
		s.audit(ctx, "payment_token_reused", &t.Grant)
		return InvalidToken("the payment access token has already been used: a payment is authorized once")
	case errors.Is(err, ErrRevoked), errors.Is(err, ErrNotFound):
		return InvalidToken("the access token is invalid, expired or revoked")
	case err != nil:
		return AsError(err)
	}
	s.audit(ctx, "payment_grant_consumed", &t.Grant)
	return nil
}
