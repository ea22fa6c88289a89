// Package outbound POSTs to URLs that clients registered (a backchannel_logout_uri, a
// backchannel_client_notification_endpoint): https only, public addresses only (checked at the
// dial, shared/jwksuri), no proxy, no redirect followed, a bounded answer read, each attempt
// and the whole bounded, and a failing server retried a bounded number of times. Logout's
// Sender and CIBA's Pinger are this one poster with their own bodies.
package outbound

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/acmebank/authserver/shared/jwksuri"
)

// Defaults of Options.
const (
	// Bound is the most all the attempts of one delivery take, retries included (the caller
	// may bound it further with its context).
	Bound = 5 * time.Second
	// AttemptTimeout bounds one POST (connection, TLS, answer).
	AttemptTimeout = 2 * time.Second
	// Attempts is how many times a delivery is tried when the server fails (a network error
	// or a 5xx); a 4xx or a redirect is its answer, and not retried.
	Attempts = 3
	// Backoff is the wait before the second attempt; it doubles before each later one.
	Backoff = 200 * time.Millisecond
	// maxAnswer bounds what is read of an answer (it is discarded).
	maxAnswer = 4 << 10
)

// Options vary a Poster; the zero value is the deployment's.
type Options struct {
	// AllowPrivate lets a URL resolve to any address: for tests whose receivers listen on
	// loopback, never in a deployment (AUTH_JWKS_URI_ALLOW_PRIVATE, the one setting of
	// outbound calls to client-registered URLs).
	AllowPrivate bool
	// RootCAs are the CAs a receiver's certificate must chain to; nil is the system's.
	RootCAs *x509.CertPool
	// Bound, AttemptTimeout, Attempts and Backoff override the defaults.
	Bound, AttemptTimeout, Backoff time.Duration
	Attempts                       int
}

// Poster makes bounded POSTs to client-registered https URLs.
type Poster struct {
	client   *http.Client
	bound    time.Duration
	attempts int
	backoff  time.Duration
}

// New returns a Poster with o.
func New(o Options) *Poster {
	p := &Poster{bound: Bound, attempts: Attempts, backoff: Backoff}
	timeout := AttemptTimeout
	if o.Bound > 0 {
		p.bound = o.Bound
	}
	if o.Attempts > 0 {
		p.attempts = o.Attempts
	}
	if o.Backoff > 0 {
		p.backoff = o.Backoff
	}
	if o.AttemptTimeout > 0 {
		timeout = o.AttemptTimeout
	}
	transport := &http.Transport{
		Proxy:                  nil, // a proxy would be the address dialled, not the client's
		DialContext:            jwksuri.Dialer(o.AllowPrivate, timeout).DialContext,
		TLSClientConfig:        &tls.Config{RootCAs: o.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    timeout,
		ResponseHeaderTimeout:  timeout,
		MaxResponseHeaderBytes: 16 << 10,
		DisableKeepAlives:      true,
	}
	p.client = &http.Client{Transport: transport, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return errRedirect }}
	return p
}

// Bound is the bound of one delivery's attempts.
func (p *Poster) Bound() time.Duration { return p.bound }

// Message is one delivery: what is posted, where, and which answers deliver it.
type Message struct {
	// Name names the URL in errors ("the backchannel_logout_uri"); the URL's query and the
	// body are never in an error.
	Name string
	URL  string
	// ContentType and Body are the request's; Bearer, when set, is sent as
	// Authorization: Bearer (RFC 6750 2.1).
	ContentType string
	Body        string
	Bearer      string
	// Delivered says which status is a delivery; nil is any 2xx.
	Delivered func(status int) bool
}

var errRedirect = errors.New("answered with a redirect, which is not followed")

// errFinal marks a failure that another attempt would not change.
type errFinal struct{ error }

// Post POSTs m until an answer delivers it, an answer says no (4xx, a redirect, another
// status Delivered refuses below 500), the attempts run out, the bound runs out or ctx ends;
// it returns the attempts made. Errors never carry the body or the bearer token.
func (p *Poster) Post(ctx context.Context, m Message) (int, error) {
	u, err := url.Parse(m.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return 0, fmt.Errorf("%s is not an https URL", m.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, p.bound)
	defer cancel()
	wait := p.backoff
	var last error
	for n := 1; n <= p.attempts; n++ {
		last = p.post(ctx, m)
		var final errFinal
		if last == nil || errors.As(last, &final) || ctx.Err() != nil {
			return n, unwrapFinal(last)
		}
		if n == p.attempts {
			break
		}
		select {
		case <-ctx.Done():
			return n, fmt.Errorf("%w (then the bound ran out)", last)
		case <-time.After(wait):
		}
		wait *= 2
	}
	return p.attempts, last
}

func unwrapFinal(err error) error {
	var final errFinal
	if errors.As(err, &final) {
		return final.error
	}
	return err
}

// post makes one attempt.
func (p *Poster) post(ctx context.Context, m Message) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.URL, strings.NewReader(m.Body))
	if err != nil {
		return errFinal{fmt.Errorf("%s cannot be requested", m.Name)}
	}
	req.Header.Set("Content-Type", m.ContentType)
	if m.Bearer != "" {
		req.Header.Set("Authorization", "Bearer "+m.Bearer)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		if errors.Is(err, jwksuri.ErrNotPublic) {
			return errFinal{jwksuri.ErrNotPublic}
		}
		if errors.Is(err, errRedirect) {
			return errFinal{fmt.Errorf("%s %w", m.Name, errRedirect)}
		}
		// A url.Error names the URL, never the body or the headers.
		return fmt.Errorf("post to %s: %w", m.Name, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
	resp.Body.Close()
	delivered := m.Delivered
	if delivered == nil {
		delivered = func(status int) bool { return status >= 200 && status < 300 }
	}
	switch {
	case delivered(resp.StatusCode):
		return nil
	case resp.StatusCode >= 500:
		return fmt.Errorf("%s answered %d", m.Name, resp.StatusCode)
	default:
		return errFinal{fmt.Errorf("%s answered %d", m.Name, resp.StatusCode)}
	}
}
