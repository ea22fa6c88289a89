package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"golang.org/x/oauth2"

	"github.com/acmebank/authserver/shared/app"
	"github.com/acmebank/authserver/shared/httpapi"
)

// Payment grants are one-time (issue 29 item 4), end to end on both stores: the payment is
// pushed (PAR), approved, its code exchanged by golang.org/x/oauth2, and its token called on
// the bank API through the local server's proxy to a recording upstream.

// paymentToken pushes a payment, approves it and exchanges the code with golang.org/x/oauth2.
func (e *env) paymentToken(t *testing.T, details string) *oauth2.Token {
	t.Helper()
	pkce := oauth2.GenerateVerifier()
	p := pushedParams(oauth2.S256ChallengeFromVerifier(pkce))
	p.Set("scope", "openid")
	p.Set("authorization_details", details)
	st, body := e.push(t, p)
	uri, _ := body["request_uri"].(string)
	if st != http.StatusCreated || uri == "" {
		t.Fatalf("push: %d %v", st, body)
	}
	code := e.authorize(t, e.parURL(uri)).Query().Get("code")
	tok, err := e.oauth2Config("openid").Exchange(context.Background(), code, oauth2.VerifierOption(pkce))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	return tok
}

// TestPayment_FromPARToOneBankAPICall: a payment's token response has no refresh token and
// lives minutes; its first bank API call reaches the backend with X-Auth-Payment (the details,
// base64url JSON, whatever the caller sent under that name); the second is 401 invalid_token
// and reaches nothing. An account_information grant still gets a refresh token.
func TestPayment_FromPARToOneBankAPICall(t *testing.T) {
	bothStores(t, passkeysOn, func(t *testing.T, e *env) {
		upstream := newRecordingUpstream(t)
		e.mountAPI(t, app.APIOptions{Upstream: upstream.URL})
		details := "[" + rarPayment + "]"
		tok := e.paymentToken(t, details)
		if tok.RefreshToken != "" {
			t.Fatalf("a payment grant got a refresh token")
		}
		if in, ok := tok.Extra("expires_in").(float64); !ok || in != 300 {
			t.Fatalf("expires_in = %v, want 300 (AUTH_PAYMENT_TOKEN_TTL's default)", tok.Extra("expires_in"))
		}
		call := func() int {
			req, _ := http.NewRequest(http.MethodGet, e.url("/v2/bank/accounts"), nil)
			req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
			req.Header["X_Auth_Payment"] = []string{"forged"}
			req.Header.Set("X-Auth-Payment", "forged")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		if st := call(); st != http.StatusOK {
			t.Fatalf("first call: %d, want 200", st)
		}
		got := upstream.take()
		if len(got) != 1 {
			t.Fatalf("the upstream saw %d requests, want 1", len(got))
		}
		vs := got[0].Header.Values(httpapi.HeaderPayment)
		if len(vs) != 1 {
			t.Fatalf("upstream %s = %q, want exactly one value", httpapi.HeaderPayment, vs)
		}
		raw, err := base64.RawURLEncoding.DecodeString(vs[0])
		if err != nil || !sameJSON(t, decodeJSON(t, raw), details) {
			t.Fatalf("upstream %s decodes to %s (%v), want %s", httpapi.HeaderPayment, raw, err, details)
		}
		if st := call(); st != http.StatusUnauthorized {
			t.Fatalf("second call: %d, want 401", st)
		}
		if n := len(upstream.take()); n != 0 {
			t.Fatalf("a refused second call reached the upstream (%d requests)", n)
		}

		// An account-information grant is not one-time.
		pkce := oauth2.GenerateVerifier()
		p := pushedParams(oauth2.S256ChallengeFromVerifier(pkce))
		p.Set("authorization_details", "["+rarAccounts+"]")
		st, body := e.push(t, p)
		code := e.authorize(t, e.parURL(body["request_uri"].(string))).Query().Get("code")
		ais, err := e.oauth2Config("openid").Exchange(context.Background(), code, oauth2.VerifierOption(pkce))
		if st != http.StatusCreated || err != nil || ais.RefreshToken == "" {
			t.Fatalf("account_information: push %d, exchange %v, refresh token %q: want one", st, err, ais.RefreshToken)
		}
		src := e.oauth2Config("openid").TokenSource(context.Background(), &oauth2.Token{RefreshToken: ais.RefreshToken})
		if _, err := src.Token(); err != nil {
			t.Fatalf("refresh of the account_information grant: %v", err)
		}
	})
}

// TestPayment_FiftyRacingBankAPICallsWithOneTokenOnePasses: 50 calls with one payment token
// sent at once: exactly one reaches the backend, the 49 others are 401.
func TestPayment_FiftyRacingBankAPICallsWithOneTokenOnePasses(t *testing.T) {
	bothStores(t, passkeysOn, func(t *testing.T, e *env) {
		upstream := newRecordingUpstream(t)
		e.mountAPI(t, app.APIOptions{Upstream: upstream.URL})
		tok := e.paymentToken(t, "["+rarPayment+"]")
		const n = 50
		status := make([]int, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-gate
				req, _ := http.NewRequest(http.MethodGet, e.url("/v2/bank/accounts"), nil)
				req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs[i] = err
					return
				}
				resp.Body.Close()
				status[i] = resp.StatusCode
			})
		}
		close(gate)
		wg.Wait()
		counts := map[int]int{}
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("call %d: %v", i, errs[i])
			}
			counts[status[i]]++
		}
		if counts[http.StatusOK] != 1 || counts[http.StatusUnauthorized] != n-1 {
			t.Fatalf("statuses %v, want one 200 and %d 401", counts, n-1)
		}
		if got := len(upstream.take()); got != 1 {
			t.Fatalf("the upstream saw %d calls, want 1", got)
		}
	})
}

func decodeJSON(t *testing.T, raw []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("not JSON: %s", raw)
	}
	return v
}
