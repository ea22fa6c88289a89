package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

func newAuthRequest(now time.Time) oauth.AuthRequest {
	return oauth.AuthRequest{
		ID:                   id(oauth.PrefixRequest),
		ClientID:             id(oauth.PrefixClientID),
		RedirectURI:          "https://client.example.com/cb",
		Scopes:               oauth.Scopes{oauth.ScopeOpenID, oauth.ScopeTransfersWriteDotted},
		State:                "af0ifjsldkj",
		Nonce:                "n-0S6_WzA2Mj",
		CodeChallenge:        "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
		CodeChallengeMethod:  "S256",
		Prompt:               "login",
		UILocales:            "en-GB",
		MaxAge:               600,
		AuthorizationDetails: json.RawMessage(`[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"1.00"}}]`),
		CSRFHash:             hash(oauth.PrefixCSRF),
		CreatedAt:            now.Add(millis),
		ExpiresAt:            now.Add(10 * time.Minute),
	}
}

func newSession(now time.Time) oauth.Session {
	return oauth.Session{
		Hash:      hash(oauth.PrefixSession),
		UID:       id("u_"),
		AuthTime:  now.Add(millis),
		ExpiresAt: now.Add(8 * time.Hour),
	}
}

// authRequestTests prove that a pending request is answered once and expires.
var authRequestTests = []test{
	{"PutThenGetReturnsIt", func(t *testing.T, s oauth.Store) {
		now := start()
		r := newAuthRequest(now)
		mustNil(t, s.PutAuthRequest(t.Context(), r), "PutAuthRequest")
		for range 2 {
			got, err := s.GetAuthRequest(t.Context(), r.ID, now)
			mustNil(t, err, "GetAuthRequest")
			wantEqual(t, got, r, "auth request")
		}
	}},
	{"UnknownIsNotFound", func(t *testing.T, s oauth.Store) {
		_, err := s.GetAuthRequest(t.Context(), id(oauth.PrefixRequest), start())
		wantErr(t, err, oauth.ErrNotFound, "GetAuthRequest of an unknown id")
		_, err = s.TakeAuthRequest(t.Context(), id(oauth.PrefixRequest), start())
		wantErr(t, err, oauth.ErrNotFound, "TakeAuthRequest of an unknown id")
	}},
	{"ExpiredIsNotFound", func(t *testing.T, s oauth.Store) {
		now := start()
		r := newAuthRequest(now)
		mustNil(t, s.PutAuthRequest(t.Context(), r), "PutAuthRequest")
		_, err := s.GetAuthRequest(t.Context(), r.ID, r.ExpiresAt.Add(-time.Second))
		mustNil(t, err, "GetAuthRequest one second before expiry")
		_, err = s.GetAuthRequest(t.Context(), r.ID, r.ExpiresAt)
		wantErr(t, err, oauth.ErrNotFound, "GetAuthRequest at expiry")
		_, err = s.TakeAuthRequest(t.Context(), r.ID, r.ExpiresAt)
		wantErr(t, err, oauth.ErrNotFound, "TakeAuthRequest at expiry")
	}},
	{"TakeReturnsItOnce", func(t *testing.T, s oauth.Store) {
		now := start()
		r := newAuthRequest(now)
		mustNil(t, s.PutAuthRequest(t.Context(), r), "PutAuthRequest")
		got, err := s.TakeAuthRequest(t.Context(), r.ID, now)
		mustNil(t, err, "TakeAuthRequest")
		wantEqual(t, got, r, "taken auth request")
		_, err = s.TakeAuthRequest(t.Context(), r.ID, now)
		wantErr(t, err, oauth.ErrNotFound, "second TakeAuthRequest")
		_, err = s.GetAuthRequest(t.Context(), r.ID, now)
		wantErr(t, err, oauth.ErrNotFound, "GetAuthRequest after TakeAuthRequest")
	}},
}

