package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/acmebank/authserver/shared/admin"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
)

// The ciba grant (CIBA Core 10.1, 11) at the token endpoint over HTTP, on both stores: the
// requests are stored and decided through the store port as the backchannel authentication
// endpoint and the device's decision store them (package ciba), and polled as a client polls.

const cibaTestInterval = 5

// cibaClient registers a secret client for the ciba grant with openid, as authctl does.
func (e *env) cibaClient(t *testing.T) (id, secret string) {
	t.Helper()
	c, secret, err := admin.New(e.app.Store, cheapHasher, e.clock, e.app.Audit).CreateClient(context.Background(), admin.ClientSpec{
		Name: "Decoupled", Scopes: []string{"openid", "email"}, GrantTypes: []string{oauth.GrantTypeCIBA},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c.ID, secret
}

// cibaRequest stores a pending request of client for alice and returns its auth_req_id.
func (e *env) cibaRequest(t *testing.T, client string) string {
	t.Helper()
	id := oauth.NewSecret(oauth.PrefixAuthReqID)
	now := e.clock.Now()
	err := e.app.Store.PutBackchannelRequest(context.Background(), oauth.BackchannelRequest{
		ID: oauth.BackchannelRequestID(id), ClientID: client, UID: e.uidOf(t, username), Scopes: oauth.Scopes{"openid", "email"},
		Mode: oauth.CIBAModePoll, Interval: cibaTestInterval, CreatedAt: now, ExpiresAt: now.Add(2 * time.Minute),
		KeepUntil: now.Add(12 * time.Minute), State: oauth.CIBAPending,
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// cibaDecide records alice's decision on the request, an approval with a passkey.
func (e *env) cibaDecide(t *testing.T, authReqID string, approve bool) {
	t.Helper()
	ctx := context.Background()
	now := e.clock.Now()
	r, err := e.app.Store.GetBackchannelRequest(ctx, oauth.BackchannelRequestID(authReqID), now)
	if err != nil {
		t.Fatal(err)
	}
	d := oauth.BackchannelDecision{Approve: approve}
	if approve {
		d.Grant = &oauth.Grant{ID: oauth.NewID(oauth.PrefixGrant), ClientID: r.ClientID, UID: r.UID, Scopes: r.Scopes,
			AuthTime: now, AMR: []string{"hwk", "user"}, Claims: oauth.Claims{Email: "alice@example.com", EmailVerified: true},
			CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour)}
	}
	if _, err := e.app.Store.DecideBackchannelRequest(ctx, r.ID, r.UID, d, now); err != nil {
		t.Fatal(err)
	}
}

// cibaPoll is one poll of the token endpoint by a secret client.
func (e *env) cibaPoll(t *testing.T, id, secret, authReqID string) (int, map[string]any) {
	t.Helper()
	st, body, _ := e.post(t, httpapi.PathToken, url.Values{"grant_type": {oauth.GrantTypeCIBA}, "auth_req_id": {authReqID},
		"client_id": {id}, "client_secret": {secret}}, false, false)
	return st, body
}

// TestCIBA_PollAnswersThenTokensWithAVerifiedIDToken: over HTTP, on both stores: a pending
// request's polls are authorization_pending, or slow_down sooner than the interval; once
// approved the poll gets tokens whose id_token go-oidc verifies for the client and alice, the
// token works, and a second poll is invalid_grant and leaves it valid. A denied request is
// access_denied, an expired undecided one expired_token, another client's invalid_grant; all 400.
func TestCIBA_PollAnswersThenTokensWithAVerifiedIDToken(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		id, secret := e.cibaClient(t)
		otherID, otherSecret := e.cibaClient(t)
		want := func(what string, st int, body map[string]any, code string) {
			t.Helper()
			if st != 400 || body["error"] != code {
				t.Fatalf("%s: %d %v, want 400 %s", what, st, body, code)
			}
		}
		areq := e.cibaRequest(t, id)
		st, body := e.cibaPoll(t, id, secret, areq)
		want("first poll", st, body, oauth.ErrCodeAuthorizationPending)
		st, body = e.cibaPoll(t, id, secret, areq)
		want("poll at once", st, body, oauth.ErrCodeSlowDown)
		st, body = e.cibaPoll(t, otherID, otherSecret, areq)
		want("another client's poll", st, body, oauth.ErrCodeInvalidGrant)

		e.cibaDecide(t, areq, true)
		e.clock.Advance(cibaTestInterval * time.Second)
		st, tok := e.cibaPoll(t, id, secret, areq)
		if st != 200 {
			t.Fatalf("poll after the approval: %d %v", st, tok)
		}
		p, err := oidc.NewProvider(context.Background(), e.app.Config.Issuer)
		if err != nil {
			t.Fatal(err)
		}
		idt, err := p.Verifier(&oidc.Config{ClientID: id}).Verify(context.Background(), tok["id_token"].(string))
		if err != nil {
			t.Fatalf("id_token: %v", err)
		}
		if idt.Subject != e.uidOf(t, username) {
			t.Fatalf("id_token sub %q", idt.Subject)
		}
		at := tok["access_token"].(string)
		if !e.tokenValid(at) || tok["scope"] != "openid email" || tok["token_type"] != "Bearer" {
			t.Fatalf("token response %v (valid %v)", tok, e.tokenValid(at))
		}
		st, body = e.cibaPoll(t, id, secret, areq)
		want("poll after the tokens", st, body, oauth.ErrCodeInvalidGrant)
		if !e.tokenValid(at) {
			t.Fatal("a second poll of the auth_req_id revoked its tokens")
		}

		denied := e.cibaRequest(t, id)
		e.cibaDecide(t, denied, false)
		st, body = e.cibaPoll(t, id, secret, denied)
		want("denied", st, body, oauth.ErrCodeAccessDenied)

		expired := e.cibaRequest(t, id)
		e.clock.Advance(2 * time.Minute)
		st, body = e.cibaPoll(t, id, secret, expired)
		want("expired", st, body, oauth.ErrCodeExpiredToken)
	})
}

// TestCIBA_FiftyRacingPollsOverHTTP: on both stores, 50 polls of one pending request at one
// instant are one authorization_pending and 49 slow_down; then 50 polls of it approved give
// tokens to exactly one, invalid_grant to every other, and the winner's token stays valid.
func TestCIBA_FiftyRacingPollsOverHTTP(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		id, secret := e.cibaClient(t)
		areq := e.cibaRequest(t, id)
		race := func() (map[string]int, []string) {
			var wg sync.WaitGroup
			var mu sync.Mutex
			answers := map[string]int{}
			var tokens []string
			for range 50 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					st, body := e.cibaPoll(t, id, secret, areq)
					mu.Lock()
					defer mu.Unlock()
					if st == 200 {
						tokens = append(tokens, body["access_token"].(string))
						answers["tokens"]++
						return
					}
					answers[fmt.Sprintf("%d %v", st, body["error"])]++
				}()
			}
			wg.Wait()
			return answers, tokens
		}
		answers, _ := race()
		if answers["400 authorization_pending"] != 1 || answers["400 slow_down"] != 49 {
			t.Fatalf("50 racing polls of a pending request: %v, want 1 authorization_pending and 49 slow_down", answers)
		}
		e.cibaDecide(t, areq, true)
		e.clock.Advance(cibaTestInterval * time.Second)
		answers, tokens := race()
		if len(tokens) != 1 || answers["400 invalid_grant"] != 49 {
			t.Fatalf("50 racing polls of an approved request: %v, want one with tokens and invalid_grant for the others", answers)
		}
		if !e.tokenValid(tokens[0]) {
			t.Fatal("the winner's token is not valid after 49 racing duplicates")
		}
	})
}

