package oauth

import (
	"testing"
	"time"
)

// The id_token carries the fixed claims, the nonce, and exactly what ForScopes releases.
func TestIDTokenClaims_FixedNonceAndScopedClaims(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &Service{Issuer: "https://as.example", Lifetimes: Lifetimes{IDToken: time.Hour}}
	claims := Claims{Email: "a@example.com", EmailVerified: true, Phone: "+3312345678", Name: "Ada", GivenName: "Ada", FamilyName: "L",
		Birthdate: "1815-12-10", Gender: "f", Picture: "https://p.example/a", Locale: "en", UpdatedAt: 42, ZoneInfo: "Europe/London"}
	g := Grant{UID: "uid-1", ClientID: "cl-1", AuthTime: now.Add(-time.Minute), Claims: claims}
	_, at := accessTokenHashes("at_x")
	for _, scope := range []string{"openid", "openid email", "openid phone profile", "openid email phone profile"} {
		scopes := ParseScopes(scope)
		for _, nonce := range []string{"", "n-1"} {
			c := s.idTokenClaims(g, scopes, at, nonce, now)
			want := map[string]any{"iss": s.Issuer, "sub": "uid-1", "aud": "cl-1", "azp": "cl-1", "iat": now.Unix(),
				"exp": now.Add(time.Hour).Unix(), "auth_time": now.Add(-time.Minute).Unix(), "at_hash": at}
			if nonce != "" {
				want["nonce"] = nonce
			}
			for k, v := range claims.ForScopes(scopes) {
				want[k] = v
			}
			if len(c) != len(want) {
				t.Fatalf("%q nonce %q: %d claims %v, want %v", scope, nonce, len(c), c, want)
			}
			for k, v := range want {
				if c[k] != v {
					t.Fatalf("%q: claim %s = %v, want %v", scope, k, c[k], v)
				}
			}
		}
	}
}

// The id_token's claim map is made with room for every claim it may get, so it never grows:
// for a grant with every claim, amr and a session, and a nonce, idTokenClaimsMax is exactly the
// number of claims, for every combination of the scopes that release claims.
func TestIDTokenClaims_MadeWithRoomForEveryClaim(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &Service{Issuer: "https://as.example", Lifetimes: Lifetimes{IDToken: time.Hour}}
	claims := Claims{Email: "a@example.com", EmailVerified: true, Phone: "+3312345678", Name: "Ada", GivenName: "Ada", FamilyName: "L",
		Birthdate: "1815-12-10", Gender: "f", Picture: "https://p.example/a", Locale: "en", UpdatedAt: 42, ZoneInfo: "Europe/London"}
	g := Grant{UID: "uid-1", ClientID: "cl-1", AuthTime: now, Claims: claims, AMR: []string{"pwd", "otp"}, SID: "sid_1"}
	for _, scope := range []string{"openid", "openid email", "openid phone", "openid profile", "openid email phone", "openid email profile",
		"openid phone profile", "openid email phone profile"} {
		scopes := ParseScopes(scope)
		if got, room := len(s.idTokenClaims(g, scopes, "h", "n-1", now)), idTokenClaimsMax(scopes); got != room {
			t.Errorf("%q: %d claims in a map made for %d", scope, got, room)
		}
	}
}
