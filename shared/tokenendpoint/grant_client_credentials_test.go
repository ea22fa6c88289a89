package tokenendpoint

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/acmebank/authserver/shared/oauth"
)

func ccParams(scope string) url.Values {
	v := url.Values{"grant_type": {"client_credentials"}}
	if scope != "" {
		v.Set("scope", scope)
	}
	return v
}

func registeredForCC(c *oauth.Client) { c.GrantTypes = []string{oauth.GrantTypeClientCredentials} }

// TestClientCredentials_IssuesAClientOnlyAccessTokenOnly: the grant issues an access token
// with the scope asked for, no refresh token, no id_token and no user metadata, and stores one
// grant without a user (ClientOnly) whose end is the token's.
func TestClientCredentials_IssuesAClientOnlyAccessTokenOnly(t *testing.T) {
	f := newFixture(t)
	cred := f.client(t, "m2m", registeredForCC)
	resp, err := f.token(cred, ccParams("bank:transfers:write"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.AccessToken == "" || resp.RefreshToken != "" || resp.IDToken != "" || resp.Metadata != (oauth.TokenMetadata{}) ||
		resp.Scope != "bank:transfers:write" || resp.TokenType != "Bearer" || resp.ExpiresIn != 600 {
		t.Fatalf("response %+v", resp)
	}
	list := f.grants(t, "m2m")
	if len(list) != 1 || !list[0].Grant.ClientOnly || list[0].Grant.UID != "" || !list[0].Grant.ExpiresAt.Equal(f.now.Add(time.Duration(resp.ExpiresIn)*time.Second)) {
		t.Fatalf("grants %+v", list)
	}
}

// TestClientCredentials_ScopeRules: the scopes are a subset of the client's, none that needs a
// user; without a scope parameter the client gets its registered scopes that need no user.
func TestClientCredentials_ScopeRules(t *testing.T) {
	f := newFixture(t)
	cred := f.client(t, "m2m", registeredForCC)
	userOnly := f.client(t, "user-only", func(c *oauth.Client) { registeredForCC(c); c.Scopes = []string{"openid", "email"} })
	tests := []struct {
		name  string
		cred  oauth.ClientCredentials
		scope string
		want  string // the granted scope, or the error code
	}{
		{"no scope: the default", cred, "", "bank:transfers:write"},
		{"a registered scope", cred, "bank:transfers:write", "bank:transfers:write"},
		{"the dotted spelling", cred, "bank:transfers.write", "bank:transfers.write"},
		{"openid needs a user", cred, "openid", oauth.ErrCodeInvalidScope},
		{"offline_access needs a user", cred, "offline_access bank:transfers:write", oauth.ErrCodeInvalidScope},
		{"grant management needs a user", cred, oauth.ScopeGrantQuery, oauth.ErrCodeInvalidScope},
		{"not the client's", userOnly, "bank:transfers:write", oauth.ErrCodeInvalidScope},
		{"unknown", cred, "accounts:read", oauth.ErrCodeInvalidScope},
		{"no scope and no default", userOnly, "", oauth.ErrCodeInvalidScope},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := f.token(tc.cred, ccParams(tc.scope))
			if tc.want == oauth.ErrCodeInvalidScope {
				wantCode(t, err, tc.want)
				return
			}
			if err != nil || resp.Scope != tc.want {
				t.Fatalf("got %v %v, want scope %s", resp, err, tc.want)
			}
		})
	}
	if n := len(f.grants(t, "user-only")); n != 0 {
		t.Errorf("refused requests stored %d grants", n)
	}
}

// TestClientCredentials_OnlyForClientsRegisteredForIt: a client with the default grant types,
// or its own list without client_credentials, gets unauthorized_client and nothing is stored.
func TestClientCredentials_OnlyForClientsRegisteredForIt(t *testing.T) {
	f := newFixture(t)
	for id, edit := range map[string]func(*oauth.Client){
		"default":   nil,
		"code-only": func(c *oauth.Client) { c.GrantTypes = []string{oauth.GrantTypeAuthorizationCode} },
	} {
		t.Run(id, func(t *testing.T) {
			_, err := f.token(f.client(t, id, edit), ccParams("bank:transfers:write"))
			wantCode(t, err, oauth.ErrCodeUnauthorizedClient)
			if n := len(f.grants(t, id)); n != 0 {
				t.Errorf("stored %d grants", n)
			}
		})
	}
}

