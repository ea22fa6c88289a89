package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"

	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/keys/kmstest"
	"github.com/acmebank/authserver/shared/receipt"
)

// The third party's consent receipt (issue 29, item 6): the grant management query answers
// the grant's signed consent receipt, which verifies against the published JWKS.

// gmDetailsGrant is gmGrant (action create) with authorization_details.
func (e *env) gmDetailsGrant(t *testing.T, scope, details string) *oauth2.Token {
	t.Helper()
	cfg := e.oauth2Config(strings.Fields(scope)...)
	pkce := oauth2.GenerateVerifier()
	loc := e.authorize(t, cfg.AuthCodeURL("st-rcpt", oauth2.S256ChallengeOption(pkce),
		oauth2.SetAuthURLParam("grant_management_action", "create"), oauth2.SetAuthURLParam("authorization_details", details)))
	tok, err := cfg.Exchange(context.Background(), loc.Query().Get("code"), oauth2.VerifierOption(pkce))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	return tok
}

// verifiedReceipt checks jws against the keys the env's JWKS endpoint serves (go-oidc's
// remote key set, as a client does) and returns its typ header and its claims.
func (e *env) verifiedReceipt(t *testing.T, jws string) (string, map[string]any) {
	t.Helper()
	payload, err := oidc.NewRemoteKeySet(context.Background(), e.url(httpapi.PathJWKS)).VerifySignature(context.Background(), jws)
	if err != nil {
		t.Fatalf("the consent receipt does not verify with the JWKS: %v", err)
	}
	sig, err := jose.ParseSignedCompact(jws, []jose.SignatureAlgorithm{jose.RS256, jose.PS256, jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	typ, _ := sig.Signatures[0].Protected.ExtraHeaders[jose.HeaderType].(string)
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	return typ, claims
}

// checkReceipt verifies jws (verifiedReceipt) and checks what every receipt of a grant made by
// gmDetailsGrant carries: its typ, the grant id, the client, the issuer, the scopes and the
// details as granted. It returns the claims.
func (e *env) checkReceipt(t *testing.T, jws, id, details string) map[string]any {
	t.Helper()
	typ, claims := e.verifiedReceipt(t, jws)
	if typ != receipt.Type {
		t.Errorf("typ %q, want %q", typ, receipt.Type)
	}
	for k, want := range map[string]any{"grant_id": id, "client_id": clientID, "iss": e.app.Config.Issuer, "scope": "openid " + gmScopes} {
		if claims[k] != want {
			t.Errorf("receipt %s = %v, want %v", k, claims[k], want)
		}
	}
	if !sameJSON(t, claims["authorization_details"], details) {
		t.Errorf("receipt authorization_details %v, want %s", claims["authorization_details"], details)
	}
	return claims
}

// TestGrantManagement_QueryCarriesTheGrantsConsentReceiptVerifiedByTheJWKS: the query answer
// carries consent_receipt, a JWS of typ consent-receipt+jwt that verifies against the served
// JWKS (local key files on the embedded store, local-kms on DynamoDB), naming the grant, the
// client, the granted scopes and authorization_details, the issuer, and a pairwise subject
// (not the customer's uid). After a merge the receipt is the merged grant's.
func TestGrantManagement_QueryCarriesTheGrantsConsentReceiptVerifiedByTheJWKS(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		details := "[" + rarAccounts + "]"
		tok := e.gmDetailsGrant(t, "openid "+gmScopes, details)
		id, _ := tok.Extra("grant_id").(string)
		if id == "" {
			t.Fatal("the token response of a create carries no grant_id")
		}
		q := e.grantAPI(t, http.MethodGet, id, "Bearer "+tok.AccessToken)
		jws, _ := q.json["consent_receipt"].(string)
		if q.status != http.StatusOK || jws == "" {
			t.Fatalf("grant query: %d %s, want 200 with a consent_receipt", q.status, q.raw)
		}
		claims := e.checkReceipt(t, jws, id, details)
		if sub, _ := claims["sub"].(string); sub == "" || sub == "uid-alice" {
			t.Errorf("receipt sub %q, want a pairwise subject", sub)
		}

		merged := e.gmGrant(t, "openid email", "merge", id)
		q = e.grantAPI(t, http.MethodGet, id, "Bearer "+merged.AccessToken)
		jws, _ = q.json["consent_receipt"].(string)
		if jws == "" {
			t.Fatalf("query after the merge: %d %s, want a consent_receipt", q.status, q.raw)
		}
		if _, claims := e.verifiedReceipt(t, jws); claims["scope"] != "openid "+gmScopes+" email" || claims["grant_id"] != id {
			t.Errorf("receipt after the merge: grant_id %v scope %v, want %s and the merged scopes", claims["grant_id"], claims["scope"], id)
		}
		if strings.Contains(e.logs.String(), jws) {
			t.Error("a consent receipt reached the logs")
		}
	})
}

