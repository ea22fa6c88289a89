package storetest

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/oauth/rar"
)

// codeTests prove the single use and expiry of authorization codes.
var codeTests = []test{
	{"ConsumeReturnsTheCreatedCode", func(t *testing.T, s oauth.Store) {
		now := start()
		c := newCode(anyGrant(now), now)
		mustNil(t, s.CreateCode(t.Context(), c), "CreateCode")
		got, err := s.ConsumeCode(t.Context(), c.Hash, c.Grant.ClientID, now.Add(time.Second))
		mustNil(t, err, "ConsumeCode")
		wantEqual(t, got, c, "consumed code")
	}},
	{"SecondConsumeIsErrUsedAndReturnsTheCode", func(t *testing.T, s oauth.Store) {
		now := start()
		c := newCode(anyGrant(now), now)
		mustNil(t, s.CreateCode(t.Context(), c), "CreateCode")
		_, err := s.ConsumeCode(t.Context(), c.Hash, c.Grant.ClientID, now)
		mustNil(t, err, "first ConsumeCode")
		for range 2 {
			got, err := s.ConsumeCode(t.Context(), c.Hash, c.Grant.ClientID, now.Add(time.Minute))
			wantErr(t, err, oauth.ErrUsed, "replayed ConsumeCode")
			wantEqual(t, got, c, "code returned with ErrUsed")
		}
	}},
	{"UnknownCodeIsNotFound", func(t *testing.T, s oauth.Store) {
		_, err := s.ConsumeCode(t.Context(), hash(oauth.PrefixCode), id(oauth.PrefixClientID), start())
		wantErr(t, err, oauth.ErrNotFound, "ConsumeCode of an unknown code")
	}},
	{"ExpiredCodeIsNotFoundAndStaysUnused", func(t *testing.T, s oauth.Store) {
		now := start()
		c := newCode(anyGrant(now), now)
		mustNil(t, s.CreateCode(t.Context(), c), "CreateCode")
		for _, at := range []time.Time{c.ExpiresAt, c.ExpiresAt.Add(time.Hour)} {
			_, err := s.ConsumeCode(t.Context(), c.Hash, c.Grant.ClientID, at)
			wantErr(t, err, oauth.ErrNotFound, "ConsumeCode at or after expiry")
		}
	}},
	{"CodeIsLiveUntilItsExpiry", func(t *testing.T, s oauth.Store) {
		now := start()
		c := newCode(anyGrant(now), now)
		mustNil(t, s.CreateCode(t.Context(), c), "CreateCode")
		_, err := s.ConsumeCode(t.Context(), c.Hash, c.Grant.ClientID, c.ExpiresAt.Add(-time.Second))
		mustNil(t, err, "ConsumeCode one second before expiry")
	}},
	{"UsedCodeAfterExpiryIsNotFound", func(t *testing.T, s oauth.Store) {
		now := start()
		c := newCode(anyGrant(now), now)
		mustNil(t, s.CreateCode(t.Context(), c), "CreateCode")
		_, err := s.ConsumeCode(t.Context(), c.Hash, c.Grant.ClientID, now)
		mustNil(t, err, "ConsumeCode")
		_, err = s.ConsumeCode(t.Context(), c.Hash, c.Grant.ClientID, c.ExpiresAt)
		wantErr(t, err, oauth.ErrNotFound, "ConsumeCode of a used code after its expiry")
	}},
	{"AnotherClientsCodeIsNotFoundAndStaysUnused", func(t *testing.T, s oauth.Store) {
		now := start()
		c := newCode(anyGrant(now), now)
		mustNil(t, s.CreateCode(t.Context(), c), "CreateCode")
		_, err := s.ConsumeCode(t.Context(), c.Hash, id(oauth.PrefixClientID), now)
		wantErr(t, err, oauth.ErrNotFound, "ConsumeCode by another client")
		got, err := s.ConsumeCode(t.Context(), c.Hash, c.Grant.ClientID, now)
		mustNil(t, err, "ConsumeCode by its client after another's attempt")
		wantEqual(t, got, c, "consumed code")
	}},
	{"UsedCodeOfAnotherClientIsNotFound", func(t *testing.T, s oauth.Store) {
		now := start()
		c := newCode(anyGrant(now), now)
		mustNil(t, s.CreateCode(t.Context(), c), "CreateCode")
		_, err := s.ConsumeCode(t.Context(), c.Hash, c.Grant.ClientID, now)
		mustNil(t, err, "ConsumeCode")
		// ErrUsed would let another client have the grant revoked.
		_, err = s.ConsumeCode(t.Context(), c.Hash, id(oauth.PrefixClientID), now)
		wantErr(t, err, oauth.ErrNotFound, "used code presented by another client")
		_, err = s.ConsumeCode(t.Context(), c.Hash, c.Grant.ClientID, now)
		wantErr(t, err, oauth.ErrUsed, "used code presented by its client")
	}},
	{"CodesAreIndependent", func(t *testing.T, s oauth.Store) {
		now := start()
		g := anyGrant(now)
		c1, c2 := newCode(g, now), newCode(g, now)
		mustNil(t, s.CreateCode(t.Context(), c1), "CreateCode 1")
		mustNil(t, s.CreateCode(t.Context(), c2), "CreateCode 2")
		_, err := s.ConsumeCode(t.Context(), c1.Hash, c1.Grant.ClientID, now)
		mustNil(t, err, "ConsumeCode 1")
		got, err := s.ConsumeCode(t.Context(), c2.Hash, c2.Grant.ClientID, now)
		mustNil(t, err, "ConsumeCode 2 after consuming 1")
		wantEqual(t, got, c2, "second code")
	}},
}

