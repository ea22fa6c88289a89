package storetest

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// errFn is what the suite's update functions fail with, to prove that the store hands an
// fn's error back and writes nothing.
var errFn = errors.New("storetest: fn refused the update")

func newClient(now time.Time) oauth.Client {
	return oauth.Client{
		ID:   id(oauth.PrefixClientID),
		Name: "Ledger & Co",
		SecretHashes: []oauth.SecretHash{
			{Hash: oauth.HashSecret("s1")},
			{Hash: oauth.HashSecret("s0"), ExpiresAt: now.Add(24 * time.Hour)},
		},
		RedirectURIs:   []string{"https://ledger.example.com/cb", "http://127.0.0.1:9000/cb"},
		Scopes:         []string{oauth.ScopeOpenID, oauth.ScopeEmail, oauth.ScopeTransfersWrite},
		LogoURI:        "https://ledger.example.com/logo.png",
		CertThumbprint: "bwcK0esc3ACC3DB2Y5_lESsXE8o9ltc05O89jdN-dg2",
		CertSubjectDN:  "CN=ledger,O=Ledger",
		// Every certificate field, so the round trip proves each is stored (a real client
		// registers one: oauth.Client.ValidCertBinding).
		CertSANDNS:   "ledger.example.com",
		CertSANURI:   "https://ledger.example.com/software/1",
		CertSANIP:    "192.0.2.7",
		CertSANEmail: "ops@ledger.example.com",
		CreatedAt:    now.Add(millis),
		UpdatedAt:    now.Add(2 * millis),
	}
}

func newUser(now time.Time) oauth.User {
	return oauth.User{
		UID:              id("u_"),
		Username:         id("ada."),
		PasswordHash:     "$argon2id$v=19$m=65536,t=1,p=2$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo",
		CompanyProfileID: "cp-1",
		CompanyUserID:    "cu-1",
		Claims: oauth.Claims{
			Email: "ada@example.com", EmailVerified: true, Phone: "+442071838750",
			Name: "Ada Lovelace", GivenName: "Ada", FamilyName: "Lovelace", Birthdate: "1815-12-10",
			Gender: "female", Picture: "https://example.com/ada.png", Locale: "en-GB",
			UpdatedAt: 1700000000, ZoneInfo: "Europe/London",
		},
		CreatedAt: now.Add(millis),
	}
}

