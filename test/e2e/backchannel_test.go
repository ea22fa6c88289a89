package e2e

import (
	"context"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/ciba"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/wire"
)

// The backchannel authentication endpoint (CIBA Core 7) over HTTP, on both stores: a client
// starts a request, the customer decides through package ciba (as the bank app page and the
// app backend's callback do), and the client polls the token endpoint.

// cibaService is the app's CIBA use case, as the bank app page and the callback build it.
func (e *env) cibaService(t *testing.T) *ciba.Service {
	t.Helper()
	s, err := wire.CIBA(e.app.Deps())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (e *env) bcAuthorize(t *testing.T, id, secret string, v url.Values, asJSON bool) (int, map[string]any) {
	t.Helper()
	v = url.Values(cloneValues(v))
	v.Set("client_id", id)
	v.Set("client_secret", secret)
	st, body, h := e.post(t, httpapi.PathBackchannel, v, false, asJSON)
	if h.Get("Cache-Control") != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", h.Get("Cache-Control"))
	}
	return st, body
}

func cloneValues(v url.Values) map[string][]string {
	out := map[string][]string{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// TestBackchannel_StartOverHTTPDecideThenPollGetsTokens: a form and a JSON request are both
// answered 200 with auth_req_id, expires_in 120 and interval 5; the customer's pending list
// shows them with their binding messages; the customer's strong approval lets the poll take
// tokens for the customer, and the denied one is access_denied.
func TestBackchannel_StartOverHTTPDecideThenPollGetsTokens(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		id, secret := e.cibaClient(t)
		svc := e.cibaService(t)
		uid := e.uidOf(t, username)
		st, form := e.bcAuthorize(t, id, secret, url.Values{"scope": {"openid email"}, "login_hint": {username}, "binding_message": {"E2E-FORM"}}, false)
		if st != 200 || form["expires_in"] != float64(120) || form["interval"] != float64(5) {
			t.Fatalf("form: %d %v", st, form)
		}
		st, js := e.bcAuthorize(t, id, secret, url.Values{"scope": {"openid"}, "login_hint": {username}, "binding_message": {"E2E-JSON"}}, true)
		if st != 200 {
			t.Fatalf("JSON: %d %v", st, js)
		}
		list, err := svc.Pending(context.Background(), uid)
		if err != nil || len(list) != 2 {
			t.Fatalf("pending: %+v %v", list, err)
		}
		msgs := map[string]string{}
		for _, r := range list {
			msgs[r.Ref] = r.BindingMessage
		}
		approveRef := oauth.BackchannelRequestID(form["auth_req_id"].(string))
		denyRef := oauth.BackchannelRequestID(js["auth_req_id"].(string))
		if msgs[approveRef] != "E2E-FORM" || msgs[denyRef] != "E2E-JSON" {
			t.Fatalf("pending shows %v", msgs)
		}
		now := e.clock.Now()
		if err := svc.Decide(context.Background(), ciba.Decision{Ref: approveRef, UID: uid, Approve: true, AMR: []string{"hwk", "user", "mfa"}, AuthTime: now}); err != nil {
			t.Fatal(err)
		}
		if err := svc.Decide(context.Background(), ciba.Decision{Ref: denyRef, UID: uid}); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(cibaTestInterval * time.Second)
		st, tok := e.cibaPoll(t, id, secret, form["auth_req_id"].(string))
		if st != 200 || tok["scope"] != "openid email" || !e.tokenValid(tok["access_token"].(string)) {
			t.Fatalf("poll of the approved request: %d %v", st, tok)
		}
		if st, body := e.cibaPoll(t, id, secret, js["auth_req_id"].(string)); st != 400 || body["error"] != oauth.ErrCodeAccessDenied {
			t.Fatalf("poll of the denied request: %d %v", st, body)
		}
	})
}

// TestBackchannel_RefusedRequestsWriteNothingAndAnUnknownCustomerIsAnsweredAlike: a hostile
// binding message, a wrong secret, a missing openid scope and a client not registered for
// CIBA each get their error and write nothing; a hint naming nobody is answered as a known
// customer's, with the same writes (two counters, one request).
func TestBackchannel_RefusedRequestsWriteNothingAndAnUnknownCustomerIsAnsweredAlike(t *testing.T) {
	bothStores(t, nil, func(t *testing.T, e *env) {
		id, secret := e.cibaClient(t)
		before := e.writes.count()
		for _, c := range []struct {
			name, secret string
			v            url.Values
			status       int
			code         string
		}{
			{"hostile binding message", secret, url.Values{"scope": {"openid"}, "login_hint": {username}, "binding_message": {`<img src=x onerror=alert(1)>`}}, 400, oauth.ErrCodeInvalidBindingMessage},
			{"wrong secret", "cs1_wrong", url.Values{"scope": {"openid"}, "login_hint": {username}}, 401, oauth.ErrCodeInvalidClient},
			{"no openid", secret, url.Values{"scope": {"email"}, "login_hint": {username}}, 400, oauth.ErrCodeInvalidScope},
			{"two hints", secret, url.Values{"scope": {"openid"}, "login_hint": {username}, "login_hint_token": {"x"}}, 400, oauth.ErrCodeInvalidRequest},
		} {
			if st, body := e.bcAuthorize(t, id, c.secret, c.v, false); st != c.status || body["error"] != c.code {
				t.Errorf("%s: %d %v, want %d %s", c.name, st, body, c.status, c.code)
			}
		}
		if got := e.writes.list()[before:]; len(got) != 0 {
			t.Fatalf("refused requests wrote %v", got)
		}
		answer := func(hint string) (map[string]any, []string) {
			n := e.writes.count()
			st, body := e.bcAuthorize(t, id, secret, url.Values{"scope": {"openid"}, "login_hint": {hint}}, false)
			if st != 200 {
				t.Fatalf("%s: %d %v", hint, st, body)
			}
			return body, e.writes.list()[n:]
		}
		known, kw := answer(username)
		unknown, uw := answer("nobody-at-all")
		if len(known) != len(unknown) || known["expires_in"] != unknown["expires_in"] || known["interval"] != unknown["interval"] ||
			len(known["auth_req_id"].(string)) != len(unknown["auth_req_id"].(string)) || !reflect.DeepEqual(kw, uw) {
			t.Fatalf("known %v (writes %v) and unknown %v (writes %v) differ", known, kw, unknown, uw)
		}
	})
}
