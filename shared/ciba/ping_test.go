package ciba_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/ciba"
	"github.com/acmebank/authserver/shared/jwksuri"
	"github.com/acmebank/authserver/shared/outbound"
)

const (
	pingToken = "client-notification-token-secret"
	pingReqID = "ciba_secret-auth-req-id"
)

// pingReceiver is a client's notification endpoint over TLS answering status to each ping
// after the first fail ones, recording what it got.
type pingReceiver struct {
	srv          *httptest.Server
	hits         atomic.Int32
	auth, ctype  atomic.Value
	body         atomic.Value
	fail, status int
}

func newPingReceiver(t *testing.T, fail, status int) *pingReceiver {
	t.Helper()
	rc := &pingReceiver{fail: fail, status: status}
	rc.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := rc.hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		rc.auth.Store(r.Header.Get("Authorization"))
		rc.ctype.Store(r.Header.Get("Content-Type"))
		rc.body.Store(string(b))
		if int(n) <= rc.fail {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(rc.status)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *pingReceiver) pinger(allowPrivate bool) *ciba.HTTPPinger {
	roots := x509.NewCertPool()
	roots.AddCert(rc.srv.Certificate())
	return ciba.NewHTTPPinger(outbound.Options{AllowPrivate: allowPrivate, RootCAs: roots,
		Attempts: 3, Backoff: time.Millisecond, AttemptTimeout: time.Second, Bound: 3 * time.Second})
}

// TestPing_PostsTheAuthReqIDWithTheClientsBearerToken: the ping is one POST of
// {"auth_req_id": …} as JSON with Authorization: Bearer <client_notification_token> (CIBA
// Core 10.2); 204, 200 and any other 2xx deliver it.
func TestPing_PostsTheAuthReqIDWithTheClientsBearerToken(t *testing.T) {
	for _, status := range []int{http.StatusNoContent, http.StatusOK, http.StatusAccepted} {
		rc := newPingReceiver(t, 0, status)
		if err := rc.pinger(true).Ping(context.Background(), rc.srv.URL+"/cb", pingToken, pingReqID); err != nil {
			t.Fatalf("%d: %v", status, err)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(rc.body.Load().(string)), &got); err != nil || len(got) != 1 || got["auth_req_id"] != pingReqID {
			t.Fatalf("%d: body %q (%v), want {\"auth_req_id\":%q}", status, rc.body.Load(), err, pingReqID)
		}
		if rc.auth.Load() != "Bearer "+pingToken || rc.ctype.Load() != "application/json" || rc.hits.Load() != 1 {
			t.Fatalf("%d: Authorization %q, Content-Type %q, %d requests", status, rc.auth.Load(), rc.ctype.Load(), rc.hits.Load())
		}
	}
}

// TestPing_RetriesAFailingServerWithinTheBoundAndStopsAtAnAnswer: a 5xx is retried up to the
// attempts (delivered when a later one succeeds); a 4xx is the client's answer, not retried;
// no error carries the token or the auth_req_id.
func TestPing_RetriesAFailingServerWithinTheBoundAndStopsAtAnAnswer(t *testing.T) {
	for _, c := range []struct {
		name         string
		fail, status int
		requests     int32
		delivered    bool
	}{
		{"5xx then 204", 2, http.StatusNoContent, 3, true},
		{"always 5xx", 5, http.StatusNoContent, 3, false},
		{"401", 0, http.StatusUnauthorized, 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc := newPingReceiver(t, c.fail, c.status)
			err := rc.pinger(true).Ping(context.Background(), rc.srv.URL, pingToken, pingReqID)
			if (err == nil) != c.delivered || rc.hits.Load() != c.requests {
				t.Fatalf("Ping = %v after %d requests; want delivered %v after %d", err, rc.hits.Load(), c.delivered, c.requests)
			}
			if err != nil && (strings.Contains(err.Error(), pingToken) || strings.Contains(err.Error(), pingReqID)) {
				t.Fatalf("the error carries a secret: %v", err)
			}
		})
	}
}

// TestPing_RefusesPlainHTTPAndPrivateAddresses: an http endpoint is refused before any
// request; with the deployment's rule a loopback endpoint is refused at the dial and gets
// nothing.
func TestPing_RefusesPlainHTTPAndPrivateAddresses(t *testing.T) {
	rc := newPingReceiver(t, 0, http.StatusNoContent)
	p := rc.pinger(false)
	if err := p.Ping(context.Background(), strings.Replace(rc.srv.URL, "https", "http", 1), pingToken, pingReqID); err == nil {
		t.Fatal("an http endpoint was pinged")
	}
	err := p.Ping(context.Background(), rc.srv.URL, pingToken, pingReqID)
	if err == nil || !strings.Contains(err.Error(), jwksuri.ErrNotPublic.Error()) || rc.hits.Load() != 0 {
		t.Fatalf("loopback: %v, %d requests", err, rc.hits.Load())
	}
}
