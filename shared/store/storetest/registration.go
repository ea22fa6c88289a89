package storetest

import (
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

func newInitialAccessToken(now time.Time) oauth.InitialAccessToken {
	return oauth.InitialAccessToken{
		Hash:      hash(oauth.PrefixInitialAccess),
		Profile:   oauth.ProfileFAPI2,
		CreatedAt: now.Add(millis),
		ExpiresAt: now.Add(time.Hour),
	}
}

// registrationTests prove that an operator's initial access token registers one client: it is
// taken once, expires, and a taken hash is not stored twice.
var registrationTests = []test{
	{"InitialAccessTokenIsTakenOnceAsStored", func(t *testing.T, s oauth.Store) {
		now := start()
		iat := newInitialAccessToken(now)
		mustNil(t, s.PutInitialAccessToken(t.Context(), iat), "PutInitialAccessToken")
		got, err := s.TakeInitialAccessToken(t.Context(), iat.Hash, now)
		mustNil(t, err, "TakeInitialAccessToken")
		wantEqual(t, got, iat, "initial access token")
		_, err = s.TakeInitialAccessToken(t.Context(), iat.Hash, now)
		wantErr(t, err, oauth.ErrNotFound, "TakeInitialAccessToken of a taken token")
	}},
	{"InitialAccessTokenIsReadUntilTakenOrExpired", func(t *testing.T, s oauth.Store) {
		now := start()
		iat := newInitialAccessToken(now)
		mustNil(t, s.PutInitialAccessToken(t.Context(), iat), "PutInitialAccessToken")
		got, err := s.GetInitialAccessToken(t.Context(), iat.Hash, now)
		mustNil(t, err, "GetInitialAccessToken")
		wantEqual(t, got, iat, "initial access token read")
		_, err = s.GetInitialAccessToken(t.Context(), iat.Hash, iat.ExpiresAt)
		wantErr(t, err, oauth.ErrNotFound, "GetInitialAccessToken at its expiry")
		_, err = s.GetInitialAccessToken(t.Context(), hash(oauth.PrefixInitialAccess), now)
		wantErr(t, err, oauth.ErrNotFound, "GetInitialAccessToken of an unknown hash")
		_, err = s.TakeInitialAccessToken(t.Context(), iat.Hash, now)
		mustNil(t, err, "TakeInitialAccessToken after reads")
		_, err = s.GetInitialAccessToken(t.Context(), iat.Hash, now)
		wantErr(t, err, oauth.ErrNotFound, "GetInitialAccessToken of a taken token")
	}},
	{"UnknownInitialAccessTokenIsNotFound", func(t *testing.T, s oauth.Store) {
		_, err := s.TakeInitialAccessToken(t.Context(), hash(oauth.PrefixInitialAccess), start())
		wantErr(t, err, oauth.ErrNotFound, "TakeInitialAccessToken of an unknown hash")
	}},
	{"ExpiredInitialAccessTokenIsNotFoundAndNotTaken", func(t *testing.T, s oauth.Store) {
		now := start()
		iat := newInitialAccessToken(now)
		mustNil(t, s.PutInitialAccessToken(t.Context(), iat), "PutInitialAccessToken")
		_, err := s.TakeInitialAccessToken(t.Context(), iat.Hash, iat.ExpiresAt)
		wantErr(t, err, oauth.ErrNotFound, "TakeInitialAccessToken at its expiry")
		// The refused take left it: still live before its expiry.
		_, err = s.TakeInitialAccessToken(t.Context(), iat.Hash, now)
		mustNil(t, err, "TakeInitialAccessToken before its expiry")
	}},
	{"TakenHashIsAlreadyExists", func(t *testing.T, s oauth.Store) {
		now := start()
		iat := newInitialAccessToken(now)
		mustNil(t, s.PutInitialAccessToken(t.Context(), iat), "PutInitialAccessToken")
		wantErr(t, s.PutInitialAccessToken(t.Context(), iat), oauth.ErrAlreadyExists, "PutInitialAccessToken of a taken hash")
	}},
	{"RacingTakesOfOneInitialAccessTokenHaveOneWinner", func(t *testing.T, s oauth.Store) {
		now := start()
		iat := newInitialAccessToken(now)
		mustNil(t, s.PutInitialAccessToken(t.Context(), iat), "PutInitialAccessToken")
		errs := race(racers, func(int) error {
			_, err := s.TakeInitialAccessToken(t.Context(), iat.Hash, now)
			return err
		})
		wantOneWinner(t, errs, oauth.ErrNotFound, "TakeInitialAccessToken")
	}},
}
