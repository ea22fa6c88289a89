package outbound_test

import (
	"context"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/logout"
	"github.com/acmebank/authserver/shared/outbound"
)

func tlsReceiver(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32, *x509.CertPool) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	return srv, &n, roots
}

// TestPost_RedirectIsAnAnswerNotFollowed: a redirect is the server's answer: not followed
// (its target gets nothing) and not retried.
func TestPost_RedirectIsAnAnswerNotFollowed(t *testing.T) {
	target, targetHits, _ := tlsReceiver(t, func(w http.ResponseWriter, r *http.Request) {})
	srv, hits, roots := tlsReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
	})
	p := outbound.New(outbound.Options{AllowPrivate: true, RootCAs: roots, Backoff: time.Millisecond})
	n, err := p.Post(context.Background(), outbound.Message{Name: "the endpoint", URL: srv.URL, ContentType: "application/json", Body: "{}"})
	if err == nil || n != 1 || hits.Load() != 1 || targetHits.Load() != 0 {
		t.Fatalf("Post = %d, %v; %d requests, %d to the redirect's target", n, err, hits.Load(), targetHits.Load())
	}
}

// TestPost_TheBoundEndsTheRetries: a server that never answers within the attempt's timeout
// costs at most the bound, whatever the attempts left.
func TestPost_TheBoundEndsTheRetries(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	srv, _, roots := tlsReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	p := outbound.New(outbound.Options{AllowPrivate: true, RootCAs: roots, Attempts: 10, AttemptTimeout: 200 * time.Millisecond,
		Backoff: 10 * time.Millisecond, Bound: 500 * time.Millisecond})
	start := time.Now()
	n, err := p.Post(context.Background(), outbound.Message{Name: "the endpoint", URL: srv.URL, ContentType: "application/json"})
	if took := time.Since(start); err == nil || n >= 10 || took > 900*time.Millisecond {
		t.Fatalf("Post = %d attempts, %v after %v; want a failure within the 500 ms bound", n, err, took)
	}
}

// TestDefaults_AreBackChannelLogoutsBounds: the poster's defaults (CIBA's ping) are the
// bounds back-channel logout documents.
func TestDefaults_AreBackChannelLogoutsBounds(t *testing.T) {
	if outbound.Bound != logout.Bound || outbound.AttemptTimeout != logout.AttemptTimeout ||
		outbound.Attempts != logout.Attempts || outbound.Backoff != logout.Backoff {
		t.Fatal("outbound's defaults differ from logout's bounds")
	}
	if outbound.Attempts != 3 || outbound.AttemptTimeout != 2*time.Second || outbound.Bound != 5*time.Second {
		t.Fatalf("defaults %d attempts, %v each, %v in all; docs/api.md says 3, 2 s, 5 s", outbound.Attempts, outbound.AttemptTimeout, outbound.Bound)
	}
}
