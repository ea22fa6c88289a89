package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"

	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
)

// failingIssue is the real grant store with one fault: while armed, its next IssueTokens fails
// as a write that cannot commit does (a full disk for bbolt, DynamoDB unavailable), before
// reaching the store, so nothing of it is written.
type failingIssue struct {
	oauth.GrantStore
	armed atomic.Bool
}

func (f *failingIssue) IssueTokens(ctx context.Context, in oauth.Issue, now time.Time) error {
	if f.armed.CompareAndSwap(true, false) {
		return fmt.Errorf("issue tokens: %w: %w", oauth.ErrTransient, syscall.ENOSPC)
	}
	return f.GrantStore.IssueTokens(ctx, in, now)
}

// failingSigner is the real id_token signer (the local key, or KMS) whose next signature fails,
// while armed, as an unavailable key service does.
type failingSigner struct {
	oauth.IDTokenSigner
	armed atomic.Bool
}

func (f *failingSigner) SignJWT(ctx context.Context, alg string, claims jwt.MapClaims) (string, error) {
	if f.armed.CompareAndSwap(true, false) {
		return "", fmt.Errorf("sign: %w: key service unavailable", oauth.ErrTransient)
	}
	return f.IDTokenSigner.SignJWT(ctx, alg, claims)
}

// accessLive reports whether an access token is still stored and usable (DPoP-bound ones
// included: this asks the store, not a resource).
func (e *env) accessLive(t *testing.T, at string) bool {
	t.Helper()
	_, err := e.app.Store.GetToken(context.Background(), oauth.HashToken(at), e.clock.Now())
	return err == nil
}

// TestRefresh_FailureAtAnyStepLosesNothing: a refresh that fails at any step (its one write,
// the id_token's signature, the scope check) answers an error and changes nothing: the grant's
// access token keeps working, and the retry of the same refresh token gets a new pair (a 503
// is temporarily_unavailable with Retry-After, and the retry after it works). Reuse detection
// is intact afterwards: the spent token once more revokes the grant. On both stores.
func TestRefresh_FailureAtAnyStepLosesNothing(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		store := &failingIssue{GrantStore: e.app.Service.Grants}
		signer := &failingSigner{IDTokenSigner: e.app.Service.Signer}
		e.app.Service.Grants, e.app.Service.Signer = store, signer
		for _, step := range []struct {
			name   string
			arm    func()
			extra  url.Values
			status int
			code   string
		}{
			{"the write fails (full disk, store unavailable)", func() { store.armed.Store(true) }, nil, http.StatusServiceUnavailable, oauth.ErrCodeTemporarilyUnavailable},
			{"the id_token signature fails (key service unavailable)", func() { signer.armed.Store(true) }, nil, http.StatusServiceUnavailable, oauth.ErrCodeTemporarilyUnavailable},
			{"the scope exceeds the grant", func() {}, url.Values{"scope": {"openid email bank:transfers:write"}}, http.StatusBadRequest, "invalid_scope"},
		} {
			t.Run(step.name, func(t *testing.T) {
				tok := e.tokens(t, "openid email")
				at, rt := tok["access_token"].(string), tok["refresh_token"].(string)
				e.clock.Advance(time.Second)
				step.arm()
				p := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}}
				for k, v := range step.extra {
					p[k] = v
				}
				st, body, h := e.post(t, httpapi.PathToken, p, false, false)
				if st != step.status || body["error"] != step.code {
					t.Fatalf("failed refresh: %d %v, want %d %s", st, body, step.status, step.code)
				}
				if st == http.StatusServiceUnavailable && h.Get("Retry-After") == "" {
					t.Errorf("a 503 without Retry-After")
				}
				if store.armed.Load() || signer.armed.Load() {
					t.Fatal("the fault was never reached: the test proves nothing")
				}
				if !e.accessLive(t, at) {
					t.Fatal("the failed refresh ended the grant's access token")
				}
				st, fresh := e.refresh(t, rt, nil)
				if st != http.StatusOK || fresh["access_token"] == nil || fresh["id_token"] == nil {
					t.Fatalf("the retry after the failure: %d %v, want 200 with tokens", st, fresh)
				}
				if !e.accessLive(t, fresh["access_token"].(string)) {
					t.Fatal("the retry's access token does not work")
				}
				e.refreshRefused(t, rt, "the spent refresh token once more")
				if e.accessLive(t, fresh["access_token"].(string)) {
					t.Fatal("reuse of the spent refresh token did not revoke the grant")
				}
			})
		}
	})
}

