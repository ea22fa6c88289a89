package appbackend_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/acmebank/authserver/shared/ciba/appbackend"
	"github.com/acmebank/authserver/shared/oauth"
)

// status is the HTTP status and code a Handle error is answered with.
func status(err error) (int, string) {
	if err == nil {
		return http.StatusNoContent, ""
	}
	e := oauth.AsError(err)
	return e.Status, e.Code
}

// TestHandle_RefusesEveryBrokenRuleAndWritesNothing: each rule of the decision token, broken
// alone on an otherwise valid approval of alice's pending request, is refused with its answer,
// and the store is byte for byte as it was: the request still pending, no jti recorded.
func TestHandle_RefusesEveryBrokenRuleAndWritesNothing(t *testing.T) {
	f := newFixture(t)
	ref := f.start("alice", "")
	pay := f.start("alice", payment)
	bobs := f.start("bob", "")
	if ref == "" || pay == "" || bobs == "" {
		t.Fatal("no event for a known customer's request")
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	with := func(ref string, change func(c map[string]any)) map[string]any {
		c := f.claims(ref)
		change(c)
		return c
	}
	valid := f.sign(f.claims(ref))
	parts := strings.Split(valid, ".")
	bobsPayload, _ := json.Marshal(with(ref, func(c map[string]any) { c["sub"] = "u_bob" }))
	cases := []struct {
		name   string
		token  string
		status int
		code   string
	}{
		{"alg none", base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"ciba-decision+jwt","kid":"app-es"}`)) + "." + parts[1] + ".", 401, "invalid_token"},
		{"HS256 with a guessable secret", f.signWith(jose.HS256, []byte("app-es-app-es-app-es-app-es-0123"), "app-es", appbackend.TokenType, f.claims(ref)), 401, "invalid_token"},
		{"RS256", f.signWith(jose.RS256, f.ps, "app-ps", appbackend.TokenType, f.claims(ref)), 401, "invalid_token"},
		{"no typ", f.signWith(jose.ES256, f.es, "app-es", "", f.claims(ref)), 401, "invalid_token"},
		{"another typ", f.signWith(jose.ES256, f.es, "app-es", "JWT", f.claims(ref)), 401, "invalid_token"},
		{"an unknown kid", f.signWith(jose.ES256, other, "app-other", appbackend.TokenType, f.claims(ref)), 401, "invalid_token"},
		{"a known kid, another key", f.signWith(jose.ES256, other, "app-es", appbackend.TokenType, f.claims(ref)), 401, "invalid_token"},
		{"the ES256 kid with PS256", f.signWith(jose.PS256, f.ps, "app-es", appbackend.TokenType, f.claims(ref)), 401, "invalid_token"},
		{"tampered (sub changed after signing)", parts[0] + "." + base64.RawURLEncoding.EncodeToString(bobsPayload) + "." + parts[2], 401, "invalid_token"},
		{"oversized", f.sign(with(ref, func(c map[string]any) { c["pad"] = strings.Repeat("x", appbackend.MaxTokenBytes) })), 401, "invalid_token"},
		{"wrong iss", f.sign(with(ref, func(c map[string]any) { c["iss"] = "https://evil.example" })), 401, "invalid_token"},
		{"wrong aud", f.sign(with(ref, func(c map[string]any) { c["aud"] = "https://other-as.example" })), 401, "invalid_token"},
		{"aud of two", f.sign(with(ref, func(c map[string]any) { c["aud"] = []string{issuer, "https://other-as.example"} })), 401, "invalid_token"},
		{"expired", f.sign(with(ref, func(c map[string]any) {
			c["iat"], c["exp"] = f.now.Add(-3*time.Minute).Unix(), f.now.Add(-time.Second).Unix()
		})), 401, "invalid_token"},
		{"iat in the future", f.sign(with(ref, func(c map[string]any) {
			c["iat"], c["exp"] = f.now.Add(time.Minute).Unix(), f.now.Add(2*time.Minute).Unix()
		})), 401, "invalid_token"},
		{"lives too long", f.sign(with(ref, func(c map[string]any) { c["exp"] = f.now.Add(time.Hour).Unix() })), 401, "invalid_token"},
		{"no exp", f.sign(with(ref, func(c map[string]any) { delete(c, "exp") })), 401, "invalid_token"},
		{"no jti", f.sign(with(ref, func(c map[string]any) { delete(c, "jti") })), 401, "invalid_token"},
		{"no ref", f.sign(with(ref, func(c map[string]any) { delete(c, "ref") })), 401, "invalid_token"},
		{"no sub", f.sign(with(ref, func(c map[string]any) { delete(c, "sub") })), 401, "invalid_token"},
		{"decision maybe", f.sign(with(ref, func(c map[string]any) { c["decision"] = "maybe" })), 401, "invalid_token"},
		{"approval without auth_time", f.sign(with(ref, func(c map[string]any) { delete(c, "auth_time") })), 401, "invalid_token"},
		{"auth_time long before", f.sign(with(ref, func(c map[string]any) { c["auth_time"] = f.now.Add(-time.Hour).Unix() })), 401, "invalid_token"},
		{"another customer's sub", f.sign(with(ref, func(c map[string]any) { c["sub"] = "u_bob" })), 404, "invalid_request"},
		{"alice deciding bob's request", f.sign(with(bobs, func(c map[string]any) {})), 404, "invalid_request"},
		{"an unknown ref", f.sign(with("bc_"+oauth.HashToken("nothing"), func(c map[string]any) {})), 404, "invalid_request"},
		{"an auth_req_id as the ref", f.sign(with("ciba_whatever", func(c map[string]any) {})), 404, "invalid_request"},
		{"weak amr (a password)", f.sign(with(ref, func(c map[string]any) { c["amr"] = []string{"pwd"} })), 403, "insufficient_user_authentication"},
		{"no amr", f.sign(with(ref, func(c map[string]any) { delete(c, "amr") })), 403, "insufficient_user_authentication"},
		{"a payment without details_sha256", f.sign(with(pay, func(c map[string]any) {})), 400, "invalid_request"},
		{"a payment with another payment's hash", f.sign(with(pay, func(c map[string]any) {
			c["details_sha256"] = detailsHash(strings.Replace(payment, "123.50", "9123.50", 1))
		})), 400, "invalid_request"},
		{"a payment with a malformed hash", f.sign(with(pay, func(c map[string]any) { c["details_sha256"] = "not-a-hash" })), 401, "invalid_token"},
	}
	before := f.digest()
	for _, c := range cases {
		err := f.callback.Handle(context.Background(), c.token)
		if st, code := status(err); st != c.status || code != c.code {
			t.Errorf("%s: %d %s (%v), want %d %s", c.name, st, code, err, c.status, c.code)
		}
	}
	if f.digest() != before {
		t.Fatal("a refused decision token wrote to the store")
	}
	for _, r := range []string{ref, pay, bobs} {
		if s := f.state(r).State; s != oauth.CIBAPending {
			t.Errorf("request %s is %s after refused tokens, want pending", r, s)
		}
	}
	if err := f.callback.Handle(context.Background(), valid); err != nil {
		t.Fatalf("the valid token the cases were made from: %v", err)
	}
}

// TestHandle_ApprovalRecordsTheGrantAndTheTokenIsUsedOnce: a valid approval decides alice's
// request once (approved, her strong methods); the same token again is refused and writes
// nothing; another token with the same jti, for another pending request, is refused as a
// replay and leaves that request pending.
func TestHandle_ApprovalRecordsTheGrantAndTheTokenIsUsedOnce(t *testing.T) {
	f := newFixture(t)
	ref, next := f.start("alice", ""), f.start("alice", "")
	c := f.claims(ref)
	tok := f.sign(c)
	if err := f.callback.Handle(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	r := f.state(ref)
	if r.State != oauth.CIBAApproved || r.Grant == nil || r.Grant.UID != "u_alice" || !oauth.AMRStrong(r.Grant.AMR) {
		t.Fatalf("after the approval: %+v", r)
	}
	before := f.digest()
	if st, _ := status(f.callback.Handle(context.Background(), tok)); st != http.StatusConflict {
		t.Errorf("the same token again (a retry after a lost 204): %d, want 409 (decided)", st)
	}
	c["ref"] = next
	if st, code := status(f.callback.Handle(context.Background(), f.sign(c))); st != 401 || code != "invalid_token" {
		t.Errorf("another request decided with a used jti: %d %s, want 401 invalid_token", st, code)
	}
	if f.digest() != before {
		t.Fatal("a replayed decision token wrote to the store")
	}
	if f.state(next).State != oauth.CIBAPending {
		t.Fatal("a replayed jti decided another request")
	}
}

// TestHandle_DenialNeedsNoAuthentication: a denial (the customer said no, or ignored the
// prompt and the app backend reports it) is recorded without amr or auth_time.
func TestHandle_DenialNeedsNoAuthentication(t *testing.T) {
	f := newFixture(t)
	ref := f.start("alice", "")
	c := f.claims(ref)
	c["decision"] = "denied"
	delete(c, "amr")
	delete(c, "auth_time")
	if err := f.callback.Handle(context.Background(), f.sign(c)); err != nil {
		t.Fatal(err)
	}
	if r := f.state(ref); r.State != oauth.CIBADenied || r.Grant != nil {
		t.Fatalf("after the denial: %+v", r)
	}
}

// TestHandle_PaymentApprovalKeepsTheAppsEvidence: a payment approved with the SHA-256 of the
// details the event carried (signed with the PS256 key) is recorded with evidence of kind app
// over exactly those details, holding the token's jti.
func TestHandle_PaymentApprovalKeepsTheAppsEvidence(t *testing.T) {
	f := newFixture(t)
	ref := f.start("alice", payment)
	var d struct {
		AuthorizationDetails json.RawMessage `json:"authorization_details"`
		Hash                 string          `json:"authorization_details_sha256"`
	}
	entries := f.rec.Entries()
	_ = json.Unmarshal([]byte(entries[len(entries)-1].Detail), &d)
	c := f.claims(ref)
	c["details_sha256"] = d.Hash
	if err := f.callback.Handle(context.Background(), f.signWith(jose.PS256, f.ps, "app-ps", appbackend.TokenType, c)); err != nil {
		t.Fatal(err)
	}
	g := f.state(ref).Grant
	if g == nil || g.PaymentEvidence == nil || g.PaymentEvidence.Factor != oauth.PaymentFactorApp || string(g.PaymentEvidence.Nonce) != c["jti"] {
		t.Fatalf("payment grant %+v", g)
	}
	if err := g.PaymentEvidence.Check(d.AuthorizationDetails); err != nil {
		t.Fatalf("the evidence does not check against the event's details: %v", err)
	}
}

// TestHandle_RacingCallbacksOfOneRequestDecideOnce: 50 distinct valid tokens for one request
// (approvals and denials), posted at once: exactly one decides, the others are 409, and the
// request holds the winner's decision; on both stores.
func TestHandle_RacingCallbacksOfOneRequestDecideOnce(t *testing.T) {
	onBothStores(t, racingCallbacks)
}

func racingCallbacks(t *testing.T, f *fixture) {
	ref := f.start("alice", "")
	const n = 50
	tokens := make([]string, n)
	for i := range tokens {
		c := f.claims(ref)
		if i%2 == 1 {
			c["decision"] = "denied"
		}
		tokens[i] = f.sign(c)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = f.callback.Handle(context.Background(), tokens[i])
		}()
	}
	close(start)
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch st, _ := status(err); {
		case err == nil && won == -1:
			won = i
		case err == nil:
			t.Errorf("tokens %d and %d both decided", won, i)
		case st != http.StatusConflict:
			t.Errorf("token %d: %v, want 409 (decided)", i, err)
		}
	}
	if won == -1 {
		t.Fatal("no token decided")
	}
	want := oauth.CIBAApproved
	if won%2 == 1 {
		want = oauth.CIBADenied
	}
	if s := f.state(ref).State; s != want {
		t.Fatalf("request %s, want the winner's %s", s, want)
	}
}

// TestNew_RefusesKeysItCannotUseAndNamesMissingDeps: the app backend's set must hold public
// PS256 or ES256 keys, each with its own kid; a callback without its dependencies says which.
func TestNew_RefusesKeysItCannotUseAndNamesMissingDeps(t *testing.T) {
	k, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	set := func(keys ...jose.JSONWebKey) []byte { b, _ := json.Marshal(jose.JSONWebKeySet{Keys: keys}); return b }
	for name, raw := range map[string][]byte{
		"not JSON":       []byte("{"),
		"no keys":        []byte(`{"keys":[]}`),
		"a private key":  set(jose.JSONWebKey{Key: p256, KeyID: "a"}),
		"no kid":         set(jose.JSONWebKey{Key: &p256.PublicKey}),
		"a P-384 key":    set(jose.JSONWebKey{Key: &k.PublicKey, KeyID: "a"}),
		"a kid twice":    set(jose.JSONWebKey{Key: &p256.PublicKey, KeyID: "a"}, jose.JSONWebKey{Key: &p256.PublicKey, KeyID: "a"}),
		"an ES384 alg":   set(jose.JSONWebKey{Key: &p256.PublicKey, KeyID: "a", Algorithm: "ES384"}),
		"an encrypt key": set(jose.JSONWebKey{Key: &p256.PublicKey, KeyID: "a", Use: "enc"}),
	} {
		if _, err := appbackend.ParseKeys(raw); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	_, err := appbackend.New(appbackend.Deps{})
	for _, name := range []string{"Issuer", "Audience", "Requests", "Clock", "Log"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("New without %s: %v", name, err)
		}
	}
}

// TestStart_AnEventEventBridgeRefusesLeavesTheRequestToExpire: when EventBridge does not
// accept the event (FailedEntryCount), the client still gets its auth_req_id, as for any
// other request, and the request stays pending, undecided, until it expires.
func TestStart_AnEventEventBridgeRefusesLeavesTheRequestToExpire(t *testing.T) {
	f := newFixture(t)
	f.rec.FailEntries(true)
	if ref := f.start("alice", ""); ref != "" {
		t.Fatalf("an event was recorded although EventBridge refused it: %s", ref)
	}
	list, err := f.svc.Pending(context.Background(), "u_alice")
	if err != nil || len(list) != 1 {
		t.Fatalf("alice's pending requests: %v %v, want the one started", list, err)
	}
}

// TestRoundTrips_ACallbackOnDynamoDB: one approval through the callback on DynamoDB Local is
// the request and the customer read (Decide's checks), then the decision with its jti in one
// TransactWriteItems, the request read beside it (a transaction returns no item): four
// requests in three round trips, no KMS.
func TestRoundTrips_ACallbackOnDynamoDB(t *testing.T) {
	onBothStores(t, func(t *testing.T, f *fixture) {
		if f.calls == nil {
			t.Skip("counts DynamoDB's requests")
		}
		ref := f.start("alice", "")
		f.calls.Reset()
		if err := f.callback.Handle(context.Background(), f.sign(f.claims(ref))); err != nil {
			t.Fatal(err)
		}
		got := f.calls.Calls()
		want := map[string]int{"GetItem": 3, "TransactWriteItems": 1}
		if len(got) != len(want) {
			t.Errorf("calls %v, want %v", got, want)
		}
		for op, n := range want {
			if got[op] != n {
				t.Errorf("%s × %d, want %d (all: %v)", op, got[op], n, got)
			}
		}
	})
}