// clientTests prove client CRUD and the compare-and-swap update.
var clientTests = []test{
	{"CreateThenGetReturnsIt", func(t *testing.T, s oauth.Store) {
		c := newClient(start())
		mustNil(t, s.CreateClient(t.Context(), c), "CreateClient")
		got, err := s.GetClient(t.Context(), c.ID)
		mustNil(t, err, "GetClient")
		wantEqual(t, got, c, "client")
	}},
	{"LogoutSettingsAreKept", func(t *testing.T, s oauth.Store) {
		// The logout settings (RP-Initiated and Back-Channel Logout; shared/logout) read back as
		// written, and an update that clears them clears them.
		c := newClient(start())
		c.PostLogoutRedirectURIs = []string{"https://ledger.example.com/bye", "https://ledger.example.com/bye2"}
		c.BackchannelLogoutURI = "https://ledger.example.com/bc?x=1"
		c.BackchannelLogoutSessionRequired, c.LogoutRevokesGrants = true, true
		mustNil(t, s.CreateClient(t.Context(), c), "CreateClient")
		got, err := s.GetClient(t.Context(), c.ID)
		mustNil(t, err, "GetClient")
		wantEqual(t, got, c, "client with logout settings")
		want := c
		want.PostLogoutRedirectURIs, want.BackchannelLogoutURI = nil, ""
		want.BackchannelLogoutSessionRequired, want.LogoutRevokesGrants = false, false
		mustNil(t, s.UpdateClient(t.Context(), c.ID, func(oauth.Client) (oauth.Client, error) { return want, nil }), "UpdateClient")
		got, err = s.GetClient(t.Context(), c.ID)
		mustNil(t, err, "GetClient")
		wantEqual(t, got, want, "client with its logout settings cleared")
	}},
	{"CreateWithTakenIDIsErrAlreadyExists", func(t *testing.T, s oauth.Store) {
		c := newClient(start())
		mustNil(t, s.CreateClient(t.Context(), c), "CreateClient")
		other := c
		other.Name = "Impostor"
		wantErr(t, s.CreateClient(t.Context(), other), oauth.ErrAlreadyExists, "CreateClient with a taken id")
		got, err := s.GetClient(t.Context(), c.ID)
		mustNil(t, err, "GetClient")
		wantEqual(t, got, c, "client after the refused create")
	}},
	{"UnknownIsNotFound", func(t *testing.T, s oauth.Store) {
		_, err := s.GetClient(t.Context(), id(oauth.PrefixClientID))
		wantErr(t, err, oauth.ErrNotFound, "GetClient of an unknown id")
		err = s.UpdateClient(t.Context(), id(oauth.PrefixClientID), func(c oauth.Client) (oauth.Client, error) {
			t.Errorf("UpdateClient called fn for an unknown client")
			return c, nil
		})
		wantErr(t, err, oauth.ErrNotFound, "UpdateClient of an unknown id")
	}},
	{"UpdateAppliesFn", func(t *testing.T, s oauth.Store) {
		now := start()
		c := newClient(now)
		mustNil(t, s.CreateClient(t.Context(), c), "CreateClient")
		want := c
		want.Disabled = true
		want.RedirectURIs = append(slices.Clone(c.RedirectURIs), "https://ledger.example.com/cb2")
		want.UpdatedAt = now.Add(time.Hour + millis)
		err := s.UpdateClient(t.Context(), c.ID, func(old oauth.Client) (oauth.Client, error) {
			wantEqual(t, old, c, "client given to fn")
			return want, nil
		})
		mustNil(t, err, "UpdateClient")
		got, err := s.GetClient(t.Context(), c.ID)
		mustNil(t, err, "GetClient")
		wantEqual(t, got, want, "updated client")
	}},
	{"UpdateFnErrorIsReturnedAndNothingWritten", func(t *testing.T, s oauth.Store) {
		c := newClient(start())
		mustNil(t, s.CreateClient(t.Context(), c), "CreateClient")
		err := s.UpdateClient(t.Context(), c.ID, func(old oauth.Client) (oauth.Client, error) {
			old.Name = "changed"
			return old, errFn
		})
		wantErr(t, err, errFn, "UpdateClient with a failing fn")
		got, err := s.GetClient(t.Context(), c.ID)
		mustNil(t, err, "GetClient")
		wantEqual(t, got, c, "client after the failed update")
	}},
	{"DeleteThenGetIsNotFound", func(t *testing.T, s oauth.Store) {
		c := newClient(start())
		mustNil(t, s.CreateClient(t.Context(), c), "CreateClient")
		mustNil(t, s.DeleteClient(t.Context(), c.ID), "DeleteClient")
		_, err := s.GetClient(t.Context(), c.ID)
		wantErr(t, err, oauth.ErrNotFound, "GetClient after DeleteClient")
		if err := s.DeleteClient(t.Context(), c.ID); err != nil && !errors.Is(err, oauth.ErrNotFound) {
			t.Errorf("DeleteClient of a deleted client: %v, want nil or ErrNotFound", err)
		}
		mustNil(t, s.CreateClient(t.Context(), c), "CreateClient after DeleteClient")
	}},
	{"ListOfAnEmptyStoreIsEmpty", func(t *testing.T, s oauth.Store) {
		clients, err := s.ListClients(t.Context())
		mustNil(t, err, "ListClients")
		users, err := s.ListUsers(t.Context())
		mustNil(t, err, "ListUsers")
		if len(clients) != 0 || len(users) != 0 {
			t.Errorf("a fresh store lists %d clients and %d users, want none", len(clients), len(users))
		}
	}},
	{"ListReturnsEveryClient", func(t *testing.T, s oauth.Store) {
		now := start()
		var want []oauth.Client
		for range 3 {
			c := newClient(now)
			mustNil(t, s.CreateClient(t.Context(), c), "CreateClient")
			want = append(want, c)
		}
		mustNil(t, s.DeleteClient(t.Context(), want[2].ID), "DeleteClient")
		got, err := s.ListClients(t.Context())
		mustNil(t, err, "ListClients")
		got = keepIDs(got, func(c oauth.Client) string { return c.ID }, want[0].ID, want[1].ID, want[2].ID)
		want = want[:2]
		byID := func(a, b oauth.Client) int { return strings.Compare(a.ID, b.ID) }
		slices.SortFunc(got, byID)
		slices.SortFunc(want, byID)
		wantEqual(t, got, want, "listed clients")
	}},
}

