package logout

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

// Delivery bounds (Back-Channel Logout 1.0 2.5 leaves them to the OP). They run inside the
// customer's logout request on the authorize function, whose timeout (template.yaml, 10 s)
// covers Bound with room for the store and the signature: no queue, no other function, and a
// client that does not answer costs the customer at most Bound.
const (
	// Bound is the most all the deliveries of one logout take, retries included.
	Bound = 5 * time.Second
	// AttemptTimeout bounds one POST (connection, TLS, answer).
	AttemptTimeout = 2 * time.Second
	// Attempts is how many times a delivery is tried when the client's server fails (a
	// network error or a 5xx); a 4xx or a redirect is its answer, and not retried.
	Attempts = 3
	// Backoff is the wait before the second attempt; it doubles before each later one.
	Backoff = 200 * time.Millisecond
	// maxAnswer bounds what is read of a client's answer (it is discarded).
	maxAnswer = 4 << 10
)

// SenderOptions vary a Sender; the zero value is the deployment's.
type SenderOptions struct {
	// AllowPrivate lets a backchannel_logout_uri resolve to any address: for tests whose
	// receivers listen on loopback, never in a deployment (AUTH_JWKS_URI_ALLOW_PRIVATE, the
	// one setting of outbound calls to client-registered URLs).
	AllowPrivate bool
	// RootCAs are the CAs a receiver's certificate must chain to; nil is the system's.
	RootCAs *x509.CertPool
	// Bound, AttemptTimeout, Attempts and Backoff override the constants (tests).
	Bound, AttemptTimeout, Backoff time.Duration
	Attempts                       int
}

// Sender POSTs logout tokens to clients' backchannel_logout_uri: https only, public addresses
// only (checked at the dial, shared/jwksuri), no proxy, no redirect followed, each attempt and
// the whole bounded.
type Sender struct {
	client   *http.Client
	bound    time.Duration
	attempts int
	backoff  time.Duration
}

// NewSender returns a Sender with o.
func NewSender(o SenderOptions) *Sender {
	s := &Sender{bound: Bound, attempts: Attempts, backoff: Backoff}
	timeout := AttemptTimeout
	if o.Bound > 0 {
		s.bound = o.Bound
	}
	if o.Attempts > 0 {
		s.attempts = o.Attempts
	}
	if o.Backoff > 0 {
		s.backoff = o.Backoff
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
	s.client = &http.Client{Transport: transport, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return errRedirect }}
	return s
}

// Bound is the bound of all the deliveries of one logout.
func (s *Sender) Bound() time.Duration { return s.bound }

var errRedirect = errors.New("the backchannel_logout_uri answered with a redirect, which is not followed")

// errFinal marks a failure that another attempt would not change.
type errFinal struct{ error }

// Send POSTs token to uri as application/x-www-form-urlencoded logout_token=… until the
// client answers 200 (or 204), an answer says no (4xx, a redirect), the attempts run out or
// ctx ends; it returns the attempts made. Errors never carry the token.
func (s *Sender) Send(ctx context.Context, uri, token string) (int, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return 0, errors.New("the backchannel_logout_uri is not an https URL")
	}
	body := url.Values{"logout_token": {token}}.Encode()
	wait := s.backoff
	var last error
	for n := 1; n <= s.attempts; n++ {
		last = s.post(ctx, uri, body)
		var final errFinal
		if last == nil || errors.As(last, &final) || ctx.Err() != nil {
			return n, unwrapFinal(last)
		}
		if n == s.attempts {
			break
		}
		select {
		case <-ctx.Done():
			return n, fmt.Errorf("%w (then the bound ran out)", last)
		case <-time.After(wait):
		}
		wait *= 2
	}
	return s.attempts, last
}

func unwrapFinal(err error) error {
	var final errFinal
	if errors.As(err, &final) {
		return final.error
	}
	return err
}

// post makes one attempt.
func (s *Sender) post(ctx context.Context, uri, body string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, uri, strings.NewReader(body))
	if err != nil {
		return errFinal{errors.New("the backchannel_logout_uri cannot be requested")}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := s.client.Do(req)
	if err != nil {
		if errors.Is(err, jwksuri.ErrNotPublic) {
			return errFinal{jwksuri.ErrNotPublic}
		}
		if errors.Is(err, errRedirect) {
			return errFinal{errRedirect}
		}
		// A url.Error names the URL, never the body: the token is not in it.
		return fmt.Errorf("post the logout token: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusNoContent:
		return nil
	case resp.StatusCode >= 500:
		return fmt.Errorf("the backchannel_logout_uri answered %d", resp.StatusCode)
	default:
		return errFinal{fmt.Errorf("the backchannel_logout_uri answered %d", resp.StatusCode)}
	}
}