// TestRoundTrips_CIBAPollsAndTheWinningPoll counts the AWS requests of the ciba grant on
// DynamoDB Local and local-kms, the client cached: a poll that is not the winning one
// (authorization_pending, slow_down, access_denied) is one DynamoDB request and no KMS call;
// the winning poll is the poll, the consuming write and the issuance's transaction, three
// sequential round trips, beside one Sign of the id_token.
func TestRoundTrips_CIBAPollsAndTheWinningPoll(t *testing.T) {
	e, kmsCalls, ddbCalls := newAWSEnvWith(t, map[string]string{"AUTH_CLIENT_CACHE_TTL": "5m"})
	ddbCalls.SetLatency(10 * time.Millisecond)
	id, secret := e.cibaClient(t)
	// Warm, as a running function is: the client and the current signing key cached.
	warm := e.cibaRequest(t, id)
	e.cibaDecide(t, warm, true)
	if st, body := e.cibaPoll(t, id, secret, warm); st != 200 {
		t.Fatalf("warm-up poll: %d %v", st, body)
	}
	measure := func(name string, wantDDB, wantKMS map[string]int, wantStatus int, wantError string, authReqID string) {
		t.Helper()
		ddbCalls.Reset()
		kmsCalls.Reset()
		st, body := e.cibaPoll(t, id, secret, authReqID)
		if st != wantStatus || (wantError != "" && body["error"] != wantError) {
			t.Fatalf("%s: %d %v, want %d %s", name, st, body, wantStatus, wantError)
		}
		if got := ddbCalls.Calls(); !maps.Equal(got, wantDDB) {
			t.Errorf("%s: DynamoDB requests %v, want %v", name, got, wantDDB)
		}
		if got := kmsCalls.Counts(); !maps.Equal(got, wantKMS) {
			t.Errorf("%s: KMS requests %v, want %v", name, got, wantKMS)
		}
		t.Logf("%s: DynamoDB %v in %d sequential round trips, KMS %v", name, ddbCalls.Calls(), ddbCalls.RoundTrips(), kmsCalls.Counts())
	}
	none := map[string]int{}
	one := map[string]int{"UpdateItem": 1}
	areq := e.cibaRequest(t, id)
	measure("pending poll", one, none, 400, oauth.ErrCodeAuthorizationPending, areq)
	measure("poll too soon", one, none, 400, oauth.ErrCodeSlowDown, areq)
	denied := e.cibaRequest(t, id)
	e.cibaDecide(t, denied, false)
	measure("denied poll", one, none, 400, oauth.ErrCodeAccessDenied, denied)
	e.cibaDecide(t, areq, true)
	e.clock.Advance(cibaTestInterval * time.Second)
	measure("winning poll", map[string]int{"UpdateItem": 2, "TransactWriteItems": 1}, map[string]int{"Sign": 1}, 200, "", areq)
	if n := ddbCalls.RoundTrips(); n != 3 {
		t.Errorf("winning poll: %d sequential DynamoDB round trips (%+v), want 3", n, ddbCalls.Spans())
	}
}
