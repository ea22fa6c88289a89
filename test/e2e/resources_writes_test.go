package e2e

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"

	"github.com/acmebank/authserver/shared/admin"
	"github.com/acmebank/authserver/shared/app"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
)

// storesCountingWrites runs run on the embedded store and on DynamoDB Local, with writes: the
// number of store writes made so far. On the embedded store, every write call of the service
// (one-time values, grants, interactions, users) to the store; on DynamoDB, every write request on the
// wire (PutItem, UpdateItem, DeleteItem, TransactWriteItems, BatchWriteItem).
func storesCountingWrites(t *testing.T, run func(t *testing.T, e *env, writes func() int)) {
	t.Run("embedded", func(t *testing.T) {
		e := newEnv(t)
		// The one-time records (UseOnce, each noted with its home) and every other write.
		run(t, e, func() int { return len(e.writes.onetimeHomes()) + e.writes.count() })
	})
	t.Run("dynamodb", func(t *testing.T) {
		e, _, ddb := newAWSEnv(t)
		run(t, e, func() int {
			n := 0
			for op, c := range ddb.Calls() {
				switch op {
				case "PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem":
					n += c
				}
			}
			return n
		})
	})
}

// dpopTokens exchanges a code for scope with a proof of key and returns the DPoP-bound access
// token.
func (e *env) dpopTokens(t *testing.T, key *dpopKey, scope string) string {
	t.Helper()
	code, verifier := e.codeWithPKCE(t, url.Values{"scope": {scope}})
	st, body, _ := e.dpopPost(t, httpapi.PathToken, codeParams(code, verifier), key.proof(t, e, http.MethodPost, e.url(httpapi.PathToken), ""))
	at, _ := body["access_token"].(string)
	if st != http.StatusOK || body["token_type"] != "DPoP" || at == "" {
		t.Fatalf("exchange with DPoP: %d %v", st, body)
	}
	return at
}

// TestResources_RefusedDPoPRequestWritesNothing: at userinfo and at the bank API routes, a
// request refused with a valid proof (a made-up token, a revoked one, a token bound to another
// key, a token not DPoP-bound, a token without the route's scope) writes nothing at all; an
// accepted request writes exactly the proof's jti, and the same proof again is refused. On both
// stores.
func TestResources_RefusedDPoPRequestWritesNothing(t *testing.T) {
	storesCountingWrites(t, func(t *testing.T, e *env, writes func() int) {
		e.mountAPI(t, app.APIOptions{})
		key, other := newDPoPKey(t, jose.ES256), newDPoPKey(t, jose.ES256)
		bound := e.dpopTokens(t, key, "openid email")
		revoked := e.dpopTokens(t, key, "openid email")
		e.apiRevoke(t, httpapi.PathRevoke, revoked)
		noOpenID := e.dpopTokens(t, key, "email")
		bearer, _ := e.apiTokens(t, "openid email")

		resources := []string{httpapi.PathUserinfo, "/v2/bank/accounts", "/invoicing/invoices/INV-1", "/invoices/INV-2"}
		refusals := []struct {
			name  string
			token string
			key   *dpopKey
			want  int
		}{
			{"made-up token", oauth.NewID("at_"), key, http.StatusUnauthorized},
			{"revoked token", revoked, key, http.StatusUnauthorized},
			{"proof of another key", bound, other, http.StatusUnauthorized},
			{"token not DPoP-bound", bearer, key, http.StatusUnauthorized},
			{"token without the route's scope", noOpenID, key, http.StatusForbidden},
		}
		for _, path := range resources {
			u := e.url(path)
			for _, tc := range refusals {
				before := writes()
				st, _ := dpopGet(t, u, "DPoP", tc.token, tc.key.proof(t, e, http.MethodGet, u, tc.token))
				if st != tc.want {
					t.Errorf("%s, %s: answered %d, want %d", path, tc.name, st, tc.want)
				}
				if n := writes() - before; n != 0 {
					t.Errorf("%s, %s: the refused request made %d store writes, want none", path, tc.name, n)
				}
			}
			before := writes()
			proof := key.proof(t, e, http.MethodGet, u, bound)
			if st, _ := dpopGet(t, u, "DPoP", bound, proof); st != http.StatusOK {
				t.Fatalf("%s, valid token and proof: answered %d", path, st)
			}
			if n := writes() - before; n != 1 {
				t.Errorf("%s, valid token and proof: %d store writes, want 1 (the proof's jti)", path, n)
			}
			if st, h := dpopGet(t, u, "DPoP", bound, proof); st != http.StatusUnauthorized || !strings.Contains(h.Get("WWW-Authenticate"), "invalid_dpop_proof") {
				t.Errorf("%s, the same proof again: answered %d %q, want 401 invalid_dpop_proof", path, st, h.Get("WWW-Authenticate"))
			}
		}
	})
}