// sessionTests prove session lookup, expiry and sign-out.
var sessionTests = []test{
	{"PutThenGetReturnsIt", func(t *testing.T, s oauth.Store) {
		now := start()
		x := newSession(now)
		mustNil(t, s.PutSession(t.Context(), x), "PutSession")
		got, err := s.GetSession(t.Context(), x.Hash, now)
		mustNil(t, err, "GetSession")
		wantEqual(t, got, x, "session")
	}},
	{"UnknownIsNotFound", func(t *testing.T, s oauth.Store) {
		_, err := s.GetSession(t.Context(), hash(oauth.PrefixSession), start())
		wantErr(t, err, oauth.ErrNotFound, "GetSession of an unknown hash")
	}},
	{"ExpiredIsNotFound", func(t *testing.T, s oauth.Store) {
		now := start()
		x := newSession(now)
		mustNil(t, s.PutSession(t.Context(), x), "PutSession")
		_, err := s.GetSession(t.Context(), x.Hash, x.ExpiresAt.Add(-time.Second))
		mustNil(t, err, "GetSession one second before expiry")
		_, err = s.GetSession(t.Context(), x.Hash, x.ExpiresAt)
		wantErr(t, err, oauth.ErrNotFound, "GetSession at expiry")
	}},
	{"DeleteEndsIt", func(t *testing.T, s oauth.Store) {
		now := start()
		x, other := newSession(now), newSession(now)
		mustNil(t, s.PutSession(t.Context(), x), "PutSession")
		mustNil(t, s.PutSession(t.Context(), other), "PutSession other")
		mustNil(t, s.DeleteSession(t.Context(), x.Hash), "DeleteSession")
		_, err := s.GetSession(t.Context(), x.Hash, now)
		wantErr(t, err, oauth.ErrNotFound, "GetSession after DeleteSession")
		_, err = s.GetSession(t.Context(), other.Hash, now)
		mustNil(t, err, "GetSession of another session")
		mustNil(t, s.DeleteSession(t.Context(), x.Hash), "DeleteSession again")
	}},
	{"TakeEndsItOnceAmongRacingCalls", func(t *testing.T, s oauth.Store) {
		now := start()
		x, other := newSession(now), newSession(now)
		mustNil(t, s.PutSession(t.Context(), x), "PutSession")
		mustNil(t, s.PutSession(t.Context(), other), "PutSession other")
		errs := race(racers, func(int) error { return s.TakeSession(t.Context(), x.Hash) })
		wantOneWinner(t, errs, oauth.ErrNotFound, "racing TakeSession")
		_, err := s.GetSession(t.Context(), x.Hash, now)
		wantErr(t, err, oauth.ErrNotFound, "GetSession after TakeSession")
		_, err = s.GetSession(t.Context(), other.Hash, now)
		mustNil(t, err, "GetSession of another session")
		wantErr(t, s.TakeSession(t.Context(), newSession(now).Hash), oauth.ErrNotFound, "TakeSession of an unknown session")
	}},
}

// failureTests prove the login-failure counters and their window.
var failureTests = []test{
	{"CountsWithinTheWindow", func(t *testing.T, s oauth.Store) {
		now := start()
		key := id("login:")
		const window = time.Minute
		for i := 1; i <= 3; i++ {
			n, err := s.CountFailure(t.Context(), key, window, now.Add(time.Duration(i)*10*time.Second))
			mustNil(t, err, "CountFailure")
			if n != i {
				t.Errorf("CountFailure #%d = %d, want %d", i, n, i)
			}
		}
		n, err := s.Failures(t.Context(), key, now.Add(window-time.Second))
		mustNil(t, err, "Failures")
		if n != 3 {
			t.Errorf("Failures = %d, want 3", n)
		}
		other, err := s.Failures(t.Context(), id("login:"), now)
		mustNil(t, err, "Failures of another key")
		if other != 0 {
			t.Errorf("Failures of an unknown key = %d, want 0", other)
		}
	}},
	{"WindowRunsFromTheFirstFailureThenRestarts", func(t *testing.T, s oauth.Store) {
		now := start()
		key := id("login:")
		const window = time.Minute
		for _, at := range []time.Time{now, now.Add(50 * time.Second)} {
			_, err := s.CountFailure(t.Context(), key, window, at)
			mustNil(t, err, "CountFailure")
		}
		end := now.Add(window)
		n, err := s.Failures(t.Context(), key, end)
		mustNil(t, err, "Failures at the window's end")
		if n != 0 {
			t.Errorf("Failures at the end of the first failure's window = %d, want 0", n)
		}
		n, err = s.CountFailure(t.Context(), key, window, end)
		mustNil(t, err, "CountFailure after the window")
		if n != 1 {
			t.Errorf("CountFailure after the window = %d, want 1 (a new window)", n)
		}
		n, err = s.Failures(t.Context(), key, end.Add(window-time.Second))
		mustNil(t, err, "Failures in the new window")
		if n != 1 {
			t.Errorf("Failures in the new window = %d, want 1", n)
		}
	}},
	{"ResetForgetsTheCounter", func(t *testing.T, s oauth.Store) {
		now := start()
		key := id("login:")
		for range 2 {
			_, err := s.CountFailure(t.Context(), key, time.Hour, now)
			mustNil(t, err, "CountFailure")
		}
		mustNil(t, s.ResetFailures(t.Context(), key), "ResetFailures")
		n, err := s.Failures(t.Context(), key, now)
		mustNil(t, err, "Failures after ResetFailures")
		if n != 0 {
			t.Errorf("Failures after ResetFailures = %d, want 0", n)
		}
		n, err = s.CountFailure(t.Context(), key, time.Hour, now)
		mustNil(t, err, "CountFailure after ResetFailures")
		if n != 1 {
			t.Errorf("CountFailure after ResetFailures = %d, want 1", n)
		}
		mustNil(t, s.ResetFailures(t.Context(), id("login:")), "ResetFailures of an unknown key")
	}},
}
