package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.etcd.io/bbolt"
	"golang.org/x/oauth2"

	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth/rar"
	"github.com/acmebank/authserver/shared/store/dynamo"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// Rich authorization requests (RFC 9396) end to end, on both stores: the details travel from
// the request (pushed, or a plain authorization request sent by golang.org/x/oauth2) through
// the pending request and the grant to the token response and introspection; a refresh narrows
// them; bad ones are invalid_authorization_details and store nothing.

// The RFC 9396 section 2 examples (the acceptance client is registered for both types).
const (
	rarPayment = `{"type":"payment_initiation","locations":["https://api.acmebank.example/payments"],` +
		`"instructedAmount":{"currency":"EUR","amount":"123.50"},"creditorName":"Merchant A",` +
		`"creditorAccount":{"iban":"DE02100100109307118603"},"remittanceInformationUnstructured":"Ref Number Merchant"}`
	rarAccounts = `{"type":"account_information","accounts":[{"iban":"DE02100100109307118603"}],` +
		`"permissions":["balances","transactions"],"expirationDate":"2027-01-31"}`
)

// sameJSON reports whether got (a decoded JSON value) is the JSON text want.
func sameJSON(t *testing.T, got any, want string) bool {
	t.Helper()
	a, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(w)
	return bytes.Equal(a, b)
}

