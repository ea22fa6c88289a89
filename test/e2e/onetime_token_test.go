package e2e

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/acmebank/authserver/shared/httpapi"
)

// TestToken_AReplayedJTISpendsNoCodeAndNoRefreshToken: a token request's proof jti is recorded
// in the write that consumes its code or spends its refresh token. A proof replayed with a
// fresh code, or with an unspent refresh token, is 400 invalid_dpop_proof and leaves the code
// and the token usable; a refresh request replayed whole (its proof and its now spent token)
// is refused for its proof and revokes nothing, as when the jti was recorded first. On both
// stores.
func TestToken_AReplayedJTISpendsNoCodeAndNoRefreshToken(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		key := newDPoPKey(t, jose.ES256)
		tokenURL := e.url(httpapi.PathToken)
		post := func(params url.Values, proof string) (int, map[string]any) {
			st, body, _ := e.dpopPost(t, httpapi.PathToken, params, proof)
			return st, body
		}
		wantReplayed := func(what string, st int, body map[string]any) {
			t.Helper()
			if st != http.StatusBadRequest || body["error"] != "invalid_dpop_proof" {
				t.Fatalf("%s: %d %v, want 400 invalid_dpop_proof", what, st, body)
			}
		}

		first, firstVerifier := e.codeWithPKCE(t, url.Values{"scope": {"openid email"}})
		used := key.proof(t, e, http.MethodPost, tokenURL, "")
		st, tok := post(codeParams(first, firstVerifier), used)
		if st != http.StatusOK {
			t.Fatalf("first exchange: %d %v", st, tok)
		}

		code, verifier := e.codeWithPKCE(t, url.Values{"scope": {"openid email"}})
		st, body := post(codeParams(code, verifier), used)
		wantReplayed("a fresh code with a replayed proof", st, body)
		if st, body := post(codeParams(code, verifier), key.proof(t, e, http.MethodPost, tokenURL, "")); st != http.StatusOK {
			t.Fatalf("the same code with a fresh proof: %d %v, want 200 (the code unconsumed)", st, body)
		}

		refresh := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)}}
		st, body = post(refresh, used)
		wantReplayed("a refresh with a replayed proof", st, body)
		spend := key.proof(t, e, http.MethodPost, tokenURL, "")
		st, next := post(refresh, spend)
		if st != http.StatusOK {
			t.Fatalf("the same refresh with a fresh proof: %d %v, want 200 (the token unspent)", st, next)
		}
		st, body = post(refresh, spend)
		wantReplayed("the refresh replayed whole", st, body)
		again := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {next["refresh_token"].(string)}}
		if st, body := post(again, key.proof(t, e, http.MethodPost, tokenURL, "")); st != http.StatusOK {
			t.Fatalf("refresh of the new token: %d %v, want 200 (the replay revoked nothing)", st, body)
		}
	})
}
