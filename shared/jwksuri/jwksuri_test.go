package jwksuri

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// tlsHost is an httptest TLS server on loopback answering f, counting its requests, and the
// pool that trusts it.
func tlsHost(t *testing.T, f http.HandlerFunc) (*httptest.Server, *atomic.Int64, *x509.CertPool) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		f(w, r)
	}))
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return srv, &hits, pool
}

const set = `{"keys":[]}`

// TestFetch_ReturnsTheBodyOfAnHTTPSAnswer: the fetcher gets the key set over https (a test
// host on loopback, allowed by the test setting) and returns it as is.
func TestFetch_ReturnsTheBodyOfAnHTTPSAnswer(t *testing.T) {
	srv, _, pool := tlsHost(t, func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(set)) })
	got, err := New(Options{AllowPrivate: true, RootCAs: pool}).FetchJWKS(context.Background(), srv.URL+"/jwks")
	if err != nil || string(got) != set {
		t.Fatalf("%s %v", got, err)
	}
}

// TestFetch_RefusesWhatCouldDoHarm: without the test setting a loopback host is refused at the
// dial, whether named by address or by a name that resolves to it, and never reached; plain
// http, a redirect (whose target is never requested), a body over MaxBody, an answer other
// than 200 and a certificate the fetcher does not trust are refused.
func TestFetch_RefusesWhatCouldDoHarm(t *testing.T) {
	var targetHits atomic.Int64
	target := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		targetHits.Add(1)
		w.Write([]byte(set))
	}))
	defer target.Close()
	big := `{"keys":[],"x":"` + strings.Repeat("x", MaxBody) + `"}`
	for _, tc := range []struct {
		name    string
		serve   http.HandlerFunc
		path    func(url string) string
		private bool
		noTrust bool
		want    string
	}{
		{name: "loopback by address", want: "not public"},
		{name: "loopback by name", path: func(u string) string { return strings.Replace(u, "127.0.0.1", "localhost", 1) }, want: "not public"},
		{name: "plain http", private: true, path: func(u string) string { return strings.Replace(u, "https:", "http:", 1) }, want: "https"},
		{name: "a redirect", private: true, want: "redirect", serve: func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL, http.StatusFound)
		}},
		{name: "a large body with its length", private: true, want: "larger than 64 KiB", serve: func(w http.ResponseWriter, _ *http.Request) {
			w.Write([]byte(big))
		}},
		{name: "a large body without its length", private: true, want: "larger than 64 KiB", serve: func(w http.ResponseWriter, _ *http.Request) {
			w.Write([]byte(big[:1024]))
			w.(http.Flusher).Flush() // chunked: no Content-Length
			w.Write([]byte(big[1024:]))
		}},
		{name: "a 404", private: true, want: "404", serve: func(w http.ResponseWriter, _ *http.Request) { http.NotFound(w, nil) }},
		{name: "an untrusted certificate", private: true, noTrust: true, want: "certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.serve == nil {
				tc.serve = func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(set)) }
			}
			srv, hits, pool := tlsHost(t, tc.serve)
			u := srv.URL + "/jwks"
			if tc.path != nil {
				u = tc.path(u)
			}
			if tc.noTrust {
				pool = nil
			}
			got, err := New(Options{AllowPrivate: tc.private, RootCAs: pool}).FetchJWKS(context.Background(), u)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%s: %q %v, want an error saying %q", u, got, err, tc.want)
			}
			if tc.want == "not public" && (!errors.Is(err, ErrNotPublic) || hits.Load() != 0) {
				t.Fatalf("%v; the host was reached %d times", err, hits.Load())
			}
		})
	}
	if targetHits.Load() != 0 {
		t.Fatal("a redirect was followed")
	}
}

// TestPublic_RefusesEveryNonPublicRange: what the dial refuses (the IANA special-purpose
// registries) and what it lets through.
func TestPublic_RefusesEveryNonPublicRange(t *testing.T) {
	for _, a := range []string{"127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "0.0.0.0", "0.1.2.3",
		"100.64.0.1", "192.0.0.1", "192.0.2.1", "198.18.0.1", "198.51.100.1", "203.0.113.1", "240.0.0.1", "255.255.255.255",
		"224.0.0.1", "::1", "::", "fe80::1", "fc00::1", "fd12::1", "ff02::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1",
		"64:ff9b::a00:1", "2001:db8::1", "2002:a00:1::1", "2001::1", "fec0::1", "100::1"} {
		if Public(netip.MustParseAddr(a)) {
			t.Errorf("%s is public", a)
		}
	}
	for _, a := range []string{"8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111", "2a00:1450:4001:80b::200e", "::ffff:8.8.8.8"} {
		if !Public(netip.MustParseAddr(a)) {
			t.Errorf("%s is not public", a)
		}
	}
}

// TestFetch_GivesUpAfterTheTimeout: a host that never answers fails the fetch within Timeout
// (and a little), instead of holding the client's request.
func TestFetch_GivesUpAfterTheTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv, _, pool := tlsHost(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	start := time.Now()
	_, err := New(Options{AllowPrivate: true, RootCAs: pool}).FetchJWKS(context.Background(), srv.URL+"/jwks")
	if took := time.Since(start); err == nil || took < Timeout-time.Second || took > Timeout+2*time.Second {
		t.Fatalf("%v after %v, want a failure after about %v", err, took, Timeout)
	}
}
