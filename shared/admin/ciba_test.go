package admin_test

import (
	"context"
	"errors"
	"testing"

	"github.com/acmebank/authserver/shared/admin"
	"github.com/acmebank/authserver/shared/oauth"
)

// TestClientCIBASettings_CheckedAtCreationAndUpdate: the CIBA metadata go through
// oauth.Client.ValidBackchannelSettings at creation and at update: a ping client over http or
// without an endpoint is refused and stores nothing; an accepted ping client reads back as
// given, and an update to poll with the endpoint removed is accepted.
func TestClientCIBASettings_CheckedAtCreationAndUpdate(t *testing.T) {
	s, _ := newService(t)
	ctx := context.Background()
	for name, c := range map[string][2]string{
		"ping over http":        {"ping", "http://books.example/ping"},
		"ping without endpoint": {"ping", ""},
		"push":                  {"push", ""},
	} {
		spec := validClient
		spec.GrantTypes = []string{oauth.GrantTypeCIBA}
		spec.BackchannelTokenDeliveryMode, spec.BackchannelClientNotificationEndpoint = c[0], c[1]
		if _, _, err := s.CreateClient(ctx, spec); !errors.Is(err, admin.ErrInvalid) {
			t.Fatalf("%s: CreateClient = %v, want ErrInvalid", name, err)
		}
	}
	if list, err := s.ListClients(ctx); err != nil || len(list) != 0 {
		t.Fatalf("refused creates stored %d client(s) (%v)", len(list), err)
	}
	spec := validClient
	spec.GrantTypes = []string{oauth.GrantTypeAuthorizationCode, oauth.GrantTypeCIBA}
	spec.BackchannelTokenDeliveryMode, spec.BackchannelClientNotificationEndpoint = "ping", "https://books.example/ping"
	c, _ := mustClient(t, s, spec)
	got, err := s.GetClient(ctx, c.ID)
	if err != nil || got.BackchannelTokenDeliveryMode != "ping" || got.BackchannelClientNotificationEndpoint != "https://books.example/ping" ||
		!got.AllowsGrantType(oauth.GrantTypeCIBA) {
		t.Fatalf("stored %+v (%v)", got, err)
	}
	alg := "ES256" // needs private_key_jwt: refused for this secret client
	if _, err := s.UpdateClient(ctx, c.ID, admin.ClientChanges{BackchannelAuthenticationRequestSigningAlg: &alg}); !errors.Is(err, admin.ErrInvalid) {
		t.Fatalf("signing alg without keys: %v", err)
	}
	poll, none := "poll", ""
	upd, err := s.UpdateClient(ctx, c.ID, admin.ClientChanges{BackchannelTokenDeliveryMode: &poll, BackchannelClientNotificationEndpoint: &none})
	if err != nil || upd.BackchannelTokenDeliveryMode != "poll" || upd.BackchannelClientNotificationEndpoint != "" {
		t.Fatalf("update %+v (%v)", upd, err)
	}
}