// issueTests prove that an issuance is written whole or not at all, and what blocks it.
var issueTests = []test{
	{"FromCodeWritesGrantAndBothTokens", func(t *testing.T, s oauth.Store) {
		now := start()
		in := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), in, now), "IssueTokens")
		rec, err := s.GetGrant(t.Context(), in.Grant.ID, now)
		mustNil(t, err, "GetGrant")
		wantEqual(t, rec, oauth.GrantRecord{Grant: in.Grant, Tokens: in.Tokens}, "grant record")
		at, err := s.GetToken(t.Context(), in.Access.Hash, now)
		mustNil(t, err, "GetToken access")
		wantEqual(t, at, in.Access, "access token")
		rt, err := s.GetToken(t.Context(), in.Refresh.Hash, now)
		mustNil(t, err, "GetToken refresh")
		wantEqual(t, rt, in.Refresh, "refresh token")
	}},
	{"FromCodeAfterRevokeGrantIsErrRevokedAndWritesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		in := firstIssue(anyGrant(now), now)
		mustNil(t, s.RevokeGrant(t.Context(), in.Grant.ID, now), "RevokeGrant of an unwritten grant")
		err := s.IssueTokens(t.Context(), in, now.Add(time.Second))
		wantErr(t, err, oauth.ErrRevoked, "IssueTokens after a tombstone")
		wantNoTokens(t, s, now, in.Access.Hash, in.Refresh.Hash)
		wantNoLiveGrant(t, s, in.Grant, now)
	}},
	{"TombstoneBlocksForAtLeastAnHour", func(t *testing.T, s oauth.Store) {
		now := start()
		in := firstIssue(anyGrant(now), now)
		mustNil(t, s.RevokeGrant(t.Context(), in.Grant.ID, now), "RevokeGrant")
		later := now.Add(time.Hour)
		in.Access.ExpiresAt, in.Refresh.ExpiresAt = later.Add(accessTTL), later.Add(refreshTTL)
		err := s.IssueTokens(t.Context(), in, later)
		wantErr(t, err, oauth.ErrRevoked, "IssueTokens an hour after a tombstone")
		wantNoTokens(t, s, later, in.Access.Hash, in.Refresh.Hash)
	}},
	{"FromCodeForAnExistingGrantFailsAndWritesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		first := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), first, now), "first IssueTokens")
		again := firstIssue(first.Grant, now)
		err := s.IssueTokens(t.Context(), again, now)
		if !errors.Is(err, oauth.ErrAlreadyExists) && !errors.Is(err, oauth.ErrRevoked) {
			t.Errorf("second IssueTokens FromCode of one grant: got %v, want ErrAlreadyExists or ErrRevoked", err)
		}
		wantNoTokens(t, s, now, again.Access.Hash, again.Refresh.Hash)
		rec, err := s.GetGrant(t.Context(), first.Grant.ID, now)
		mustNil(t, err, "GetGrant")
		wantEqual(t, rec, oauth.GrantRecord{Grant: first.Grant, Tokens: first.Tokens}, "grant record after the failed issuance")
	}},
	{"RefreshSetsTokensAndDeletesRetired", func(t *testing.T, s oauth.Store) {
		now := start()
		i1 := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), i1, now), "IssueTokens from code")
		t2 := now.Add(time.Minute)
		i2 := nextIssue(i1, t2)
		mustNil(t, s.IssueTokens(t.Context(), i2, t2), "first refresh")
		rec, err := s.GetGrant(t.Context(), i1.Grant.ID, t2)
		mustNil(t, err, "GetGrant after first refresh")
		wantEqual(t, rec.Tokens, i2.Tokens, "grant tokens after first refresh")
		wantLiveTokens(t, s, t2, i1.Access, i2.Access, i2.Refresh)

		t3 := t2.Add(time.Minute)
		i3 := nextIssue(i2, t3)
		if len(i3.Retire) != 1 || i3.Retire[0] != i1.Access.Hash {
			t.Fatalf("fixture: second refresh should retire the first access token, got %v", i3.Retire)
		}
		mustNil(t, s.IssueTokens(t.Context(), i3, t3), "second refresh")
		wantNoTokens(t, s, t3, i1.Access.Hash)
		wantLiveTokens(t, s, t3, i2.Access, i3.Access, i3.Refresh)
		rec, err = s.GetGrant(t.Context(), i1.Grant.ID, t3)
		mustNil(t, err, "GetGrant after second refresh")
		wantEqual(t, rec, oauth.GrantRecord{Grant: i1.Grant, Tokens: i3.Tokens, LastUsedAt: t3}, "grant record after second refresh")
	}},
	{"RefreshOfRevokedGrantIsErrRevokedAndWritesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		i1 := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), i1, now), "IssueTokens from code")
		mustNil(t, s.RevokeGrant(t.Context(), i1.Grant.ID, now), "RevokeGrant")
		i2 := nextIssue(i1, now)
		wantErr(t, s.IssueTokens(t.Context(), i2, now), oauth.ErrRevoked, "refresh of a revoked grant")
		wantNoTokens(t, s, now, i2.Access.Hash, i2.Refresh.Hash)
	}},
	{"RefreshOfExpiredGrantIsErrRevokedAndWritesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		g := anyGrant(now)
		g.ExpiresAt = now.Add(2 * time.Hour)
		i1 := firstIssue(g, now)
		mustNil(t, s.IssueTokens(t.Context(), i1, now), "IssueTokens from code")
		end := g.ExpiresAt
		i2 := nextIssue(i1, end)
		wantErr(t, s.IssueTokens(t.Context(), i2, end), oauth.ErrRevoked, "refresh at the grant's end")
		wantNoTokens(t, s, end, i2.Access.Hash, i2.Refresh.Hash)
	}},
	{"RefreshOfUnknownGrantIsErrRevokedAndWritesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		in := firstIssue(anyGrant(now), now)
		in.FromCode = false
		wantErr(t, s.IssueTokens(t.Context(), in, now), oauth.ErrRevoked, "refresh of an unknown grant")
		wantNoTokens(t, s, now, in.Access.Hash, in.Refresh.Hash)
		wantNoLiveGrant(t, s, in.Grant, now)
	}},
}

