package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingHandler counts the requests that get through.
type countingHandler struct{ n atomic.Int64 }

func (h *countingHandler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	h.n.Add(1)
	w.WriteHeader(http.StatusOK)
}

func testLimits() RateLimits {
	return RateLimits{
		Authorize: RateLimit{Rate: 0.001, Burst: 20},
		Pending:   RateLimit{Rate: 0.001, Burst: 8},
		Forms:     RateLimit{Rate: 0.001, Burst: 3},
		Token:     RateLimit{Rate: 0.001, Burst: 5},
		Resource:  RateLimit{Rate: 0.001, Burst: 4},
		Addresses: 100,
		Idle:      time.Minute,
	}
}

// hammer sends n requests at once from addr and returns their recorders.
func hammer(h http.Handler, n int, method, path, addr string) []*httptest.ResponseRecorder {
	out := make([]*httptest.ResponseRecorder, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := httptest.NewRequest(method, path, nil)
			req.RemoteAddr = addr + ":40000"
			out[i] = httptest.NewRecorder()
			<-gate
			h.ServeHTTP(out[i], req)
		}()
	}
	close(gate)
	wg.Wait()
	return out
}

// TestRateLimiter_PerAddressBucketsAnswer429: 60 concurrent requests from one address reach the
// handler only up to each route's burst; the rest get 429 with Retry-After (a JSON error on the
// token endpoints, userinfo and the bank API, a page on the authorization endpoint), and another
// address is not affected.
func TestRateLimiter_PerAddressBucketsAnswer429(t *testing.T) {
	for _, c := range []struct {
		method, path string
		through      int
		json         bool
	}{
		{http.MethodPost, PathToken, 5, true},
		{http.MethodPost, PathRevoke, 5, true},
		{http.MethodPost, PathIntrospect, 5, true},
		{http.MethodPost, PathAuthorize, 3, false},
		{http.MethodGet, PathAuthorize, 8, false}, // the pending cap binds before the rate
		{http.MethodGet, PathUserinfo, 4, true},
		{http.MethodPost, PathUserinfo, 4, true},
		{http.MethodGet, "/v2/bank/accounts", 4, true},
		{http.MethodGet, "/invoicing/invoices", 4, true},
		{http.MethodGet, "/invoicing/invoices/INV-1", 4, true},
		{http.MethodGet, "/invoices/query", 4, true},
		{http.MethodGet, "/invoices/INV-1", 4, true},
	} {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			next := &countingHandler{}
			h := NewRateLimiter(testLimits(), next)
			recs := hammer(h, 60, c.method, c.path, "203.0.113.5")
			if got := next.n.Load(); got != int64(c.through) {
				t.Fatalf("%d of 60 requests reached the handler, want %d", got, c.through)
			}
			for _, rec := range recs {
				if rec.Code == http.StatusOK {
					continue
				}
				if rec.Code != http.StatusTooManyRequests {
					t.Fatalf("answered %d", rec.Code)
				}
				if s, err := strconv.Atoi(rec.Header().Get("Retry-After")); err != nil || s < 1 {
					t.Fatalf("Retry-After %q", rec.Header().Get("Retry-After"))
				}
				var body map[string]string
				isJSON := json.Unmarshal(rec.Body.Bytes(), &body) == nil && body["error"] == "temporarily_unavailable"
				if isJSON != c.json {
					t.Fatalf("429 body %q: JSON error %v, want %v", rec.Body.String(), isJSON, c.json)
				}
			}
			if recs := hammer(h, 1, c.method, c.path, "198.51.100.7"); recs[0].Code != http.StatusOK {
				t.Fatalf("another address was refused: %d", recs[0].Code)
			}
		})
	}
	t.Run("other paths", func(t *testing.T) {
		next := &countingHandler{}
		h := NewRateLimiter(testLimits(), next)
		hammer(h, 60, http.MethodGet, PathJWKS, "203.0.113.5")
		if next.n.Load() != 60 {
			t.Fatalf("%d of 60 JWKS requests got through", next.n.Load())
		}
	})
}

// TestRateLimiter_RateRefusalsDoNotFillThePendingCap: GET /authorize requests refused by the
// rate take nothing from the pending-request cap, so only accepted ones count as pending.
func TestRateLimiter_RateRefusalsDoNotFillThePendingCap(t *testing.T) {
	l := testLimits()
	l.Authorize.Burst, l.Pending.Burst = 10, 25
	h := NewRateLimiter(l, &countingHandler{})
	hammer(h, 50, http.MethodGet, PathAuthorize, "203.0.113.5")
	b := h.buckets("203.0.113.5")
	if got := b.pending.TokensAt(time.Now()); got < 14.9 || got > 15.1 {
		t.Fatalf("the pending cap holds %.1f tokens after 10 accepted requests of 25, want 15", got)
	}
}

