package logout

import (
	"context"
	"crypto/x509"
	"net/http"
	"net/url"
	"time"

	"github.com/acmebank/authserver/shared/outbound"
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

// Sender POSTs logout tokens to clients' backchannel_logout_uri through shared/outbound's
// poster: https only, public addresses only, no proxy, no redirect followed, each attempt and
// the whole bounded.
type Sender struct {
	poster *outbound.Poster
	bound  time.Duration
}

// NewSender returns a Sender with o.
func NewSender(o SenderOptions) *Sender {
	oo := outbound.Options{AllowPrivate: o.AllowPrivate, RootCAs: o.RootCAs,
		Bound: Bound, AttemptTimeout: AttemptTimeout, Attempts: Attempts, Backoff: Backoff}
	if o.Bound > 0 {
		oo.Bound = o.Bound
	}
	if o.Attempts > 0 {
		oo.Attempts = o.Attempts
	}
	if o.Backoff > 0 {
		oo.Backoff = o.Backoff
	}
	if o.AttemptTimeout > 0 {
		oo.AttemptTimeout = o.AttemptTimeout
	}
	p := outbound.New(oo)
	return &Sender{poster: p, bound: p.Bound()}
}

// Bound is the bound of all the deliveries of one logout.
func (s *Sender) Bound() time.Duration { return s.bound }

// Send POSTs token to uri as application/x-www-form-urlencoded logout_token=… until the
// client answers 200 (or 204), an answer says no (4xx, a redirect), the attempts run out or
// ctx ends; it returns the attempts made. Errors never carry the token.
func (s *Sender) Send(ctx context.Context, uri, token string) (int, error) {
	return s.poster.Post(ctx, outbound.Message{
		Name: "the backchannel_logout_uri", URL: uri,
		ContentType: "application/x-www-form-urlencoded", Body: url.Values{"logout_token": {token}}.Encode(),
		// Back-Channel Logout 1.0 2.8: 200 OK, or 204 No Content; any other answer says no.
		Delivered: func(status int) bool { return status == http.StatusOK || status == http.StatusNoContent },
	})
}