// refreshTests prove that a refresh spends its refresh token in its issuance's write, once, and
// that a refresh refused by the store writes nothing (oauth.GrantStore.IssueTokens).
var refreshTests = []test{
	{"RefreshSpendsItsTokenInTheIssuanceWrite", func(t *testing.T, s oauth.Store) {
		now := start()
		in := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), in, now), "IssueTokens")
		at := now.Add(time.Minute)
		next := refresh(t, s, in, at)
		stored, err := s.GetToken(t.Context(), in.Refresh.Hash, at)
		mustNil(t, err, "GetToken of a spent refresh token")
		if !stored.Spent || !stored.SpentAt.Equal(at) || !slices.Equal(stored.Successors, []string{next.Access.Hash, next.Refresh.Hash}) {
			t.Errorf("spent token: Spent %v SpentAt %v Successors %.8q, want true, %v and the new pair", stored.Spent, stored.SpentAt, stored.Successors, at)
		}
		stored.Spent, stored.SpentAt, stored.Successors = false, time.Time{}, nil
		wantEqual(t, stored, in.Refresh, "spent refresh token as stored")
		wantLiveTokens(t, s, at, in.Access, next.Access, next.Refresh)
		wantGrantTokens(t, s, in.Grant, at, next.Tokens)
	}},
	{"RefreshOfASpentTokenIsErrConflictAndWritesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		in := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), in, now), "IssueTokens")
		next := refresh(t, s, in, now)
		at := now.Add(time.Minute)
		again := nextIssue(in, at)
		wantErr(t, s.IssueTokens(t.Context(), again, at), oauth.ErrConflict, "second refresh of one token")
		wantNoTokens(t, s, at, again.Access.Hash, again.Refresh.Hash)
		wantLiveTokens(t, s, at, next.Access, next.Refresh)
		wantGrantTokens(t, s, in.Grant, at, next.Tokens)
		stored, err := s.GetToken(t.Context(), in.Refresh.Hash, at)
		mustNil(t, err, "GetToken of the spent token")
		if !stored.SpentAt.Equal(now) || !slices.Equal(stored.Successors, []string{next.Access.Hash, next.Refresh.Hash}) {
			t.Errorf("the refused refresh changed the spent token: SpentAt %v Successors %.8q", stored.SpentAt, stored.Successors)
		}
	}},
	{"RefreshOfATokenItCannotSpendIsErrConflictAndWritesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		in := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), in, now), "IssueTokens")
		other := firstIssue(anyGrant(now), now) // another client's grant
		mustNil(t, s.IssueTokens(t.Context(), other, now), "IssueTokens of another grant")
		for name, spend := range map[string]string{
			"an unknown token":         hash(oauth.PrefixRefresh),
			"an access token":          in.Access.Hash,
			"another grant's token":    other.Refresh.Hash,
			"the refresh token itself": in.Refresh.Hash, // spent once below, at its expiry
		} {
			next := nextIssue(in, now)
			next.Spent = spend
			at := now
			if name == "the refresh token itself" {
				at = in.Refresh.ExpiresAt
				next = nextIssue(in, at)
			}
			wantErr(t, s.IssueTokens(t.Context(), next, at), oauth.ErrConflict, "refresh spending "+name)
			wantNoTokens(t, s, at, next.Access.Hash, next.Refresh.Hash)
		}
		wantLiveTokens(t, s, now, in.Access, in.Refresh, other.Access, other.Refresh)
		wantGrantTokens(t, s, in.Grant, now, in.Tokens)
		// One second before its expiry the token is still spendable.
		refresh(t, s, in, in.Refresh.ExpiresAt.Add(-time.Second))
	}},
	{"RefreshOfARevokedTokenIsRefusedAndWritesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		in := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), in, now), "IssueTokens")
		mustNil(t, s.RevokeToken(t.Context(), in.Refresh.Hash), "RevokeToken")
		next := nextIssue(in, now)
		wantErr(t, s.IssueTokens(t.Context(), next, now), oauth.ErrConflict, "refresh of a revoked refresh token")
		wantNoTokens(t, s, now, next.Access.Hash, next.Refresh.Hash)
		mustNil(t, s.RevokeGrant(t.Context(), in.Grant.ID, now), "RevokeGrant")
		wantErr(t, s.IssueTokens(t.Context(), nextIssue(in, now), now), oauth.ErrRevoked, "refresh of a revoked grant")
	}},
}