// itemCount is the number of items the env's store holds, counted in the store itself: every
// key of every bucket of a consistent copy of the embedded store's file (Store.Backup), or a
// Scan of the DynamoDB table.
func (e *env) itemCount(t *testing.T) int {
	t.Helper()
	ctx := context.Background()
	switch st := e.app.Store.(type) {
	case *embedded.Store:
		path := filepath.Join(t.TempDir(), "copy.db")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Backup(f); err != nil {
			t.Fatal(err)
		}
		f.Close()
		db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		n := 0
		err = db.View(func(tx *bbolt.Tx) error {
			return tx.ForEach(func(_ []byte, b *bbolt.Bucket) error {
				n += b.Stats().KeyN
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	default:
		client, err := dynamo.NewClient(ctx, dynamoLocalEndpoint(t))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		var start map[string]types.AttributeValue
		for {
			out, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(e.app.Config.Table), Select: types.SelectCount,
				ConsistentRead: aws.Bool(true), ExclusiveStartKey: start})
			if err != nil {
				t.Fatal(err)
			}
			n += int(out.Count)
			if start = out.LastEvaluatedKey; start == nil {
				return n
			}
		}
	}
}

// introspect answers the acceptance client's introspection of token.
func (e *env) introspect(t *testing.T, token string) map[string]any {
	t.Helper()
	st, body, _ := e.post(t, httpapi.PathIntrospect, url.Values{"token": {token}}, true, false)
	if st != http.StatusOK || body["active"] != true {
		t.Fatalf("introspection: %d %v", st, body)
	}
	return body
}

// TestRAR_PushedDetailsReachTokenResponseAndIntrospectionAndRefreshNarrowsThem: a push with
// both details gets a code whose exchange answers them (RFC 9396 7) and whose access token's
// introspection shows them (9.1); a refresh asking for fewer permissions gets an access token
// with just those, in the response and in introspection (7.2); a refresh asking for more, or
// for a changed payment, is invalid_authorization_details and writes nothing, and the refresh
// token still works after it. Discovery lists the types. On both stores.
func TestRAR_PushedDetailsReachTokenResponseAndIntrospectionAndRefreshNarrowsThem(t *testing.T) {
	bothStores(t, passkeysOn, func(t *testing.T, e *env) {
		granted := func(details string) map[string]any {
			t.Helper()
			pkce := oauth2.GenerateVerifier()
			p := pushedParams(oauth2.S256ChallengeFromVerifier(pkce))
			p.Set("authorization_details", details)
			before := e.itemCount(t)
			st, body := e.push(t, p)
			uri, _ := body["request_uri"].(string)
			if st != http.StatusCreated || uri == "" {
				t.Fatalf("push: %d %v", st, body)
			}
			if n := e.itemCount(t); n != before+1 { // the count the refusals below compare sees a push
				t.Fatalf("an accepted push: %d items before, %d after, want one more", before, n)
			}
			code := e.authorize(t, e.parURL(uri)).Query().Get("code")
			st, tok := e.exchange(t, code, url.Values{"code_verifier": {pkce}})
			if st != http.StatusOK || !sameJSON(t, tok["authorization_details"], details) {
				t.Fatalf("exchange: %d, authorization_details %v, want %s", st, tok["authorization_details"], details)
			}
			if got := e.introspect(t, tok["access_token"].(string))["authorization_details"]; !sameJSON(t, got, details) {
				t.Fatalf("introspection's authorization_details %v, want %s", got, details)
			}
			return tok
		}
		// A grant holding a payment is one-time (docs/api.md, "Payment tokens are one-time"):
		// its details reach the token response and introspection, and it has no refresh token.
		if tok := granted("[" + rarPayment + "," + rarAccounts + "]"); tok["refresh_token"] != nil {
			t.Fatalf("a grant holding a payment got a refresh token")
		}
		// Refresh narrows the details of a grant that may refresh: account information.
		details := "[" + rarAccounts + "]"
		tok := granted(details)
		refresh := func(want string) (int, map[string]any) {
			st, body, _ := e.post(t, httpapi.PathToken, url.Values{"grant_type": {"refresh_token"},
				"refresh_token": {tok["refresh_token"].(string)}, "authorization_details": {want}}, false, false)
			return st, body
		}
		for name, wider := range map[string]string{
			"another permission": strings.Replace(rarAccounts, `"balances","transactions"`, `"balances","details"`, 1),
			"a changed amount":   strings.Replace(rarPayment, `"123.50"`, `"999.00"`, 1),
			"every account":      `{"type":"account_information","permissions":["balances"]}`,
		} {
			before, writes := e.itemCount(t), e.writes.count()
			st, body := refresh("[" + wider + "]")
			if st != http.StatusBadRequest || body["error"] != "invalid_authorization_details" {
				t.Fatalf("refresh asking for %s: %d %v, want 400 invalid_authorization_details", name, st, body)
			}
			if n := e.itemCount(t); n != before || e.writes.count() != writes {
				t.Fatalf("a refused refresh (%s) wrote: %d items before, %d after; %v", name, before, n, e.writes.list()[writes:])
			}
		}
		narrower := "[" + strings.Replace(rarAccounts, `"balances","transactions"`, `"balances"`, 1) + "]"
		st, body := refresh(narrower)
		if st != http.StatusOK || !sameJSON(t, body["authorization_details"], narrower) {
			t.Fatalf("narrowing refresh: %d %v, want %s", st, body, narrower)
		}
		if got := e.introspect(t, body["access_token"].(string))["authorization_details"]; !sameJSON(t, got, narrower) {
			t.Fatalf("the narrowed token's introspection: %v, want %s", got, narrower)
		}
		// A refresh that asks for nothing gets the grant's details back (the narrowing was the
		// access token's, not the grant's).
		st, body, _ = e.post(t, httpapi.PathToken, url.Values{"grant_type": {"refresh_token"},
			"refresh_token": {body["refresh_token"].(string)}}, false, false)
		if st != http.StatusOK || !sameJSON(t, body["authorization_details"], details) {
			t.Fatalf("plain refresh: %d %v, want the grant's %s", st, body["authorization_details"], details)
		}
		var meta struct {
			Types []string `json:"authorization_details_types_supported"`
		}
		resp, err := http.Get(e.url(httpapi.PathDiscovery))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&meta); err != nil || strings.Join(meta.Types, " ") != "account_information payment_initiation" {
			t.Fatalf("discovery's authorization_details_types_supported = %v (%v)", meta.Types, err)
		}
	})
}

// TestRAR_PlainAuthorizationRequestWithGoOAuth2: golang.org/x/oauth2 sends authorization_details
// as a JSON string parameter of a plain authorization request (AuthCodeOption
// SetAuthURLParam); the exchange's token response carries them (Token.Extra). An exchange that
// sends authorization_details is refused without spending the code. On both stores.
func TestRAR_PlainAuthorizationRequestWithGoOAuth2(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		details := "[" + rarAccounts + "]"
		cfg := e.oauth2Config("openid")
		pkce := oauth2.GenerateVerifier()
		authURL := cfg.AuthCodeURL("st-rar", oauth2.S256ChallengeOption(pkce), oauth2.SetAuthURLParam("authorization_details", details))
		loc := e.authorize(t, authURL)
		// The exchange takes no authorization_details, and refuses them before the code is
		// spent: the same code then works without them.
		st, body := e.exchange(t, loc.Query().Get("code"), url.Values{"code_verifier": {pkce}, "authorization_details": {details}})
		if st != http.StatusBadRequest || body["error"] != "invalid_authorization_details" {
			t.Fatalf("exchange with authorization_details: %d %v, want 400 invalid_authorization_details", st, body)
		}
		tok, err := cfg.Exchange(context.Background(), loc.Query().Get("code"), oauth2.VerifierOption(pkce))
		if err != nil {
			t.Fatalf("exchange: %v", err)
		}
		if got := tok.Extra("authorization_details"); !sameJSON(t, got, details) {
			t.Fatalf("the token response's authorization_details %v, want %s", got, details)
		}
	})
}

