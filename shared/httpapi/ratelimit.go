package httpapi

import (
	"bytes"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"golang.org/x/time/rate"
)

// RateLimit is one token bucket: Rate requests per second on average, Burst at once.
type RateLimit struct {
	Rate  rate.Limit
	Burst int
}

// RateLimits are the local server's per-address limits. In AWS, API Gateway's route throttles
// and WAF rate-based rules do this job in front of the functions (docs/deploy.md).
type RateLimits struct {
	// Authorize bounds GET /authorize: each one stores a pending request.
	Authorize RateLimit
	// Pending bounds the pending requests an address can have started within one request
	// lifetime (GET /authorize, an authorization request sent by POST, and PAR): a bucket of
	// Burst refilled at Burst per lifetime, so an address never holds more than twice Burst
	// pending requests, each at most oauth.MaxAuthRequestBytes as stored.
	Pending RateLimit
	// Forms bounds the login and consent forms (POST /authorize): each login is a password check.
	Forms RateLimit
	// Token bounds the token, revocation and introspection endpoints.
	Token RateLimit
	// Resource bounds userinfo and the bank API routes: each call is a token read, and a
	// DPoP-bound one a write.
	Resource RateLimit
	// Addresses is how many client addresses are tracked at once (least recently seen are
	// forgotten first); Idle is how long an address's buckets are kept after its last request.
	Addresses int
	Idle      time.Duration
}

// DefaultRateLimits are generous for a person or an application and stop one address from
// flooding the server. requestTTL is the pending requests' lifetime.
func DefaultRateLimits(requestTTL time.Duration) RateLimits {
	const pending = 300
	return RateLimits{
		Authorize: RateLimit{Rate: 10, Burst: 30},
		Pending:   RateLimit{Rate: rate.Limit(float64(pending) / max(requestTTL.Seconds(), 1)), Burst: pending},
		Forms:     RateLimit{Rate: 2, Burst: 10},
		Token:     RateLimit{Rate: 20, Burst: 50},
		Resource:  RateLimit{Rate: 20, Burst: 50},
		Addresses: 10000,
		Idle:      10 * time.Minute,
	}
}

// addressBuckets are one address's buckets.
type addressBuckets struct {
	authorize, pending, forms, token, resource *rate.Limiter
}

// RateLimiter answers 429 with Retry-After to an address that exceeds its limits, before the
// request reaches a handler (so it stores nothing and checks no password). Its memory is
// bounded: an expiring LRU (hashicorp/golang-lru) of at most Addresses entries.
type RateLimiter struct {
	limits RateLimits
	next   http.Handler
	seen   *expirable.LRU[string, *addressBuckets]
	mu     sync.Mutex // creates an address's buckets once
}

// NewRateLimiter puts limits in front of next.
func NewRateLimiter(limits RateLimits, next http.Handler) *RateLimiter {
	return &RateLimiter{limits: limits, next: next, seen: expirable.NewLRU[string, *addressBuckets](max(limits.Addresses, 1), nil, limits.Idle)}
}

func (l *RateLimiter) buckets(addr string) *addressBuckets {
	if b, ok := l.seen.Get(addr); ok {
		return b
	}
	// The first requests of an address may race: one of them creates its buckets.
	l.mu.Lock()
	defer l.mu.Unlock()
	if b, ok := l.seen.Get(addr); ok {
		return b
	}
	lim := func(r RateLimit) *rate.Limiter { return rate.NewLimiter(r.Rate, r.Burst) }
	b := &addressBuckets{lim(l.limits.Authorize), lim(l.limits.Pending), lim(l.limits.Forms), lim(l.limits.Token), lim(l.limits.Resource)}
	l.seen.Add(addr, b)
	return b
}

func (l *RateLimiter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var which []*rate.Limiter
	var b *addressBuckets
	switch r.URL.Path {
	case PathAuthorize:
		b = l.buckets(ClientIP(r))
		if r.Method == http.MethodPost && !startsRequest(r) {
			which = []*rate.Limiter{b.forms}
		} else {
			// A GET, or an authorization request sent by POST: each stores a pending request.
			which = []*rate.Limiter{b.authorize, b.pending}
		}
	case PathToken, PathRevoke, PathRevokeLegacy, PathIntrospect:
		b = l.buckets(ClientIP(r))
		which = []*rate.Limiter{b.token}
	case PathPAR: // authenticated as the token endpoint, and it stores a request as authorize does
		b = l.buckets(ClientIP(r))
		which = []*rate.Limiter{b.token, b.pending}
	case PathBackchannel: // CIBA: authenticated as the token endpoint, and it stores a request
		b = l.buckets(ClientIP(r))
		which = []*rate.Limiter{b.token, b.pending}
	case PathRegister: // dynamic registration: a token or statement checked, a client stored
		b = l.buckets(ClientIP(r))
		which = []*rate.Limiter{b.token, b.pending}
	default:
		if strings.HasPrefix(r.URL.Path, PathRegister+"/") { // a registration's management
			b = l.buckets(ClientIP(r))
			which = []*rate.Limiter{b.token}
			break
		}
		if !isResourcePath(r.URL.Path) {
			l.next.ServeHTTP(w, r)
			return
		}
		b = l.buckets(ClientIP(r))
		which = []*rate.Limiter{b.resource}
	}
	// Buckets are taken in order: a request refused by the rate takes nothing from the
	// pending cap; one refused by the pending cap has spent its rate token (a flood keeps its
	// own rate bucket empty). AllowN never lends: a refused request leaves no debt behind.
	now := time.Now()
	for _, lim := range which {
		if !lim.AllowN(now, 1) {
			tooMany(w, r, wait(lim, now))
			return
		}
	}
	l.next.ServeHTTP(w, r)
}

// startsRequest reports whether a POST to the authorization endpoint is an authorization
// request (OIDC Core 3.1.2.1), which stores a pending request as a GET does, rather than the
// answer of a login or consent form (which names its pending request_id). It reads the form
// the handler will read, at most MaxBodyBytes of it, and puts it back.
func startsRequest(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return false // refused by the handler (readForm) before anything is stored
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	if err != nil || len(body) > MaxBodyBytes {
		return false // refused by the handler
	}
	v, err := url.ParseQuery(string(body))
	return err == nil && v.Get("request_id") == ""
}

// isResourcePath reports whether path is userinfo or a bank API route (bankRoutes).
func isResourcePath(path string) bool {
	return path == PathUserinfo || isBankAPIPath(path)
}

// wait is how long until lim has a token again.
func wait(lim *rate.Limiter, now time.Time) time.Duration {
	if lim.Limit() <= 0 {
		return time.Minute
	}
	missing := 1 - lim.TokensAt(now)
	return time.Duration(missing / float64(lim.Limit()) * float64(time.Second))
}

// tooMany answers 429 with Retry-After: a JSON error on the token endpoints (RFC 6749 5.2's
// shape), a short plain page on the authorization endpoint.
func tooMany(w http.ResponseWriter, r *http.Request, delay time.Duration) {
	secs := max(int((delay+time.Second-1)/time.Second), 1)
	h := w.Header()
	h.Set("Retry-After", strconv.Itoa(secs))
	h.Set("Cache-Control", "no-store")
	if r.URL.Path == PathAuthorize {
		PageSecurityHeaders(h, "")
		http.Error(w, "Too many requests from your address. Wait "+strconv.Itoa(secs)+" s, then go back and try again.", http.StatusTooManyRequests)
		return
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	w.Write([]byte(`{"error":"temporarily_unavailable","error_description":"too many requests from this address, retry later"}`))
}
