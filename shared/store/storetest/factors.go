package storetest

import (
	"errors"
	"testing"

	"github.com/acmebank/authserver/shared/oauth"
)

// factorTests prove what strong authentication relies on: a user's factors are one versioned
// record, created, listed, changed (a counter, a used code) and deleted by compare-and-swap,
// and racing changes each succeed only on the version they read, so none is lost.
var factorTests = []test{
	{"NoneIsAnEmptySetAtVersionZero", func(t *testing.T, s oauth.Store) {
		f, err := s.Factors(t.Context(), id("u_"))
		mustNil(t, err, "Factors")
		if f.Version != 0 || len(f.Factors) != 0 || f.Any() {
			t.Fatalf("factors of a user without any: %+v", f)
		}
	}},
	{"CreateListUpdateCounterAndDelete", func(t *testing.T, s oauth.Store) {
		uid, now := id("u_"), start()
		passkey := oauth.Factor{ID: id("f_"), Kind: oauth.FactorPasskey, CreatedAt: now, Credential: []byte(`{"authenticator":{"signCount":1}}`), CredentialID: []byte{1, 2, 3}}
		totp := oauth.Factor{ID: id("f_"), Kind: oauth.FactorTOTP, CreatedAt: now, Secret: "JBSWY3DPEHPK3PXP", LastStep: 100, RecoveryHashes: []string{hash("r_"), hash("r_")}}
		mustNil(t, s.UpdateFactors(t.Context(), uid, func(f oauth.UserFactors) (oauth.UserFactors, error) {
			f.Factors = append(f.Factors, passkey, totp)
			f.LastStrongAuth = now
			return f, nil
		}), "create")
		got, err := s.Factors(t.Context(), uid)
		mustNil(t, err, "Factors")
		if got.Version != 1 || got.UID != uid || len(got.Factors) != 2 || !got.Has(oauth.FactorPasskey) || !got.Has(oauth.FactorTOTP) {
			t.Fatalf("after create: %+v", got)
		}
		wantEqual(t, got.Factors, []oauth.Factor{passkey, totp}, "the stored factors")
		wantEqual(t, got.LastStrongAuth, now, "LastStrongAuth")

		mustNil(t, s.UpdateFactors(t.Context(), uid, func(f oauth.UserFactors) (oauth.UserFactors, error) {
			f.Factors[1].LastStep = 101
			f.Factors[1].RecoveryHashes = f.Factors[1].RecoveryHashes[1:]
			return f, nil
		}), "update the counter")
		got, _ = s.Factors(t.Context(), uid)
		if got.Version != 2 || got.Factors[1].LastStep != 101 || len(got.Factors[1].RecoveryHashes) != 1 {
			t.Fatalf("after the update: %+v", got)
		}

		mustNil(t, s.UpdateFactors(t.Context(), uid, func(f oauth.UserFactors) (oauth.UserFactors, error) {
			f.Factors = f.Factors[:1]
			return f, nil
		}), "delete one")
		got, _ = s.Factors(t.Context(), uid)
		if len(got.Factors) != 1 || got.Factors[0].Kind != oauth.FactorPasskey {
			t.Fatalf("after deleting the TOTP factor: %+v", got)
		}
		other, _ := s.Factors(t.Context(), id("u_"))
		if other.Any() {
			t.Fatal("another user sees the factors")
		}
	}},
	{"ErrorOfFnWritesNothing", func(t *testing.T, s oauth.Store) {
		uid := id("u_")
		boom := errors.New("refused")
		err := s.UpdateFactors(t.Context(), uid, func(f oauth.UserFactors) (oauth.UserFactors, error) {
			f.Factors = append(f.Factors, oauth.Factor{ID: id("f_"), Kind: oauth.FactorTOTP})
			return f, boom
		})
		wantErr(t, err, boom, "UpdateFactors with a failing fn")
		got, _ := s.Factors(t.Context(), uid)
		if got.Version != 0 || got.Any() {
			t.Fatalf("a refused change was written: %+v", got)
		}
	}},
	{"RacingChangesAreEachWrittenOnTheOneBefore", func(t *testing.T, s oauth.Store) {
		uid, now := id("u_"), start()
		mustNil(t, s.UpdateFactors(t.Context(), uid, func(f oauth.UserFactors) (oauth.UserFactors, error) {
			f.Factors = []oauth.Factor{{ID: id("f_"), Kind: oauth.FactorTOTP, CreatedAt: now, LastStep: 1}}
			return f, nil
		}), "create")
		errs := race(racers, func(i int) error {
			return s.UpdateFactors(t.Context(), uid, func(f oauth.UserFactors) (oauth.UserFactors, error) {
				f.Factors[0].LastStep = int64(100 + i)
				return f, nil
			})
		})
		wins := 0
		for _, err := range errs {
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, oauth.ErrConflict):
				t.Fatalf("a racing update: %v", err)
			}
		}
		got, _ := s.Factors(t.Context(), uid)
		if wins < 1 || int(got.Version) != 1+wins {
			t.Fatalf("%d racing updates written, version %d: every write must be one read's successor", wins, got.Version)
		}
	}},
}