// TestResources_RacingReplaysAtTheBankAPIOneWins: one proof sent by 50 requests at once to a
// bank API route is accepted once; the others are invalid_dpop_proof. On both stores.
func TestResources_RacingReplaysAtTheBankAPIOneWins(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		e.mountAPI(t, app.APIOptions{})
		key := newDPoPKey(t, jose.ES256)
		at := e.dpopTokens(t, key, "openid email")
		u := e.url("/v2/bank/accounts")
		proof := key.proof(t, e, http.MethodGet, u, at)
		const racers = 50
		statuses := make([]int, racers)
		challenges := make([]string, racers)
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				var h http.Header
				statuses[i], h = dpopGet(t, u, "DPoP", at, proof)
				challenges[i] = h.Get("WWW-Authenticate")
			})
		}
		wg.Wait()
		ok := 0
		for i, st := range statuses {
			switch {
			case st == http.StatusOK:
				ok++
			case st == http.StatusUnauthorized && strings.Contains(challenges[i], "invalid_dpop_proof"):
			default:
				t.Fatalf("a replay answered %d %q", st, challenges[i])
			}
		}
		if ok != 1 {
			t.Fatalf("%d of %d racing uses of one proof were accepted, want exactly 1", ok, racers)
		}
	})
}

// postWithProof sends a form to path with a DPoP proof, the client's credentials in params.
func (e *env) postWithProof(t *testing.T, path string, params url.Values, proof string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.url(path), strings.NewReader(params.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("DPoP", proof)
	st, body, _ := do(t, req)
	return st, body
}

// TestDPoP_RefusedTokenOrPushRequestRecordsNoJTI: at the token and PAR endpoints a request
// refused for its client (a wrong secret) with a valid proof, or for its proof with a valid
// client assertion, records neither jti; the same assertion and a new proof then succeed, and
// record both. On both stores.
func TestDPoP_RefusedTokenOrPushRequestRecordsNoJTI(t *testing.T) {
	storesCountingWrites(t, func(t *testing.T, e *env, writes func() int) {
		key := newDPoPKey(t, jose.ES256)
		keyed := e.registerKeyedClient(t, admin.ClientSpec{})
		for _, path := range []string{httpapi.PathToken, httpapi.PathPAR} {
			u := e.url(path)
			params := url.Values{"grant_type": {"authorization_code"}, "code": {"ac_made-up"}, "redirect_uri": {redirectURI}}
			if path == httpapi.PathPAR {
				params = pushedParams(oauth2.S256ChallengeFromVerifier(randomVerifier()))
			}
			withSecret := url.Values{"client_id": {clientID}, "client_secret": {"wrong-" + clientSecret}}
			for k, v := range params {
				withSecret[k] = v
			}
			before := writes()
			if st, body := e.postWithProof(t, path, withSecret, key.proof(t, e, http.MethodPost, u, "")); st != http.StatusUnauthorized || body["error"] != "invalid_client" {
				t.Errorf("%s, wrong secret and a valid proof: %d %v, want 401 invalid_client", path, st, body)
			}
			if n := writes() - before; n != 0 {
				t.Errorf("%s, wrong secret and a valid proof: %d store writes, want none", path, n)
			}

			withAssertion := keyed.assertionParams(t, e)
			withAssertion.Set("client_id", keyed.id)
			for k, v := range params {
				withAssertion[k] = v
			}
			before = writes()
			if st, body := e.postWithProof(t, path, withAssertion, key.proof(t, e, http.MethodPut, u, "")); st != http.StatusBadRequest || body["error"] != "invalid_dpop_proof" {
				t.Errorf("%s, valid assertion and a proof for another method: %d %v, want 400 invalid_dpop_proof", path, st, body)
			}
			if n := writes() - before; n != 0 {
				t.Errorf("%s, valid assertion and a bad proof: %d store writes, want none", path, n)
			}
			if path == httpapi.PathPAR { // the token request's code is made up: it is refused after the jtis
				before = writes()
				if st, body := e.postWithProof(t, path, withAssertion, key.proof(t, e, http.MethodPost, u, "")); st != http.StatusCreated {
					t.Errorf("%s, the same assertion with a good proof: %d %v, want 201", path, st, body)
				}
				if n := writes() - before; n != 3 {
					t.Errorf("%s, accepted push: %d store writes, want 3 (the two jtis, the pushed request)", path, n)
				}
			}
		}
	})
}
