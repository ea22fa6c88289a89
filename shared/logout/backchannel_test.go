package logout_test

import (
	"context"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/jwksuri"
	"github.com/acmebank/authserver/shared/logout"
)

// receiver is an https receiver answering status, counting what it gets.
func receiver(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func sender(srv *httptest.Server, allowPrivate bool) *logout.Sender {
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	return logout.NewSender(logout.SenderOptions{AllowPrivate: allowPrivate, RootCAs: roots, Attempts: 3, Backoff: time.Millisecond, AttemptTimeout: time.Second, Bound: 3 * time.Second})
}

const token = "eyJ.secret-logout-token.sig"

// TestSend_AnswersDecideTheRetries: 200 and 204 are delivered at once; a 5xx is retried up to
// the attempts; a 4xx and a redirect are the client's answer, not retried, and the redirect's
// target gets nothing; no error carries the token.
func TestSend_AnswersDecideTheRetries(t *testing.T) {
	target, targetHits := receiver(t, func(w http.ResponseWriter, r *http.Request) {})
	for _, c := range []struct {
		name     string
		answer   http.HandlerFunc
		attempts int
		ok       bool
	}{
		{"200", func(w http.ResponseWriter, r *http.Request) {}, 1, true},
		{"204", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }, 1, true},
		{"503", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }, 3, false},
		{"400", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadRequest) }, 1, false},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
		}, 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, hits := receiver(t, c.answer)
			n, err := sender(srv, true).Send(context.Background(), srv.URL+"/bc", token)
			if (err == nil) != c.ok || n != c.attempts || int(hits.Load()) != c.attempts {
				t.Fatalf("Send = %d, %v with %d requests; want %d attempts, ok %v", n, err, hits.Load(), c.attempts, c.ok)
			}
			if err != nil && strings.Contains(err.Error(), token) {
				t.Fatalf("the error carries the token: %v", err)
			}
		})
	}
	if targetHits.Load() != 0 {
		t.Fatal("a redirect was followed")
	}
}

// TestSend_RefusesPlainHTTPAndPrivateAddresses: an http URL is refused before any request; with
// the deployment's rule a loopback receiver is refused at the dial (jwksuri.ErrNotPublic), once,
// and gets nothing.
func TestSend_RefusesPlainHTTPAndPrivateAddresses(t *testing.T) {
	srv, hits := receiver(t, func(w http.ResponseWriter, r *http.Request) {})
	s := sender(srv, false)
	if n, err := s.Send(context.Background(), strings.Replace(srv.URL, "https", "http", 1), token); err == nil || n != 0 {
		t.Fatalf("http: %d, %v", n, err)
	}
	n, err := s.Send(context.Background(), srv.URL, token)
	if err == nil || !strings.Contains(err.Error(), jwksuri.ErrNotPublic.Error()) || n != 1 || hits.Load() != 0 {
		t.Fatalf("loopback: %d attempts, %v, %d requests", n, err, hits.Load())
	}
}

// TestNew_NamesEveryMissingDependency: an empty Deps names each required dependency.
func TestNew_NamesEveryMissingDependency(t *testing.T) {
	_, err := logout.New(logout.Deps{})
	if err == nil {
		t.Fatal("New accepted empty Deps")
	}
	for _, want := range []string{"Clients", "Interactions", "Grants", "Keys", "Signer", "Sender", "Clock", "Issuer", "Log"} {
		if !strings.Contains(err.Error(), "missing "+want) {
			t.Errorf("%v does not name %s", err, want)
		}
	}
}