// tokenTests prove token lookup, expiry filtering and single-token revocation.
var tokenTests = []test{
	{"UnknownIsNotFound", func(t *testing.T, s oauth.Store) {
		_, err := s.GetToken(t.Context(), hash(oauth.PrefixAccess), start())
		wantErr(t, err, oauth.ErrNotFound, "GetToken of an unknown token")
	}},
	{"ExpiredIsNotFound", func(t *testing.T, s oauth.Store) {
		now := start()
		in := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), in, now), "IssueTokens")
		for _, tok := range []oauth.Token{in.Access, in.Refresh} {
			got, err := s.GetToken(t.Context(), tok.Hash, tok.ExpiresAt.Add(-time.Second))
			mustNil(t, err, "GetToken one second before expiry ("+tok.Kind+")")
			wantEqual(t, got, tok, "token before expiry")
			for _, at := range []time.Time{tok.ExpiresAt, tok.ExpiresAt.Add(time.Hour)} {
				_, err = s.GetToken(t.Context(), tok.Hash, at)
				wantErr(t, err, oauth.ErrNotFound, "GetToken at or after expiry ("+tok.Kind+")")
			}
		}
	}},
	{"RevokeTokenDeletesOnlyThatToken", func(t *testing.T, s oauth.Store) {
		now := start()
		in := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), in, now), "IssueTokens")
		mustNil(t, s.RevokeToken(t.Context(), in.Access.Hash), "RevokeToken")
		wantNoTokens(t, s, now, in.Access.Hash)
		wantLiveTokens(t, s, now, in.Refresh)
		rec, err := s.GetGrant(t.Context(), in.Grant.ID, now)
		mustNil(t, err, "GetGrant")
		if rec.Revoked {
			t.Errorf("RevokeToken revoked the whole grant")
		}
		mustNil(t, s.RevokeToken(t.Context(), in.Access.Hash), "RevokeToken again")
	}},
	{"RevokeTokenOfARefreshTokenEndsIt", func(t *testing.T, s oauth.Store) {
		now := start()
		in := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), in, now), "IssueTokens")
		mustNil(t, s.RevokeToken(t.Context(), in.Refresh.Hash), "RevokeToken")
		wantNoTokens(t, s, now, in.Refresh.Hash)
		wantLiveTokens(t, s, now, in.Access)
	}},
	{"RevokeTokenOfUnknownIsNoError", func(t *testing.T, s oauth.Store) {
		mustNil(t, s.RevokeToken(t.Context(), hash(oauth.PrefixAccess)), "RevokeToken of an unknown token")
	}},
}