// TestClientCredentials_FAPI2ClientsTokensAreSenderConstrained: over mutual TLS a fapi2
// client's token is bound to its certificate; a fapi2 client's request with neither a DPoP
// proof nor a certificate is refused (FAPI 2.0 5.3.2.1), as is a DPoP-bound client's request
// without a proof; neither stores anything.
func TestClientCredentials_FAPI2ClientsTokensAreSenderConstrained(t *testing.T) {
	f := newFixture(t)
	const thumb = "n4bQgYhMfWWaL-qgxVrQFaO_TxsrC4Is0V1sFbDwCgg"
	f.client(t, "fapi", func(c *oauth.Client) {
		registeredForCC(c)
		c.SecretHashes, c.CertThumbprint, c.TokenEndpointAuthMethod = nil, thumb, oauth.AuthMethodSelfSigned
		c.Profile, c.RequirePKCE, c.RequirePAR, c.IDTokenSignedResponseAlg = oauth.ProfileFAPI2, true, true, "PS256"
	})
	if err := func() error { c, _ := f.store.GetClient(t.Context(), "fapi"); return c.CheckProfile() }(); err != nil {
		t.Fatalf("the fixture is not a valid fapi2 client: %v", err)
	}
	resp, err := f.token(oauth.ClientCredentials{ID: "fapi", CertThumbprint: thumb}, ccParams("bank:transfers:write"))
	if err != nil {
		t.Fatal(err)
	}
	list := f.grants(t, "fapi")
	if len(list) != 1 || list[0].Grant.CertThumbprint != thumb || resp.TokenType != "Bearer" {
		t.Fatalf("the token is not bound to the certificate: %+v", list)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Use: "sig", Algorithm: "ES256"}}})
	f.client(t, "fapi-keyed", func(c *oauth.Client) {
		registeredForCC(c)
		// Not DPoP-bound (registration would refuse that for fapi2): the FAPI rule alone refuses.
		c.SecretHashes, c.TokenEndpointAuthMethod, c.JWKS = nil, oauth.AuthMethodPrivateKeyJWT, jwks
		c.Profile, c.RequirePKCE, c.RequirePAR, c.IDTokenSignedResponseAlg = oauth.ProfileFAPI2, true, true, "PS256"
	})
	signer, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: "k1"}}, nil)
	claims, _ := json.Marshal(map[string]any{"iss": "fapi-keyed", "sub": "fapi-keyed", "aud": "https://auth.example.test",
		"jti": oauth.NewID("j_"), "iat": f.now.Unix(), "exp": f.now.Add(time.Minute).Unix()})
	jws, _ := signer.Sign(claims)
	assertion, _ := jws.CompactSerialize()
	_, err = f.token(oauth.ClientCredentials{ID: "fapi-keyed", Assertion: assertion, AssertionType: oauth.AssertionTypeJWTBearer},
		ccParams("bank:transfers:write"))
	wantCode(t, err, oauth.ErrCodeInvalidRequest)
	if !strings.Contains(err.Error(), "sender-constrained") {
		t.Errorf("refused for %v, want the FAPI 2.0 sender constraint", err)
	}
	if n := len(f.grants(t, "fapi-keyed")); n != 0 {
		t.Errorf("fapi-keyed: stored %d grants", n)
	}
	for id, edit := range map[string]func(*oauth.Client){
		"dpop-bound": func(c *oauth.Client) { registeredForCC(c); c.DPoPBoundAccessTokens = true },
	} {
		_, err = f.token(f.client(t, id, edit), ccParams("bank:transfers:write"))
		wantCode(t, err, oauth.ErrCodeInvalidRequest)
		if n := len(f.grants(t, id)); n != 0 {
			t.Errorf("%s: stored %d grants", id, n)
		}
	}
}

// TestClientCredentials_AuthorizationDetailsRefused: authorization_details are approved by a
// user, so this grant refuses them, storing nothing.
func TestClientCredentials_AuthorizationDetailsRefused(t *testing.T) {
	f := newFixture(t)
	cred := f.client(t, "m2m", registeredForCC)
	p := ccParams("bank:transfers:write")
	p.Set("authorization_details", `[{"type":"account_information"}]`)
	_, err := f.token(cred, p)
	wantCode(t, err, oauth.ErrCodeInvalidAuthorizationDetails)
	if n := len(f.grants(t, "m2m")); n != 0 {
		t.Errorf("stored %d grants", n)
	}
}
