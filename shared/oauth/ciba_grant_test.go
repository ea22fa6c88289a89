package oauth_test

import (
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/oauth"
)

// TestValidBackchannelSettings_PingNeedsAnHTTPSEndpointAndSigningNeedsKeys: the CIBA
// registration rules (CIBA Core 4): poll or ping only; a ping client's notification endpoint
// absolute https without user information or fragment, and none for a poll client; a signing
// alg of PS256 or ES256 for a private_key_jwt client only.
func TestValidBackchannelSettings_PingNeedsAnHTTPSEndpointAndSigningNeedsKeys(t *testing.T) {
	keyed := oauth.AuthMethodPrivateKeyJWT
	for _, tc := range []struct {
		name                   string
		mode, endpoint, alg, m string
		want                   string // "" accepted, else a part of the error
	}{
		{"nothing: poll", "", "", "", "", ""},
		{"poll", "poll", "", "", "", ""},
		{"ping with https", "ping", "https://tpp.example/cb", "", "", ""},
		{"push", "push", "", "", "", "poll or ping"},
		{"ping without endpoint", "ping", "", "", "", "needs a backchannel_client_notification_endpoint"},
		{"ping over http", "ping", "http://tpp.example/cb", "", "", "https"},
		{"ping with user info", "ping", "https://u:p@tpp.example/cb", "", "", "https"},
		{"ping with a fragment", "ping", "https://tpp.example/cb#x", "", "", "https"},
		{"endpoint for a poll client", "poll", "https://tpp.example/cb", "", "", "only for the ping"},
		{"ES256 with keys", "", "", "ES256", keyed, ""},
		{"RS256", "", "", "RS256", keyed, "PS256 or ES256"},
		{"none", "", "", "none", keyed, "PS256 or ES256"},
		{"ES256 without keys", "", "", "ES256", oauth.AuthMethodSecretBasic, "private_key_jwt"},
	} {
		c := oauth.Client{BackchannelTokenDeliveryMode: tc.mode, BackchannelClientNotificationEndpoint: tc.endpoint,
			BackchannelAuthenticationRequestSigningAlg: tc.alg, TokenEndpointAuthMethod: tc.m}
		err := c.ValidBackchannelSettings()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