// grantTests prove grant lookup, listing and the revocation cascade.
var grantTests = []test{
	{"LastUsedIsEachRefreshAndListedSo", func(t *testing.T, s oauth.Store) {
		// The Connected apps page's "last used": a refresh's own write of the grant sets it;
		// the first issuance writes none (the grant's item stays as large as before), and
		// reading a token does not move it.
		now := start()
		in := firstIssue(anyGrant(now), now)
		exchanged := now.Add(time.Minute)
		mustNil(t, s.IssueTokens(t.Context(), in, exchanged), "IssueTokens from the code")
		rec, err := s.GetGrant(t.Context(), in.Grant.ID, exchanged)
		mustNil(t, err, "GetGrant")
		wantEqual(t, rec.LastUsedAt, time.Time{}, "LastUsedAt after the exchange")
		if _, err := s.GetToken(t.Context(), in.Access.Hash, exchanged.Add(time.Minute)); err != nil {
			t.Fatalf("GetToken: %v", err)
		}
		refreshed := exchanged.Add(time.Hour)
		next := nextIssue(in, refreshed)
		mustNil(t, s.IssueTokens(t.Context(), next, refreshed), "IssueTokens of a refresh")
		rec, err = s.GetGrant(t.Context(), in.Grant.ID, refreshed)
		mustNil(t, err, "GetGrant")
		wantEqual(t, rec.LastUsedAt, refreshed, "LastUsedAt after the refresh")
		list, err := s.ListGrants(t.Context(), oauth.GrantFilter{UID: in.Grant.UID}, refreshed)
		mustNil(t, err, "ListGrants")
		if len(list) != 1 {
			t.Fatalf("ListGrants: %d grants, want 1", len(list))
		}
		wantEqual(t, list[0].LastUsedAt, refreshed, "listed LastUsedAt")
	}},
	{"AuthorizationDetailsAtTheirBoundRoundTrip", func(t *testing.T, s oauth.Store) {
		// RFC 9396 details of rar.MaxBytes on the pending request, the code's grant and an
		// access token a refresh narrowed (the most a token item carries: its own and its
		// grant's) come back as they were written, from every read.
		now := start()
		g := anyGrant(now)
		g.AuthorizationDetails = detailsOfSize(rar.MaxBytes)
		r := newAuthRequest(now)
		r.AuthorizationDetails = g.AuthorizationDetails
		mustNil(t, s.PutAuthRequest(t.Context(), r), "PutAuthRequest")
		gotR, err := s.GetAuthRequest(t.Context(), r.ID, now)
		mustNil(t, err, "GetAuthRequest")
		wantEqual(t, gotR, r, "pending request")
		c := newCode(g, now)
		mustNil(t, s.CreateCode(t.Context(), c), "CreateCode")
		gotC, err := s.ConsumeCode(t.Context(), c.Hash, g.ClientID, now)
		mustNil(t, err, "ConsumeCode")
		wantEqual(t, gotC, c, "consumed code")
		in := firstIssue(gotC.Grant, now)
		mustNil(t, s.IssueTokens(t.Context(), in, now), "IssueTokens")
		next := nextIssue(in, now)
		next.Access.AuthorizationDetails = detailsOfSize(rar.MaxBytes)
		mustNil(t, s.IssueTokens(t.Context(), next, now), "refresh with narrowed details")
		at, err := s.GetToken(t.Context(), next.Access.Hash, now)
		mustNil(t, err, "GetToken")
		wantEqual(t, at, next.Access, "narrowed access token")
		rec, err := s.GetGrant(t.Context(), g.ID, now)
		mustNil(t, err, "GetGrant")
		wantEqual(t, rec.Grant, g, "grant")
	}},
	{"PaymentEvidenceRoundTripsOnTheCodeAndTheGrant", func(t *testing.T, s oauth.Store) {
		// Dynamic linking's evidence (oauth.PaymentEvidence: bytes, a time, an algorithm) and
		// the pending request's nonce come back as written, so the exchange can check them.
		now := start()
		g := anyGrant(now)
		g.AuthorizationDetails = json.RawMessage(`[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"1.00"}}]`)
		g.PaymentEvidence = &oauth.PaymentEvidence{Factor: oauth.PaymentFactorPasskey, DetailsHash: oauth.DetailsHash(g.AuthorizationDetails),
			Nonce: oauth.NewPaymentNonce(), At: now.Add(millis), CredentialID: []byte{1, 2, 3}, AuthenticatorData: make([]byte, 37),
			ClientDataJSON: []byte(`{"type":"webauthn.get"}`), Signature: []byte{0, 255}, PublicKey: []byte{48, 89}, Alg: -7}
		r := newAuthRequest(now)
		r.PaymentNonce = oauth.NewPaymentNonce()
		mustNil(t, s.PutAuthRequest(t.Context(), r), "PutAuthRequest")
		gotR, err := s.GetAuthRequest(t.Context(), r.ID, now)
		mustNil(t, err, "GetAuthRequest")
		wantEqual(t, gotR.PaymentNonce, r.PaymentNonce, "pending request's payment nonce")
		c := newCode(g, now)
		mustNil(t, s.CreateCode(t.Context(), c), "CreateCode")
		gotC, err := s.ConsumeCode(t.Context(), c.Hash, g.ClientID, now)
		mustNil(t, err, "ConsumeCode")
		wantEqual(t, gotC.Grant.PaymentEvidence, g.PaymentEvidence, "code's evidence")
		in := paymentIssue(gotC.Grant, now)
		mustNil(t, s.IssueTokens(t.Context(), in, now), "IssueTokens")
		rec, err := s.GetGrant(t.Context(), g.ID, now)
		mustNil(t, err, "GetGrant")
		wantEqual(t, rec.Grant.PaymentEvidence, g.PaymentEvidence, "grant's evidence")
	}},
	{"UnknownGrantIsNotFound", func(t *testing.T, s oauth.Store) {
		_, err := s.GetGrant(t.Context(), id(oauth.PrefixGrant), start())
		wantErr(t, err, oauth.ErrNotFound, "GetGrant of an unknown grant")
	}},
	{"ExpiredGrantIsNotFound", func(t *testing.T, s oauth.Store) {
		now := start()
		g := anyGrant(now)
		g.ExpiresAt = now.Add(2 * time.Hour)
		mustNil(t, s.IssueTokens(t.Context(), firstIssue(g, now), now), "IssueTokens")
		_, err := s.GetGrant(t.Context(), g.ID, g.ExpiresAt.Add(-time.Second))
		mustNil(t, err, "GetGrant one second before its end")
		_, err = s.GetGrant(t.Context(), g.ID, g.ExpiresAt)
		wantErr(t, err, oauth.ErrNotFound, "GetGrant at its end")
	}},
	{"RevokeGrantDeletesEveryListedTokenAtOnce", func(t *testing.T, s oauth.Store) {
		now := start()
		i1 := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), i1, now), "IssueTokens from code")
		i2 := refresh(t, s, i1, now)

		mustNil(t, s.RevokeGrant(t.Context(), i1.Grant.ID, now), "RevokeGrant")
		wantNoTokens(t, s, now, i2.Tokens...)
		wantErr(t, s.IssueTokens(t.Context(), nextIssue(i2, now), now), oauth.ErrRevoked, "refresh after RevokeGrant")
		rec, err := s.GetGrant(t.Context(), i1.Grant.ID, now)
		mustNil(t, err, "GetGrant of a revoked grant")
		if !rec.Revoked {
			t.Errorf("GetGrant after RevokeGrant: Revoked is false")
		}
		wantEqual(t, rec.Grant, i1.Grant, "revoked grant")
		wantNoLiveGrant(t, s, i1.Grant, now)
	}},
	{"RevokeGrantIsIdempotent", func(t *testing.T, s oauth.Store) {
		now := start()
		in := firstIssue(anyGrant(now), now)
		mustNil(t, s.IssueTokens(t.Context(), in, now), "IssueTokens")
		for i := range 3 {
			mustNil(t, s.RevokeGrant(t.Context(), in.Grant.ID, now.Add(time.Duration(i)*time.Minute)), "RevokeGrant")
		}
		rec, err := s.GetGrant(t.Context(), in.Grant.ID, now)
		mustNil(t, err, "GetGrant")
		if !rec.Revoked {
			t.Errorf("GetGrant after repeated RevokeGrant: Revoked is false")
		}
		wantEqual(t, rec.Grant, in.Grant, "grant after repeated RevokeGrant")
		wantNoTokens(t, s, now, in.Tokens...)
	}},
	{"RevokeUnknownGrantLeavesATombstone", func(t *testing.T, s oauth.Store) {
		now := start()
		g := anyGrant(now)
		for range 2 {
			mustNil(t, s.RevokeGrant(t.Context(), g.ID, now), "RevokeGrant of an unknown grant")
		}
		if rec, err := s.GetGrant(t.Context(), g.ID, now); err == nil && !rec.Revoked {
			t.Errorf("GetGrant of a tombstone: got a live grant %+v", rec)
		} else if err != nil && !errors.Is(err, oauth.ErrNotFound) {
			t.Errorf("GetGrant of a tombstone: got error %v, want a revoked record or ErrNotFound", err)
		}
		refresh := firstIssue(g, now)
		refresh.FromCode = false
		wantErr(t, s.IssueTokens(t.Context(), refresh, now), oauth.ErrRevoked, "refresh IssueTokens of a tombstone")
		wantErr(t, s.IssueTokens(t.Context(), firstIssue(g, now), now), oauth.ErrRevoked, "IssueTokens FromCode of a tombstone")
		wantNoLiveGrant(t, s, g, now)
	}},
	{"RevokeGrantLeavesOtherGrantsAlone", func(t *testing.T, s oauth.Store) {
		now := start()
		g1 := anyGrant(now)
		g2 := newGrant(g1.UID, g1.ClientID, now)
		i1, i2 := firstIssue(g1, now), firstIssue(g2, now)
		mustNil(t, s.IssueTokens(t.Context(), i1, now), "IssueTokens 1")
		mustNil(t, s.IssueTokens(t.Context(), i2, now), "IssueTokens 2")
		mustNil(t, s.RevokeGrant(t.Context(), g1.ID, now), "RevokeGrant 1")
		wantLiveTokens(t, s, now, i2.Access, i2.Refresh)
		rec, err := s.GetGrant(t.Context(), g2.ID, now)
		mustNil(t, err, "GetGrant 2")
		wantEqual(t, rec, oauth.GrantRecord{Grant: g2, Tokens: i2.Tokens}, "other grant")
	}},
	{"ListGrantsByUserAndByClient", func(t *testing.T, s oauth.Store) {
		now := start()
		u1, u2 := id("u_"), id("u_")
		c1, c2 := id(oauth.PrefixClientID), id(oauth.PrefixClientID)
		g1, g2, g3 := newGrant(u1, c1, now), newGrant(u1, c2, now), newGrant(u2, c1, now)
		var i3 oauth.Issue
		for _, g := range []oauth.Grant{g1, g2, g3} {
			in := firstIssue(g, now)
			mustNil(t, s.IssueTokens(t.Context(), in, now), "IssueTokens")
			i3 = in
		}
		wantGrantIDs(t, s, oauth.GrantFilter{UID: u1}, now, g1.ID, g2.ID)
		wantGrantIDs(t, s, oauth.GrantFilter{UID: u2}, now, g3.ID)
		wantGrantIDs(t, s, oauth.GrantFilter{ClientID: c1}, now, g1.ID, g3.ID)
		wantGrantIDs(t, s, oauth.GrantFilter{ClientID: c2}, now, g2.ID)
		wantGrantIDs(t, s, oauth.GrantFilter{UID: id("u_")}, now)
		wantGrantIDs(t, s, oauth.GrantFilter{ClientID: id(oauth.PrefixClientID)}, now)

		list, err := s.ListGrants(t.Context(), oauth.GrantFilter{UID: u2}, now)
		mustNil(t, err, "ListGrants")
		if len(list) == 1 {
			wantEqual(t, list[0], oauth.GrantRecord{Grant: g3, Tokens: i3.Tokens}, "listed grant")
		}
	}},
	{"ListGrantsExcludesRevokedAndExpired", func(t *testing.T, s oauth.Store) {
		now := start()
		u, c := id("u_"), id(oauth.PrefixClientID)
		live, revoked, ending := newGrant(u, c, now), newGrant(u, c, now), newGrant(u, c, now)
		ending.ExpiresAt = now.Add(2 * time.Hour)
		for _, g := range []oauth.Grant{live, revoked, ending} {
			mustNil(t, s.IssueTokens(t.Context(), firstIssue(g, now), now), "IssueTokens")
		}
		mustNil(t, s.RevokeGrant(t.Context(), revoked.ID, now), "RevokeGrant")
		wantGrantIDs(t, s, oauth.GrantFilter{UID: u}, now, live.ID, ending.ID)
		wantGrantIDs(t, s, oauth.GrantFilter{ClientID: c}, now, live.ID, ending.ID)
		later := ending.ExpiresAt
		wantGrantIDs(t, s, oauth.GrantFilter{UID: u}, later, live.ID)
		wantGrantIDs(t, s, oauth.GrantFilter{ClientID: c}, later, live.ID)
	}},
}

