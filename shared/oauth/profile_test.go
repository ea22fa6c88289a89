package oauth

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

// fapiClient is a FAPI 2.0 client whose registration meets every rule of the profile.
func fapiClient() Client {
	return Client{
		ID: "fapi", RedirectURIs: []string{"https://tpp.example/cb"}, Scopes: []string{"openid", "email"},
		Profile: ProfileFAPI2, RequirePKCE: true, RequirePAR: true, CertThumbprint: "thumb",
		IDTokenSignedResponseAlg: "PS256",
	}
}

func TestCheckProfile_FAPI2RegistrationNamesEveryMissingRule(t *testing.T) {
	ok := fapiClient()
	if err := ok.CheckProfile(); err != nil {
		t.Fatalf("a complete FAPI 2.0 registration was refused: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*Client)
		want   []string
	}{
		{"no PKCE", func(c *Client) { c.RequirePKCE = false }, []string{"PKCE"}},
		{"no certificate, no private_key_jwt", func(c *Client) { c.CertThumbprint = "" }, []string{"private_key_jwt", "sender-constrained"}},
		{"no PAR", func(c *Client) { c.RequirePAR = false }, []string{"pushed authorization requests"}},
		{"rotation without a retry window", func(c *Client) { c.RefreshTokenRotation = RotationOn }, []string{"refresh reuse interval"}},
		{"RS256 id_tokens", func(c *Client) { c.IDTokenSignedResponseAlg = "RS256" }, []string{"PS256 or ES256"}},
		{"default id_token algorithm", func(c *Client) { c.IDTokenSignedResponseAlg = "" }, []string{"PS256 or ES256"}},
		{"everything at once", func(c *Client) { *c = Client{Profile: ProfileFAPI2} }, []string{"PKCE", "pushed authorization requests", "private_key_jwt", "sender-constrained", "PS256 or ES256"}},
		{"unknown profile", func(c *Client) { c.Profile = "fapi1" }, []string{"unknown profile"}},
	} {
		c := fapiClient()
		tc.change(&c)
		err := c.CheckProfile()
		if err == nil {
			t.Fatalf("%s: registration accepted", tc.name)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not name %q", tc.name, err, w)
			}
		}
	}
	rotating := fapiClient()
	rotating.RefreshTokenRotation, rotating.RefreshReuseInterval = RotationOn, 30*time.Second
	if err := rotating.CheckProfile(); err != nil {
		t.Fatalf("a FAPI 2.0 client opting into rotation with a retry window was refused: %v", err)
	}
	if err := (&Client{ID: "plain"}).CheckProfile(); err != nil {
		t.Fatalf("a client with no profile was held to one: %v", err)
	}
}

// TestRotatesRefreshTokens_OffByDefaultForFAPI2OnForOthers: a FAPI 2.0 client's refresh tokens
// do not rotate unless it opts in (FAPI 2.0 5.3.2.1); other clients rotate unless they opt out.
func TestRotatesRefreshTokens_OffByDefaultForFAPI2OnForOthers(t *testing.T) {
	for _, tc := range []struct {
		profile, setting string
		want             bool
	}{
		{ProfileFAPI2, "", false}, {ProfileFAPI2, RotationOn, true}, {ProfileFAPI2, RotationOff, false},
		{"", "", true}, {"", RotationOn, true}, {"", RotationOff, false},
	} {
		c := Client{Profile: tc.profile, RefreshTokenRotation: tc.setting}
		if got := c.RotatesRefreshTokens(); got != tc.want {
			t.Errorf("profile %q, rotation %q: rotates %v, want %v", tc.profile, tc.setting, got, tc.want)
		}
	}
}

