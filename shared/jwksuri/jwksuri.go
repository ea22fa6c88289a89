// Package jwksuri fetches the JWK Set a client publishes at its jwks_uri (RFC 7591 2): the
// adapter of oauth.JWKSFetcher. A jwks_uri is a URL a client chose that the server then
// requests, so the fetch is held to what can do no harm (server-side request forgery): https
// only; no address that is not public (private, loopback, link-local, unspecified, shared,
// documentation, multicast…), checked on the address actually dialled, after DNS, so a name
// that resolves to a public address at registration and a private one later (DNS rebinding)
// still cannot reach inside; no proxy; no redirect; a short timeout; a bounded body.
package jwksuri

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

const (
	// MaxBody bounds the key set read: ten keys fit many times over.
	MaxBody = 64 << 10
	// Timeout bounds a whole fetch (connection, TLS, headers and body): it runs inside a
	// client's request.
	Timeout = 5 * time.Second
	// dialTimeout bounds the connection.
	dialTimeout = 3 * time.Second
)

// ErrNotPublic is a fetch refused because the address dialled is not a public one.
var ErrNotPublic = errors.New("the jwks_uri's host resolves to an address that is not public")

// Options vary a Fetcher.
type Options struct {
	// AllowPrivate lets a jwks_uri resolve to any address (AUTH_JWKS_URI_ALLOW_PRIVATE): for
	// tests whose clients serve their keys on loopback, never in a deployment.
	AllowPrivate bool
	// RootCAs are the CAs a jwks_uri's certificate must chain to; nil is the system's.
	RootCAs *x509.CertPool
}

// Fetcher fetches key sets over https with the rules of the package.
type Fetcher struct {
	client *http.Client
}

var _ oauth.JWKSFetcher = (*Fetcher)(nil)

// New returns a Fetcher with o.
func New(o Options) *Fetcher {
	dialer := &net.Dialer{Timeout: dialTimeout}
	if !o.AllowPrivate {
		dialer.Control = refuseNonPublic
	}
	transport := &http.Transport{
		Proxy:                  nil, // a proxy would be the address dialled, not the key server
		DialContext:            dialer.DialContext,
		TLSClientConfig:        &tls.Config{RootCAs: o.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    dialTimeout,
		ResponseHeaderTimeout:  Timeout,
		MaxResponseHeaderBytes: 16 << 10,
		// A client's keys are fetched at most once a minute: a kept connection or HTTP/2 would
		// save nothing, and a kept connection found closed would be retried, a second request.
		DisableKeepAlives: true,
	}
	return &Fetcher{client: &http.Client{
		Transport: transport,
		Timeout:   Timeout,
		// A redirect is refused: its target would be a URL nobody registered.
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return errors.New("the jwks_uri answered with a redirect, which is not followed")
		},
	}}
}

// FetchJWKS gets uri and returns its body: a 200 answer of at most MaxBody bytes that is JSON.
// What the set holds is the caller's to check (oauth.ValidClientJWKS).
func (f *Fetcher) FetchJWKS(ctx context.Context, uri string) (json.RawMessage, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, errors.New("the jwks_uri is not an https URL")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return nil, fmt.Errorf("the jwks_uri: %w", err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the jwks_uri answered %d, not 200", resp.StatusCode)
	}
	if resp.ContentLength > MaxBody {
		return nil, fmt.Errorf("the jwks_uri's key set is larger than %d KiB", MaxBody>>10)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody+1))
	if err != nil {
		return nil, fmt.Errorf("read the jwks_uri's key set: %w", err)
	}
	if len(body) > MaxBody {
		return nil, fmt.Errorf("the jwks_uri's key set is larger than %d KiB", MaxBody>>10)
	}
	if !json.Valid(body) {
		return nil, errors.New("the jwks_uri's answer is not JSON")
	}
	return body, nil
}

// Dialer returns a dialer for the other outbound calls to an address a client registered
// (the back-channel logout of shared/logout), with this package's rule: unless allowPrivate
// (tests only), it refuses at the dial, after DNS, an address that is not public (ErrNotPublic).
func Dialer(allowPrivate bool, timeout time.Duration) *net.Dialer {
	d := &net.Dialer{Timeout: timeout}
	if !allowPrivate {
		d.Control = refuseNonPublic
	}
	return d
}

// refuseNonPublic is the dialer's Control hook: it runs on the address about to be connected
// to, after name resolution, so what it allows is what is reached.
func refuseNonPublic(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%w: %q", ErrNotPublic, address)
	}
	addr, err := netip.ParseAddr(host)
	if err != nil || !Public(addr) {
		return fmt.Errorf("%w (%s)", ErrNotPublic, host)
	}
	return nil
}

// nonPublic are the special-purpose ranges (IANA IPv4 and IPv6 Special-Purpose Address
// Registries, RFC 6890) that netip's predicates do not already cover and that are not
// globally reachable, or that embed an IPv4 address a gateway would reach for us.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network" (RFC 791)
	netip.MustParsePrefix("100.64.0.0/10"),   // shared address space, carrier-grade NAT (RFC 6598)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments (RFC 6890)
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation, TEST-NET-1 (RFC 5737)
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking (RFC 2544)
	netip.MustParsePrefix("198.51.100.0/24"), // documentation, TEST-NET-2
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation, TEST-NET-3
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved (RFC 1112), and the broadcast address
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64 (RFC 6052): would reach any IPv4 address
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64 (RFC 8215)
	netip.MustParsePrefix("100::/64"),        // discard-only (RFC 6666)
	netip.MustParsePrefix("2001::/23"),       // IETF protocol assignments, Teredo among them
	netip.MustParsePrefix("2001:db8::/32"),   // documentation (RFC 3849)
	netip.MustParsePrefix("2002::/16"),       // 6to4 (RFC 3056): embeds an IPv4 address
	netip.MustParsePrefix("fec0::/10"),       // site-local, deprecated (RFC 3879)
}

// Public reports whether addr is a public unicast address a jwks_uri may be fetched from: not
// loopback, private (RFC 1918, unique local fc00::/7), link-local, unspecified, multicast, nor
// any range of nonPublic. An IPv4-mapped IPv6 address is judged as its IPv4 address.
func Public(addr netip.Addr) bool {
	addr = addr.Unmap()
	if !addr.IsValid() || addr.Zone() != "" || !addr.IsGlobalUnicast() || addr.IsPrivate() || addr.IsLoopback() ||
		addr.IsLinkLocalUnicast() || addr.IsUnspecified() || addr.IsMulticast() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(addr) {
			return false
		}
	}
	return true
}
