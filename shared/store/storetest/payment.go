package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// paymentIssue is a payment grant's first issuance: an access token and no refresh token.
func paymentIssue(g oauth.Grant, now time.Time) oauth.Issue {
	a := newToken(oauth.KindAccess, g, now)
	return oauth.Issue{Grant: g, Access: a, FromCode: true, Tokens: []string{a.Hash}}
}

// paymentTests prove GrantStore.ConsumeGrant: a payment grant is used once, a refused
// consumption writes nothing, and racing consumptions have one winner.
var paymentTests = []test{
	{"IssueWithoutRefreshTokenWritesTheAccessTokenOnly", func(t *testing.T, s oauth.Store) {
		now := start()
		in := paymentIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), in, now), "IssueTokens")
		got, err := s.GetToken(t.Context(), in.Access.Hash, now)
		mustNil(t, err, "GetToken")
		wantEqual(t, got.Hash, in.Access.Hash, "access token")
		rec, err := s.GetGrant(t.Context(), in.Grant.ID, now)
		mustNil(t, err, "GetGrant")
		wantEqual(t, rec.Tokens, []string{in.Access.Hash}, "grant's tokens")
	}},
	{"ConsumeGrantMarksItOnceAndASecondIsUsed", func(t *testing.T, s oauth.Store) {
		now := start()
		in := paymentIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), in, now), "IssueTokens")
		rec, err := s.GetGrant(t.Context(), in.Grant.ID, now)
		mustNil(t, err, "GetGrant")
		if !rec.ConsumedAt.IsZero() {
			t.Fatalf("a fresh grant is consumed at %v", rec.ConsumedAt)
		}
		mustNil(t, s.ConsumeGrant(t.Context(), in.Grant.ID, now), "ConsumeGrant")
		rec, err = s.GetGrant(t.Context(), in.Grant.ID, now)
		mustNil(t, err, "GetGrant")
		wantEqual(t, rec.ConsumedAt, now, "ConsumedAt")
		wantErr(t, s.ConsumeGrant(t.Context(), in.Grant.ID, now.Add(time.Second)), oauth.ErrUsed, "second ConsumeGrant")
		rec, err = s.GetGrant(t.Context(), in.Grant.ID, now)
		mustNil(t, err, "GetGrant")
		wantEqual(t, rec.ConsumedAt, now, "ConsumedAt after a refused second consumption")
	}},
	{"ConsumeGrantOfARevokedExpiredOrUnknownGrantIsRevoked", func(t *testing.T, s oauth.Store) {
		now := start()
		revoked := paymentIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), revoked, now), "IssueTokens")
		mustNil(t, s.RevokeGrant(t.Context(), revoked.Grant.ID, now), "RevokeGrant")
		wantErr(t, s.ConsumeGrant(t.Context(), revoked.Grant.ID, now), oauth.ErrRevoked, "revoked grant")

		expired := paymentIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), expired, now), "IssueTokens")
		wantErr(t, s.ConsumeGrant(t.Context(), expired.Grant.ID, expired.Grant.ExpiresAt), oauth.ErrRevoked, "expired grant")
		rec, err := s.GetGrant(t.Context(), expired.Grant.ID, now)
		mustNil(t, err, "GetGrant")
		if !rec.ConsumedAt.IsZero() {
			t.Errorf("a refused consumption of an expired grant wrote ConsumedAt %v", rec.ConsumedAt)
		}
		wantErr(t, s.ConsumeGrant(t.Context(), id(oauth.PrefixGrant), now), oauth.ErrRevoked, "unknown grant")
		if _, err := s.GetGrant(t.Context(), id(oauth.PrefixGrant), now); !errors.Is(err, oauth.ErrNotFound) {
			t.Errorf("GetGrant of an unknown grant: %v, want ErrNotFound", err)
		}
	}},
	{"ConsumeGrantWithAUsedOnceValueConsumesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		in := paymentIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), in, now), "IssueTokens")
		jti := oauth.Once{Key: id("dpop:"), Expires: now.Add(time.Minute)}
		mustNil(t, s.UseOnce(t.Context(), jti.Key, jti.Expires, now), "UseOnce")
		err := s.ConsumeGrant(t.Context(), in.Grant.ID, now, jti)
		var r *oauth.ReplayedError
		if !errors.As(err, &r) || r.Key != jti.Key {
			t.Fatalf("ConsumeGrant with a used value: %v, want a ReplayedError naming it", err)
		}
		rec, err := s.GetGrant(t.Context(), in.Grant.ID, now)
		mustNil(t, err, "GetGrant")
		if !rec.ConsumedAt.IsZero() {
			t.Errorf("a replayed value consumed the grant at %v", rec.ConsumedAt)
		}
		fresh := oauth.Once{Key: id("dpop:"), Expires: now.Add(time.Minute)}
		mustNil(t, s.ConsumeGrant(t.Context(), in.Grant.ID, now, fresh), "ConsumeGrant with a fresh value")
		wantErr(t, s.UseOnce(t.Context(), fresh.Key, fresh.Expires, now), oauth.ErrUsed, "the value recorded with the consumption")
	}},
	{"RacingConsumeGrantHasOneWinner", func(t *testing.T, s oauth.Store) {
		now := start()
		in := paymentIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), in, now), "IssueTokens")
		errs := race(racers, func(int) error { return s.ConsumeGrant(t.Context(), in.Grant.ID, now) })
		wantOneWinner(t, errs, oauth.ErrUsed, "ConsumeGrant")
	}},
	{"RacingConsumeGrantWithOnceValuesHasOneWinner", func(t *testing.T, s oauth.Store) {
		now := start()
		in := paymentIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), in, now), "IssueTokens")
		errs := race(racers, func(int) error {
			return s.ConsumeGrant(t.Context(), in.Grant.ID, now, oauth.Once{Key: id("dpop:"), Expires: now.Add(time.Minute)})
		})
		wantOneWinner(t, errs, oauth.ErrUsed, "ConsumeGrant")
	}},
}