// userTests prove user CRUD and the unique username.
var userTests = []test{
	{"CreateThenGetByUIDAndByUsername", func(t *testing.T, s oauth.Store) {
		u := newUser(start())
		mustNil(t, s.CreateUser(t.Context(), u), "CreateUser")
		got, err := s.GetUser(t.Context(), u.UID)
		mustNil(t, err, "GetUser")
		wantEqual(t, got, u, "user by uid")
		got, err = s.GetUserByUsername(t.Context(), u.Username)
		mustNil(t, err, "GetUserByUsername")
		wantEqual(t, got, u, "user by username")
	}},
	{"UnknownIsNotFound", func(t *testing.T, s oauth.Store) {
		_, err := s.GetUser(t.Context(), id("u_"))
		wantErr(t, err, oauth.ErrNotFound, "GetUser of an unknown uid")
		_, err = s.GetUserByUsername(t.Context(), id("nobody."))
		wantErr(t, err, oauth.ErrNotFound, "GetUserByUsername of an unknown username")
		err = s.UpdateUser(t.Context(), id("u_"), func(u oauth.User) (oauth.User, error) {
			t.Errorf("UpdateUser called fn for an unknown user")
			return u, nil
		})
		wantErr(t, err, oauth.ErrNotFound, "UpdateUser of an unknown uid")
	}},
	{"UsernamesAreComparedAsGiven", func(t *testing.T, s oauth.Store) {
		u := newUser(start())
		u.Username = "Ada." + id("")
		mustNil(t, s.CreateUser(t.Context(), u), "CreateUser")
		_, err := s.GetUserByUsername(t.Context(), "a"+u.Username[1:])
		wantErr(t, err, oauth.ErrNotFound, "GetUserByUsername with other case")
	}},
	{"CreateWithTakenUIDIsErrAlreadyExists", func(t *testing.T, s oauth.Store) {
		now := start()
		u := newUser(now)
		mustNil(t, s.CreateUser(t.Context(), u), "CreateUser")
		other := newUser(now)
		other.UID = u.UID
		wantErr(t, s.CreateUser(t.Context(), other), oauth.ErrAlreadyExists, "CreateUser with a taken uid")
		got, err := s.GetUser(t.Context(), u.UID)
		mustNil(t, err, "GetUser")
		wantEqual(t, got, u, "user after the refused create")
		_, err = s.GetUserByUsername(t.Context(), other.Username)
		wantErr(t, err, oauth.ErrNotFound, "username of the refused create")
	}},
	{"CreateWithTakenUsernameIsErrAlreadyExists", func(t *testing.T, s oauth.Store) {
		now := start()
		u := newUser(now)
		mustNil(t, s.CreateUser(t.Context(), u), "CreateUser")
		other := newUser(now)
		other.Username = u.Username
		wantErr(t, s.CreateUser(t.Context(), other), oauth.ErrAlreadyExists, "CreateUser with a taken username")
		_, err := s.GetUser(t.Context(), other.UID)
		wantErr(t, err, oauth.ErrNotFound, "uid of the refused create")
		got, err := s.GetUserByUsername(t.Context(), u.Username)
		mustNil(t, err, "GetUserByUsername")
		wantEqual(t, got, u, "owner of the username")
	}},
	{"UpdateAppliesFn", func(t *testing.T, s oauth.Store) {
		u := newUser(start())
		mustNil(t, s.CreateUser(t.Context(), u), "CreateUser")
		want := u
		want.Disabled = true
		want.PasswordHash = "$argon2id$v=19$m=65536,t=1,p=2$bmV3c2FsdA$bmV3aGFzaA"
		want.Claims.Email = "countess@example.com"
		err := s.UpdateUser(t.Context(), u.UID, func(old oauth.User) (oauth.User, error) {
			wantEqual(t, old, u, "user given to fn")
			return want, nil
		})
		mustNil(t, err, "UpdateUser")
		got, err := s.GetUserByUsername(t.Context(), u.Username)
		mustNil(t, err, "GetUserByUsername")
		wantEqual(t, got, want, "updated user")
	}},
	{"UpdateFnErrorIsReturnedAndNothingWritten", func(t *testing.T, s oauth.Store) {
		u := newUser(start())
		mustNil(t, s.CreateUser(t.Context(), u), "CreateUser")
		err := s.UpdateUser(t.Context(), u.UID, func(old oauth.User) (oauth.User, error) {
			old.Disabled = true
			return old, errFn
		})
		wantErr(t, err, errFn, "UpdateUser with a failing fn")
		got, err := s.GetUser(t.Context(), u.UID)
		mustNil(t, err, "GetUser")
		wantEqual(t, got, u, "user after the failed update")
	}},
	{"UpdateMayNotChangeUsernameOrUID", func(t *testing.T, s oauth.Store) {
		u := newUser(start())
		mustNil(t, s.CreateUser(t.Context(), u), "CreateUser")
		for _, change := range []func(*oauth.User){
			func(x *oauth.User) { x.Username = id("renamed.") },
			func(x *oauth.User) { x.UID = id("u_") },
		} {
			var changed oauth.User
			err := s.UpdateUser(t.Context(), u.UID, func(old oauth.User) (oauth.User, error) {
				change(&old)
				changed = old
				return old, nil
			})
			if err == nil {
				t.Errorf("UpdateUser changing uid or username (%s, %s) succeeded, want an error", changed.UID, changed.Username)
			}
			got, err := s.GetUserByUsername(t.Context(), u.Username)
			mustNil(t, err, "GetUserByUsername of the original username")
			wantEqual(t, got, u, "user after the refused update")
			_, err = s.GetUserByUsername(t.Context(), changed.Username)
			if changed.Username != u.Username {
				wantErr(t, err, oauth.ErrNotFound, "GetUserByUsername of the refused username")
			}
			if changed.UID != u.UID {
				_, err = s.GetUser(t.Context(), changed.UID)
				wantErr(t, err, oauth.ErrNotFound, "GetUser of the refused uid")
			}
		}
	}},
	{"DeleteFreesTheUsername", func(t *testing.T, s oauth.Store) {
		now := start()
		u := newUser(now)
		mustNil(t, s.CreateUser(t.Context(), u), "CreateUser")
		mustNil(t, s.DeleteUser(t.Context(), u.UID), "DeleteUser")
		_, err := s.GetUser(t.Context(), u.UID)
		wantErr(t, err, oauth.ErrNotFound, "GetUser after DeleteUser")
		_, err = s.GetUserByUsername(t.Context(), u.Username)
		wantErr(t, err, oauth.ErrNotFound, "GetUserByUsername after DeleteUser")
		if err := s.DeleteUser(t.Context(), u.UID); err != nil && !errors.Is(err, oauth.ErrNotFound) {
			t.Errorf("DeleteUser of a deleted user: %v, want nil or ErrNotFound", err)
		}
		next := newUser(now)
		next.Username = u.Username
		mustNil(t, s.CreateUser(t.Context(), next), "CreateUser with the freed username")
		got, err := s.GetUserByUsername(t.Context(), u.Username)
		mustNil(t, err, "GetUserByUsername")
		wantEqual(t, got, next, "new owner of the username")
	}},
	{"ListReturnsEveryUser", func(t *testing.T, s oauth.Store) {
		now := start()
		var want []oauth.User
		for range 3 {
			u := newUser(now)
			mustNil(t, s.CreateUser(t.Context(), u), "CreateUser")
			want = append(want, u)
		}
		mustNil(t, s.DeleteUser(t.Context(), want[2].UID), "DeleteUser")
		got, err := s.ListUsers(t.Context())
		mustNil(t, err, "ListUsers")
		got = keepIDs(got, func(u oauth.User) string { return u.UID }, want[0].UID, want[1].UID, want[2].UID)
		want = want[:2]
		byID := func(a, b oauth.User) int { return strings.Compare(a.UID, b.UID) }
		slices.SortFunc(got, byID)
		slices.SortFunc(want, byID)
		wantEqual(t, got, want, "listed users")
	}},
}

// keepIDs keeps the items whose id is among ids: a store shared between sub-tests may list
// items of others, which are not this sub-test's business.
func keepIDs[T any](items []T, key func(T) string, ids ...string) []T {
	var out []T
	for _, it := range items {
		if slices.Contains(ids, key(it)) {
			out = append(out, it)
		}
	}
	return out
}