// wantGrantIDs checks that ListGrants returns exactly the grants ids, in any order.
func wantGrantIDs(t *testing.T, s oauth.Store, f oauth.GrantFilter, now time.Time, ids ...string) {
	t.Helper()
	list, err := s.ListGrants(t.Context(), f, now)
	mustNil(t, err, "ListGrants")
	var got []string
	for _, r := range list {
		if r.Revoked {
			t.Errorf("ListGrants(%+v) returned revoked grant %s", f, r.Grant.ID)
		}
		got = append(got, r.Grant.ID)
	}
	slices.Sort(got)
	want := slices.Clone(ids)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("ListGrants(%+v) = %v, want %v", f, got, want)
	}
}

// wantNoTokens checks that none of the hashes is a usable token at now.
func wantNoTokens(t *testing.T, s oauth.Store, now time.Time, hashes ...string) {
	t.Helper()
	for _, h := range hashes {
		if tok, err := s.GetToken(t.Context(), h, now); !errors.Is(err, oauth.ErrNotFound) {
			t.Errorf("GetToken(%.8s…): got %v (kind %q), want ErrNotFound", h, err, tok.Kind)
		}
	}
}

// wantLiveTokens checks that every token is stored as given and usable at now.
func wantLiveTokens(t *testing.T, s oauth.Store, now time.Time, toks ...oauth.Token) {
	t.Helper()
	for _, want := range toks {
		got, err := s.GetToken(t.Context(), want.Hash, now)
		if err != nil {
			t.Errorf("GetToken(%s token): %v, want it live", want.Kind, err)
			continue
		}
		got.Spent = false
		wantEqual(t, got, want, "live "+want.Kind+" token")
	}
}

// wantNoLiveGrant checks that g is neither listed for its user nor for its client.
func wantNoLiveGrant(t *testing.T, s oauth.Store, g oauth.Grant, now time.Time) {
	t.Helper()
	for _, f := range []oauth.GrantFilter{{UID: g.UID}, {ClientID: g.ClientID}} {
		list, err := s.ListGrants(t.Context(), f, now)
		mustNil(t, err, "ListGrants")
		for _, r := range list {
			if r.Grant.ID == g.ID {
				t.Errorf("ListGrants(%+v) lists grant %s, which should not be live", f, g.ID)
			}
		}
	}
}