// TestGrantManagement_KeyBackendFailureAtTheQueryIs503AndWritesNothing: when KMS throttles
// the receipt's signature the query is 503 temporarily_unavailable with Retry-After, as at
// the token endpoint, with no receipt and nothing written; the next query gets its receipt.
func TestGrantManagement_KeyBackendFailureAtTheQueryIs503AndWritesNothing(t *testing.T) {
	e, kmsTr, _ := newAWSEnv(t)
	tok := e.gmGrant(t, "openid "+gmScopes, "create", "")
	id := tok.Extra("grant_id").(string)
	before, items := e.writes.count(), e.itemCount(t)
	signs := kmsTr.Calls("Sign")
	kmsTr.Fail("Sign", kmstest.Throttling, 1)
	r := e.grantAPI(t, http.MethodGet, id, "Bearer "+tok.AccessToken)
	if r.status != http.StatusServiceUnavailable || r.json["error"] != "temporarily_unavailable" || r.header.Get("Retry-After") == "" {
		t.Fatalf("query while KMS throttles: %d %s, want 503 temporarily_unavailable with Retry-After", r.status, r.raw)
	}
	if n := kmsTr.Calls("Sign") - signs; n != 1 {
		t.Fatalf("%d Sign calls, want the one that failed", n)
	}
	if strings.Contains(r.raw, "consent_receipt") {
		t.Errorf("a failed query answered a receipt: %s", r.raw)
	}
	if got := e.writes.list()[before:]; len(got) != 0 || e.itemCount(t) != items {
		t.Fatalf("the failed query wrote %v", got)
	}
	if r := e.grantAPI(t, http.MethodGet, id, "Bearer "+tok.AccessToken); r.status != http.StatusOK || r.json["consent_receipt"] == nil {
		t.Fatalf("query after KMS recovered: %d %s", r.status, r.raw)
	}
}

// TestGrantManagement_RacingQueriesEachGetAReceiptWithOneSubjectAndWriteNothing: 50 queries of
// one grant at once each answer 200 with a receipt that verifies, all with the same pairwise
// subject, and write nothing (a Bearer query records no one-time value). On both stores.
func TestGrantManagement_RacingQueriesEachGetAReceiptWithOneSubjectAndWriteNothing(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		tok := e.gmGrant(t, "openid "+gmScopes, "create", "")
		id := tok.Extra("grant_id").(string)
		before, items := e.writes.count(), e.itemCount(t)
		const racers = 50
		receipts := make([]string, racers)
		var wg sync.WaitGroup
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := e.grantAPI(t, http.MethodGet, id, "Bearer "+tok.AccessToken)
				if r.status == http.StatusOK {
					receipts[i], _ = r.json["consent_receipt"].(string)
				}
			}()
		}
		wg.Wait()
		subs := map[any]int{}
		for i, jws := range receipts {
			if jws == "" {
				t.Fatalf("racer %d got no receipt", i)
			}
			_, claims := e.verifiedReceipt(t, jws)
			subs[claims["sub"]]++
		}
		if len(subs) != 1 {
			t.Errorf("racing queries' receipts have %d subjects, want one: %v", len(subs), subs)
		}
		if got := e.writes.list()[before:]; len(got) != 0 || e.itemCount(t) != items {
			t.Fatalf("racing queries wrote %v", got)
		}
	})
}