// TestRAR_BadDetailsRefusedAndNothingStored: authorization_details that are not an array, of
// an unknown type, that break their type's schema, of a type the client is not registered for,
// over rar.MaxBytes or over rar.MaxDetails are invalid_authorization_details: at PAR a 400 in
// JSON, at the authorization endpoint a redirect to the client with the error and the state.
// Neither stores anything: the store holds as many items after as before. On both stores.
func TestRAR_BadDetailsRefusedAndNothingStored(t *testing.T) {
	many := "[" + strings.TrimSuffix(strings.Repeat(rarAccounts+",", rar.MaxDetails+1), ",") + "]"
	big := "[" + rarPayment + strings.Repeat(" ", rar.MaxBytes) + "]"
	cases := []struct {
		name, client, details, desc string
	}{
		{"not an array", clientID, rarPayment, "must be a JSON array"},
		{"an unknown type", clientID, `[{"type":"openid_credential"}]`, "unknown type"},
		{"a schema violation", clientID, "[" + strings.Replace(rarPayment, `"EUR"`, `"euro"`, 1) + "]", "at /instructedAmount/currency (pattern)"},
		{"a type the client is not registered for", otherID, "[" + rarAccounts + "]", "not registered for the type account_information"},
		{"too big", clientID, big, "at most 8192 bytes"},
		{"too many", clientID, many, "at most 10 details"},
	}
	bothStores(t, nil, func(t *testing.T, e *env) {
		for _, c := range cases {
			t.Run("PAR "+c.name, func(t *testing.T) {
				p := pushedParams(oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier()))
				p.Set("authorization_details", c.details)
				p.Set("client_id", c.client)
				p.Set("client_secret", map[string]string{clientID: clientSecret, otherID: otherSecret}[c.client])
				if c.client == otherID {
					p.Set("redirect_uri", otherURI)
					p.Set("scope", "openid")
				}
				before, writes := e.itemCount(t), e.writes.count()
				st, body, _ := e.post(t, httpapi.PathPAR, p, false, false)
				desc, _ := body["error_description"].(string)
				if st != http.StatusBadRequest || body["error"] != "invalid_authorization_details" || !strings.Contains(desc, c.desc) {
					t.Fatalf("%d %v, want 400 invalid_authorization_details: %s", st, body, c.desc)
				}
				if n := e.itemCount(t); n != before || e.writes.count() != writes {
					t.Fatalf("a refused push stored something: %d items before, %d after", before, n)
				}
			})
			t.Run("authorize "+c.name, func(t *testing.T) {
				q := url.Values{"client_id": {c.client}, "response_type": {"code"}, "scope": {"openid"}, "state": {"st-rar"},
					"code_challenge": {oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())}, "code_challenge_method": {"S256"},
					"authorization_details": {c.details}}
				to := redirectURI
				if c.client == otherID {
					to = otherURI
				}
				q.Set("redirect_uri", to)
				before, writes := e.itemCount(t), e.writes.count()
				resp := newBrowser(t).open(e.url(httpapi.PathAuthorize) + "?" + q.Encode())
				loc, _ := url.Parse(resp.Header.Get("Location"))
				lq := loc.Query()
				if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc.String(), to) || lq.Get("error") != "invalid_authorization_details" ||
					!strings.Contains(lq.Get("error_description"), c.desc) || lq.Get("state") != "st-rar" {
					t.Fatalf("answered %d %.300s, want a redirect with invalid_authorization_details: %s", resp.StatusCode, loc, c.desc)
				}
				if n := e.itemCount(t); n != before || e.writes.count() != writes {
					t.Fatalf("a refused request stored something: %d items before, %d after", before, n)
				}
			})
		}
	})
}
