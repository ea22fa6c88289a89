package admin_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/acmebank/authserver/shared/admin"
)

// TestClientLogoutSettings_RefusedWithTheRulesOfRedirectURIsAndHTTPS: post_logout_redirect_uris
// follow the rules of redirect URIs and backchannel_logout_uri is https only, at creation and
// at update; a refused one stores nothing, and the accepted settings read back as given.
func TestClientLogoutSettings_RefusedWithTheRulesOfRedirectURIsAndHTTPS(t *testing.T) {
	s, _ := newService(t)
	ctx := context.Background()
	bad := map[string]admin.ClientSpec{
		"relative post-logout URI":            {PostLogoutRedirectURIs: []string{"/bye"}},
		"post-logout URI with a fragment":     {PostLogoutRedirectURIs: []string{"https://books.example/bye#x"}},
		"plain http post-logout off loopback": {PostLogoutRedirectURIs: []string{"http://books.example/bye"}},
		"javascript post-logout URI":          {PostLogoutRedirectURIs: []string{"javascript:alert(1)"}},
		"back-channel over http":              {BackchannelLogoutURI: "http://books.example/bc"},
		"back-channel on loopback over http":  {BackchannelLogoutURI: "http://127.0.0.1/bc"},
		"back-channel with a fragment":        {BackchannelLogoutURI: "https://books.example/bc#x"},
		"back-channel with user information":  {BackchannelLogoutURI: "https://u:p@books.example/bc"},
		"back-channel relative":               {BackchannelLogoutURI: "/bc"},
	}
	for name, logout := range bad {
		t.Run(name, func(t *testing.T) {
			spec := validClient
			spec.PostLogoutRedirectURIs, spec.BackchannelLogoutURI = logout.PostLogoutRedirectURIs, logout.BackchannelLogoutURI
			if _, _, err := s.CreateClient(ctx, spec); !errors.Is(err, admin.ErrInvalid) {
				t.Fatalf("CreateClient = %v, want ErrInvalid", err)
			}
		})
	}
	if list, err := s.ListClients(ctx); err != nil || len(list) != 0 {
		t.Fatalf("refused creates stored %d client(s) (%v)", len(list), err)
	}
	spec := validClient
	spec.PostLogoutRedirectURIs = []string{"https://books.example/bye", "https://books.example/bye", "http://127.0.0.1:4499/bye"}
	spec.BackchannelLogoutURI, spec.BackchannelLogoutSessionRequired, spec.LogoutRevokesGrants = "https://books.example/bc?x=1", true, true
	c, _ := mustClient(t, s, spec)
	got, err := s.GetClient(ctx, c.ID)
	if err != nil || !slices.Equal(got.PostLogoutRedirectURIs, []string{"https://books.example/bye", "http://127.0.0.1:4499/bye"}) ||
		got.BackchannelLogoutURI != "https://books.example/bc?x=1" || !got.BackchannelLogoutSessionRequired || !got.LogoutRevokesGrants {
		t.Fatalf("stored %+v (%v)", got, err)
	}
	httpURI, badList := "http://books.example/bc", []string{"https://books.example/bye#f"}
	for _, ch := range []admin.ClientChanges{{BackchannelLogoutURI: &httpURI}, {PostLogoutRedirectURIs: &badList}} {
		if _, err := s.UpdateClient(ctx, c.ID, ch); !errors.Is(err, admin.ErrInvalid) {
			t.Fatalf("UpdateClient = %v, want ErrInvalid", err)
		}
	}
	none, off := "", false
	upd, err := s.UpdateClient(ctx, c.ID, admin.ClientChanges{BackchannelLogoutURI: &none, LogoutRevokesGrants: &off, PostLogoutRedirectURIs: &[]string{}})
	if err != nil || upd.BackchannelLogoutURI != "" || upd.LogoutRevokesGrants || len(upd.PostLogoutRedirectURIs) != 0 {
		t.Fatalf("update %+v (%v)", upd, err)
	}
}