// TestRefresh_RacingRefreshesOfOneTokenOneWins: 50 refreshes of one refresh token at once, on
// both stores: exactly one gets tokens, every other one invalid_grant (never a 5xx, never a
// second pair), whatever the interleaving.
func TestRefresh_RacingRefreshesOfOneTokenOneWins(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		rt := e.tokens(t, "openid")["refresh_token"].(string)
		const n = 50
		var wg sync.WaitGroup
		statuses, errs := make([]int, n), make([]any, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, body := e.refresh(t, rt, nil)
				statuses[i], errs[i] = st, body["error"]
			}()
		}
		wg.Wait()
		ok := 0
		for i, st := range statuses {
			switch {
			case st == http.StatusOK:
				ok++
			case st != http.StatusBadRequest || errs[i] != "invalid_grant":
				t.Errorf("racer %d: %d %v, want 200 or 400 invalid_grant", i, st, errs[i])
			}
		}
		if ok != 1 {
			t.Fatalf("%d of %d racing refreshes succeeded, want exactly 1", ok, n)
		}
	})
}

// TestDPoP_StolenRefreshTokenWithAnotherKeyChangesNothing: a DPoP-bound refresh token presented
// with another key's proof, or none, is refused with invalid_grant and writes nothing, whether
// the token is unspent or already spent: the holder's next refresh with its key works, and its
// grant is not revoked. Reuse detection still applies to a request made with the key. On both
// stores.
func TestDPoP_StolenRefreshTokenWithAnotherKeyChangesNothing(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		key, thief := newDPoPKey(t, jose.ES256), newDPoPKey(t, jose.ES256)
		tokenURL := e.url(httpapi.PathToken)
		refresh := func(rt string, k *dpopKey) (int, map[string]any) {
			proof := ""
			if k != nil {
				proof = k.proof(t, e, http.MethodPost, tokenURL, "")
			}
			st, body, _ := e.dpopPost(t, httpapi.PathToken, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}}, proof)
			return st, body
		}
		refused := func(rt, what string) {
			t.Helper()
			before := e.writes.count()
			for name, k := range map[string]*dpopKey{"another key": thief, "no proof": nil} {
				if st, body := refresh(rt, k); st != http.StatusBadRequest || body["error"] != "invalid_grant" {
					t.Fatalf("%s with %s: %d %v, want 400 invalid_grant", what, name, st, body)
				}
			}
			if w := e.writes.list()[before:]; len(w) != 0 {
				t.Fatalf("%s: the refused refreshes wrote %v", what, w)
			}
		}
		code, verifier := e.codeWithPKCE(t, nil)
		st, tok, _ := e.dpopPost(t, httpapi.PathToken, codeParams(code, verifier), key.proof(t, e, http.MethodPost, tokenURL, ""))
		if st != http.StatusOK || tok["token_type"] != "DPoP" {
			t.Fatalf("exchange with a proof: %d %v", st, tok)
		}
		rt := tok["refresh_token"].(string)

		refused(rt, "the unspent refresh token")
		st, next := refresh(rt, key)
		if st != http.StatusOK {
			t.Fatalf("the holder's refresh after the thief's attempts: %d %v, want 200", st, next)
		}

		refused(rt, "the spent refresh token")
		if !e.accessLive(t, next["access_token"].(string)) {
			t.Fatal("the thief's attempt with the spent token revoked the holder's grant")
		}
		st, last := refresh(next["refresh_token"].(string), key)
		if st != http.StatusOK {
			t.Fatalf("the holder's next refresh: %d %v, want 200", st, last)
		}

		// With the key, the spent token once more is reuse: the grant is revoked.
		if st, body := refresh(rt, key); st != http.StatusBadRequest || body["error"] != "invalid_grant" {
			t.Fatalf("the spent token with its key: %d %v, want invalid_grant", st, body)
		}
		if e.accessLive(t, last["access_token"].(string)) {
			t.Fatal("reuse with the key did not revoke the grant")
		}
	})
}