// TestRateLimiter_MemoryBounded: a flood of distinct addresses keeps at most Addresses of them.
func TestRateLimiter_MemoryBounded(t *testing.T) {
	h := NewRateLimiter(testLimits(), &countingHandler{})
	for i := range 1000 {
		req := httptest.NewRequest(http.MethodPost, PathToken, nil)
		req.RemoteAddr = fmt.Sprintf("10.0.%d.%d:1", i/256, i%256)
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	if n := h.seen.Len(); n > 100 {
		t.Fatalf("%d addresses tracked, bound 100", n)
	}
}

// bodyHandler reads the whole body and counts the requests that get through, keeping the
// bodies it saw.
type bodyHandler struct {
	mu     sync.Mutex
	bodies []string
}

func (h *bodyHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	h.bodies = append(h.bodies, string(b))
	h.mu.Unlock()
}

// TestRateLimiter_AuthorizationRequestsByPOSTCountAsPending: an authorization request sent by
// POST stores a pending request as a GET does, so 50 at once from one address get through only
// up to the pending cap, with their bodies intact for the handler; the login and consent forms
// (naming a request_id) count against the forms bucket instead.
func TestRateLimiter_AuthorizationRequestsByPOSTCountAsPending(t *testing.T) {
	for _, c := range []struct {
		name, body string
		through    int
	}{
		{"authorization requests", "client_id=app&response_type=code&scope=openid&state=s", 8},
		{"login forms", "request_id=ar_1&csrf_token=t&action=login", 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			next := &bodyHandler{}
			h := NewRateLimiter(testLimits(), next)
			var wg sync.WaitGroup
			codes := make([]int, 50)
			for i := range codes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req := httptest.NewRequest(http.MethodPost, PathAuthorize, strings.NewReader(c.body))
					req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
					req.RemoteAddr = "203.0.113.5:40000"
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					codes[i] = rec.Code
				}()
			}
			wg.Wait()
			if len(next.bodies) != c.through {
				t.Fatalf("%d of 50 reached the handler, want %d", len(next.bodies), c.through)
			}
			for _, b := range next.bodies {
				if b != c.body {
					t.Fatalf("the handler read %q, want the body sent", b)
				}
			}
		})
	}
}

// TestRateLimiter_PushesCountAsPending: a pushed authorization request stores a pending request,
// so 50 pushes at once from one address get through only up to the pending cap, even when the
// token endpoints' bucket would let more through.
func TestRateLimiter_PushesCountAsPending(t *testing.T) {
	l := testLimits()
	l.Token.Burst = 100
	next := &countingHandler{}
	hammer(NewRateLimiter(l, next), 50, http.MethodPost, PathPAR, "203.0.113.5")
	if got := next.n.Load(); got != int64(l.Pending.Burst) {
		t.Fatalf("%d of 50 pushes reached the handler, want the pending cap %d", got, l.Pending.Burst)
	}
}

// TestRateLimiter_RegistrationsAreLimitedPerAddress: 50 racing registrations from one address
// reach the handler only up to the token burst and the pending cap, whichever is smaller (each
// may store a client); a registration's management (GET/PUT/DELETE of its
// registration_client_uri) takes from the token bucket too. The rest are 429.
func TestRateLimiter_RegistrationsAreLimitedPerAddress(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		want         int64
	}{
		{http.MethodPost, PathRegister, 5},
		{http.MethodGet, PathRegister + "/cl_x", 5},
	} {
		next := &countingHandler{}
		rl := NewRateLimiter(testLimits(), next)
		got := hammer(rl, 50, tc.method, tc.path, "198.51.100.7")
		limited := 0
		for _, r := range got {
			if r.Code == http.StatusTooManyRequests {
				limited++
			}
		}
		if next.n.Load() != tc.want || limited != 50-int(tc.want) {
			t.Errorf("%s %s: %d reached the handler, %d were 429, want %d and %d", tc.method, tc.path, next.n.Load(), limited, tc.want, 50-tc.want)
		}
	}
}

// TestRateLimiter_BackchannelRequestsCountAsPending: a CIBA request stores a request as a push
// does, so 50 at once from one address reach the handler only up to the pending cap.
func TestRateLimiter_BackchannelRequestsCountAsPending(t *testing.T) {
	l := testLimits()
	l.Token.Burst = 100
	next := &countingHandler{}
	hammer(NewRateLimiter(l, next), 50, http.MethodPost, PathBackchannel, "203.0.113.6")
	if got := next.n.Load(); got != int64(l.Pending.Burst) {
		t.Fatalf("%d of 50 backchannel requests reached the handler, want the pending cap %d", got, l.Pending.Burst)
	}
}