// The profile's authorization-request rules hold whatever the registration says: a FAPI
// client's request without PKCE, without response_type or without redirect_uri is refused, the
// same requests of a client without the profile are not.
func TestValidateAuthorize_FAPI2RefusesWhatTheProfileForbids(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	challenge := strings.Repeat("A", 43)
	good := url.Values{"client_id": {"fapi"}, "redirect_uri": {"https://tpp.example/cb"}, "response_type": {"code"},
		"scope": {"openid"}, "state": {"s1"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}
	for _, tc := range []struct {
		name     string
		edit     func(url.Values)
		code     string
		redirect bool
	}{
		{"no code_challenge", func(v url.Values) { v.Del("code_challenge"); v.Del("code_challenge_method") }, ErrCodeInvalidRequest, true},
		{"plain PKCE", func(v url.Values) { v.Set("code_challenge_method", "plain") }, ErrCodeInvalidRequest, true},
		{"no response_type", func(v url.Values) { v.Del("response_type") }, ErrCodeInvalidRequest, true},
		{"response_type token", func(v url.Values) { v.Set("response_type", "token") }, ErrCodeUnsupportedResponseType, true},
		{"no redirect_uri", func(v url.Values) { v.Del("redirect_uri") }, ErrCodeInvalidRequest, false},
	} {
		for _, profile := range []string{ProfileFAPI2, ""} {
			c := fapiClient()
			c.Profile, c.RequirePKCE = profile, profile != ""
			s := &Service{Clients: oneClient{c: c}, Clock: ClockFunc(func() time.Time { return now }), Issuer: "https://as.example",
				Lifetimes: Lifetimes{Request: time.Minute}}
			v := url.Values{}
			for k, vs := range good {
				v[k] = append([]string(nil), vs...)
			}
			tc.edit(v)
			p, repeated := ParseAuthorizeParams(v)
			// Pushed, as the profile requires (a plain request is refused before these checks:
			// TestValidateAuthorize_FAPI2RequiresPAR).
			_, _, err := s.validateAuthorize(context.Background(), p, repeated, pushedByClient)
			var ae *AuthorizeError
			refusedByProfile := profile != "" || tc.name == "plain PKCE" || tc.name == "response_type token"
			if !refusedByProfile {
				if err != nil {
					t.Errorf("%s without the profile: refused: %v", tc.name, err)
				}
				continue
			}
			if !errors.As(err, &ae) {
				t.Fatalf("%s (profile %q): err = %v, want an *AuthorizeError", tc.name, profile, err)
			}
			if ae.Err.Code != tc.code || (ae.Redirect != nil) != tc.redirect {
				t.Errorf("%s (profile %q): %s, redirect %v; want %s, redirect %v", tc.name, profile, ae.Err.Code, ae.Redirect != nil, tc.code, tc.redirect)
			}
			if ae.Redirect != nil && ae.Redirect.URI != "https://tpp.example/cb" {
				t.Errorf("%s: error sent to %q, not the registered redirect URI", tc.name, ae.Redirect.URI)
			}
		}
	}
}

// TestValidateAuthorize_FAPI2RequiresPAR: a fapi2 client's plain authorization request is
// refused with invalid_request at its redirect URI (FAPI 2.0 5.3.2.2), whatever its
// registration says of PAR; the same request pushed is accepted.
func TestValidateAuthorize_FAPI2RequiresPAR(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := fapiClient()
	c.RequirePAR = false
	s := &Service{Clients: oneClient{c: c}, Clock: ClockFunc(func() time.Time { return now }), Issuer: "https://as.example",
		Lifetimes: Lifetimes{Request: time.Minute}}
	p, _ := ParseAuthorizeParams(url.Values{"client_id": {c.ID}, "redirect_uri": {"https://tpp.example/cb"}, "response_type": {"code"},
		"scope": {"openid"}, "code_challenge": {strings.Repeat("A", 43)}, "code_challenge_method": {"S256"}})
	_, _, err := s.ValidateAuthorize(context.Background(), p, nil)
	var ae *AuthorizeError
	if !errors.As(err, &ae) || ae.Err.Code != ErrCodeInvalidRequest || ae.Redirect == nil {
		t.Fatalf("plain request of a fapi2 client: %v, want invalid_request at the redirect URI", err)
	}
	if _, _, err := s.validateAuthorize(context.Background(), p, nil, pushedByClient); err != nil {
		t.Fatalf("the same request pushed: %v", err)
	}
}

func TestCodeLifetime_FAPI2CappedAtSixtySeconds(t *testing.T) {
	fapi, plain := fapiClient(), Client{ID: "plain"}
	for _, tc := range []struct {
		c            *Client
		server, want time.Duration
	}{
		{&fapi, 2 * time.Minute, time.Minute},
		{&fapi, 30 * time.Second, 30 * time.Second},
		{&plain, 2 * time.Minute, 2 * time.Minute},
	} {
		if got := tc.c.CodeLifetime(tc.server); got != tc.want {
			t.Errorf("client %s, server %v: code lifetime %v, want %v", tc.c.ID, tc.server, got, tc.want)
		}
	}
}

// A FAPI client presenting a secret is refused even when a secret is on its record (one set
// before the client moved to the profile): the profile allows no shared-secret authentication.
func TestAuthenticateClient_FAPI2RefusesASecret(t *testing.T) {
	c := fapiClient()
	c.CertThumbprint = ""
	c.SecretHashes = []SecretHash{{Hash: HashSecret("an-old-secret-of-enough-length-000")}}
	s := &Service{Clients: oneClient{c: c}, Clock: ClockFunc(time.Now)}
	_, err := s.AuthenticateClient(context.Background(), ClientCredentials{ID: "fapi", Secret: "an-old-secret-of-enough-length-000"})
	var e *Error
	if !errors.As(err, &e) || e.Code != ErrCodeInvalidClient || !strings.Contains(e.Description, "private_key_jwt") {
		t.Fatalf("a FAPI client's secret: err = %v, want invalid_client naming private_key_jwt", err)
	}
	c.Profile = ""
	s.Clients = oneClient{c: c}
	if _, err := s.AuthenticateClient(context.Background(), ClientCredentials{ID: "fapi", Secret: "an-old-secret-of-enough-length-000"}); err != nil {
		t.Fatalf("the same secret without the profile: %v", err)
	}
}
