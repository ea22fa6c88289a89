package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/app"
	"github.com/acmebank/authserver/shared/authn"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/seed"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// TestServer_StorageFloodKeepsTheDataFileBounded is the short version of test/abuse's storage
// floods: for three seconds (longer under the race detector, until the cap has refused one),
// 16 workers from rotating loopback addresses (each request a new address to the per-address
// limits) send the local server authorization requests with 900 KB of ui_locales, acr_values
// and prompt, pushed requests with 60 KB of them, and (most) requests with the free-text
// parameters at their limits. The oversized ones are refused, the largest valid ones stop at
// the pending cap (AUTH_EMBEDDED_MAX_PENDING_MB=1, then 503), and the data file stays under
// 8 MB.
func TestServer_StorageFloodKeepsTheDataFileBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3 s flood")
	}
	dir := t.TempDir()
	vars := map[string]string{config.EnvBaseURL: "http://127.0.0.1:8080", config.EnvDataDir: dir,
		config.EnvMaxPendingMB: "1", config.EnvNoSync: "true"}
	cfg, err := config.FromLookup(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := app.New(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	const clientID, secret, redirect = "flood-client", "flood-secret-0123456789abcdef", "http://127.0.0.1:4499/callback"
	f := &seed.File{Clients: []seed.Client{{ClientID: clientID, ClientSecret: secret, Name: "Flood",
		RedirectURIs: []string{redirect}, Scopes: []string{"openid"}}}}
	if _, err := seed.Load(context.Background(), a.Store, f, authn.PasswordHasher{Time: 1, MemoryKiB: 64, Threads: 1}, time.Now()); err != nil {
		t.Fatal(err)
	}
	mux, err := a.Mux()
	if err != nil {
		t.Fatal(err)
	}
	h := serverHandler(context.Background(), a, log, mux)

	fields := func(n int) url.Values {
		return url.Values{"ui_locales": {strings.Repeat("fr ", n/9)}, "acr_values": {strings.Repeat("a ", n/6)}, "prompt": {strings.Repeat("login ", n/18)}}
	}
	atLimits := url.Values{}
	for _, l := range oauth.AuthorizeParamLimits() {
		switch l.Name {
		case "state", "nonce", "ui_locales", "acr_values":
			atLimits.Set(l.Name, strings.Repeat("x", l.Max))
		}
	}
	base := func(extra url.Values) url.Values {
		q := url.Values{"client_id": {clientID}, "redirect_uri": {redirect}, "response_type": {"code"}, "scope": {"openid"}, "state": {"st"}}
		for k, v := range extra {
			q[k] = v
		}
		return q
	}
	hugeURL := httpapi.PathAuthorize + "?" + base(fields(900<<10)).Encode()
	atLimitsURL := httpapi.PathAuthorize + "?" + base(atLimits).Encode()
	parBody := base(fields(60 << 10)).Encode()
	// One request in sixteen is a 900 KB one and one a 60 KB push; the others are the largest
	// valid requests, which the pending cap stops.
	request := func(i int64) *http.Request {
		var req *http.Request
		switch i % 16 {
		case 0:
			req = httptest.NewRequest(http.MethodGet, hugeURL, nil)
		case 1:
			req = httptest.NewRequest(http.MethodPost, httpapi.PathPAR, strings.NewReader(parBody))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.SetBasicAuth(clientID, secret)
		default:
			req = httptest.NewRequest(http.MethodGet, atLimitsURL, nil)
		}
		req.RemoteAddr = fmt.Sprintf("127.%d.%d.%d:40000", 1+(i>>16)%254, byte(i>>8), byte(i))
		return req
	}
	var n atomic.Int64
	var mu sync.Mutex
	statuses := map[int]int{}
	// Three seconds, or longer on a slow machine (the race detector) until the cap has refused
	// a request, but never more than 30 s or 100,000 requests.
	start := time.Now()
	var refused atomic.Bool
	going := func(i int64) bool {
		since := time.Since(start)
		return i < 100_000 && since < 30*time.Second && (since < 3*time.Second || !refused.Load())
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := n.Add(1); going(i); i = n.Add(1) {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, request(i))
				if rec.Code == http.StatusServiceUnavailable {
					refused.Store(true)
				}
				mu.Lock()
				statuses[rec.Code]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	st, err := os.Stat(filepath.Join(dir, embedded.FileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d requests in %v, statuses %v, data file %.2f MB", n.Load(), time.Since(start).Round(time.Millisecond), statuses, float64(st.Size())/1e6)
	if st.Size() > 8<<20 {
		t.Fatalf("the data file grew to %.2f MB, want under 8 MB", float64(st.Size())/1e6)
	}
	if statuses[http.StatusServiceUnavailable] == 0 {
		t.Fatalf("the pending cap never refused a request: %v", statuses)
	}
}

// TestMaintain_SweepsExpiredRequestsWithinAMinute: the local server's maintenance removes the
// embedded store's expired pending requests at every sweep, and sweeps every 30 s at most, so
// a flood's requests are gone within a minute of their expiry.
func TestMaintain_SweepsExpiredRequestsWithinAMinute(t *testing.T) {
	if sweepEvery > 30*time.Second {
		t.Fatalf("the server sweeps every %v, want 30 s at most", sweepEvery)
	}
	a := localApp(t, t.TempDir())
	st := a.Store.(*embedded.Store)
	past := time.Now().Add(-time.Second)
	for i := range 50 {
		r := oauth.AuthRequest{ID: fmt.Sprintf("ar_%02d", i), ClientID: "app", CSRFHash: "h", CreatedAt: past.Add(-time.Minute), ExpiresAt: past}
		if err := st.PutAuthRequest(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	defer a.Close()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		maintain(ctx, a, time.Hour, 20*time.Millisecond)
	}()
	defer func() { cancel(); <-stopped }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := st.PendingBytes()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes of expired requests left after 5 s of sweeps every 20 ms", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
