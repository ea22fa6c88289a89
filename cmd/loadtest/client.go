package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"syscall"
	"time"
)

// The load generator shares the machine's cores with the server it measures, so every
// microsecond it spends per request is a microsecond the server does not get. net/http's
// client costs about three goroutine hand-offs per request (the caller, the connection's
// read and write loops), a header map per response, a context and a timer per request, and a
// cookie jar built for the public suffix list; together that was most of the 0.6–0.8 ms of
// CPU per flow the load command used. So each simulated user speaks HTTP/1.1 itself over its
// own keep-alive connection, as a browser does: one write and one read per request, buffers
// reused, and only the response headers the flow reads (status, Location, Set-Cookie,
// Content-Length, Transfer-Encoding, Connection) looked at. Responses are still parsed whole
// and strictly (a malformed one is an error of kind "transport: malformed response"), and
// every body is read to its end, so the connection stays in step.

// errMalformed is a response this client cannot parse as HTTP/1.1.
var errMalformed = errors.New("malformed HTTP response")

// target is where requests go: the address to dial and the Host header, with TLS for https.
type target struct {
	addr string      // host:port
	host string      // Host header value
	tls  *tls.Config // nil for http
}

func newTarget(b *url.URL) target {
	t := target{addr: b.Host, host: b.Host}
	port := b.Port()
	if port == "" {
		port = "80"
		if b.Scheme == "https" {
			port = "443"
		}
		t.addr = net.JoinHostPort(b.Hostname(), port)
	}
	if b.Scheme == "https" {
		t.tls = &tls.Config{ServerName: b.Hostname()}
	}
	return t
}

// conn is one user's keep-alive HTTP/1.1 connection, dialled on first use and again after the
// server closes it.
type conn struct {
	t       target
	timeout time.Duration
	c       net.Conn
	r       *bufio.Reader
	stop    func() bool // unregisters the close-on-cancel hook of c
	wbuf    []byte      // the request being written, reused
	used    bool        // c has carried a response already (a failure may be a stale keep-alive)
}

// response is what the flow reads of an HTTP response. Its slices are valid until the next
// request on the same conn.
type response struct {
	status     int
	location   []byte
	setCookies [][]byte
	body       []byte
}

// request is one request to send: method, request target (path and query), and, for a POST,
// a form body; optional Basic credentials and cookies come already formatted.
type request struct {
	method, path string
	query        []byte // after the '?', or empty
	cookie       []byte // "a=b; c=d", or empty
	auth         string // Authorization header value, or empty
	form         []byte // application/x-www-form-urlencoded body of a POST
}

// do sends req and reads the whole response into resp, reusing resp's buffers. A request that
// fails on a reused connection before any byte of the response came back is sent once more on
// a new connection: the server closed its idle side, as net/http's transport also assumes.
func (c *conn) do(ctx context.Context, req *request, resp *response) error {
	for attempt := 0; ; attempt++ {
		reused := c.c != nil && c.used
		started, err := c.roundTrip(ctx, req, resp)
		if err == nil {
			return nil
		}
		c.close()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !reused || started || attempt > 0 || !isStale(err) {
			return err
		}
	}
}

// isStale reports whether err is how a connection the server closed while idle fails.
func isStale(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func (c *conn) dial(ctx context.Context) error {
	d := net.Dialer{Timeout: c.timeout}
	nc, err := d.DialContext(ctx, "tcp", c.t.addr)
	if err != nil {
		return err
	}
	if c.t.tls != nil {
		tc := tls.Client(nc, c.t.tls)
		tc.SetDeadline(time.Now().Add(c.timeout))
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return err
		}
		nc = tc
	}
	c.c = nc
	if c.r == nil {
		c.r = bufio.NewReaderSize(nc, 16<<10)
	} else {
		c.r.Reset(nc)
	}
	c.used = false
	// An interrupted run ends requests in flight at once rather than at their timeout.
	c.stop = context.AfterFunc(ctx, func() { nc.Close() })
	return nil
}

func (c *conn) close() {
	if c.c == nil {
		return
	}
	c.stop()
	c.c.Close()
	c.c = nil
}

// roundTrip writes req and reads its response; started says whether any byte of the response
// was read (after which the request is never sent again).
func (c *conn) roundTrip(ctx context.Context, req *request, resp *response) (started bool, err error) {
	if c.c == nil {
		if err := c.dial(ctx); err != nil {
			return false, err
		}
	}
	c.c.SetDeadline(time.Now().Add(c.timeout))
	w := append(c.wbuf[:0], req.method...)
	w = append(w, ' ')
	w = append(w, req.path...)
	if len(req.query) > 0 {
		w = append(w, '?')
		w = append(w, req.query...)
	}
	w = append(w, " HTTP/1.1\r\nHost: "...)
	w = append(w, c.t.host...)
	w = append(w, "\r\nUser-Agent: acmebank-loadtest\r\n"...)
	if len(req.cookie) > 0 {
		w = append(w, "Cookie: "...)
		w = append(w, req.cookie...)
		w = append(w, "\r\n"...)
	}
	if req.auth != "" {
		w = append(w, "Authorization: "...)
		w = append(w, req.auth...)
		w = append(w, "\r\n"...)
	}
	if req.method == http.MethodPost {
		w = append(w, "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: "...)
		w = strconv.AppendInt(w, int64(len(req.form)), 10)
		w = append(w, "\r\n"...)
	}
	w = append(w, "\r\n"...)
	w = append(w, req.form...)
	c.wbuf = w
	if _, err := c.c.Write(w); err != nil {
		return false, err
	}
	return c.readResponse(resp)
}

// readResponse reads one response (skipping 1xx ones) and its whole body.
func (c *conn) readResponse(resp *response) (started bool, err error) {
	r := c.r
	for {
		if _, err := r.Peek(1); err != nil {
			return false, err
		}
		resp.status, resp.location, resp.setCookies = 0, resp.location[:0], resp.setCookies[:0]
		line, err := readLine(r)
		if err != nil {
			return true, err
		}
		// "HTTP/1.1 200 OK"
		if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
			return true, errMalformed
		}
		status, err := strconv.Atoi(string(line[9:12]))
		if err != nil || status < 100 || (len(line) > 12 && line[12] != ' ') {
			return true, errMalformed
		}
		resp.status = status
		keepAlive := line[7] == '1' // HTTP/1.0 closes unless asked otherwise; we never ask
		contentLength, chunked := int64(-1), false
		for {
			line, err := readLine(r)
			if err != nil {
				return true, err
			}
			if len(line) == 0 {
				break
			}
			colon := bytes.IndexByte(line, ':')
			if colon <= 0 || line[0] == ' ' || line[0] == '\t' {
				return true, errMalformed // no name, or obsolete line folding
			}
			name, value := line[:colon], bytes.TrimSpace(line[colon+1:])
			switch n := len(name); {
			case n != 8 && n != 10 && n != 14 && n != 17:
				// none of the five below: Date, Content-Type, Cache-Control, security headers...
			case bytes.EqualFold(name, []byte("Content-Length")):
				n, err := strconv.ParseInt(string(value), 10, 64)
				if err != nil || n < 0 || (contentLength >= 0 && n != contentLength) {
					return true, errMalformed
				}
				contentLength = n
			case bytes.EqualFold(name, []byte("Transfer-Encoding")):
				if !bytes.EqualFold(value, []byte("chunked")) {
					return true, errMalformed // the only coding an HTTP/1.1 server may send us
				}
				chunked = true
			case bytes.EqualFold(name, []byte("Connection")):
				if containsToken(value, "close") {
					keepAlive = false
				}
			case bytes.EqualFold(name, []byte("Location")):
				resp.location = append(resp.location, value...)
			case bytes.EqualFold(name, []byte("Set-Cookie")):
				resp.setCookies = append(resp.setCookies, bytes.Clone(value))
			}
		}
		if status < 200 {
			continue // 100 Continue and the like: the real response follows
		}
		resp.body = resp.body[:0]
		switch {
		case status == http.StatusNoContent || status == http.StatusNotModified:
		case chunked:
			if resp.body, err = readChunked(r, resp.body); err != nil {
				return true, err
			}
		case contentLength >= 0:
			if resp.body, err = readN(r, resp.body, int(contentLength)); err != nil {
				return true, err
			}
		default: // the body ends when the server closes the connection
			if resp.body, err = readAll(r, resp.body); err != nil {
				return true, err
			}
			keepAlive = false
		}
		c.used = true
		if !keepAlive {
			c.close()
		}
		return true, nil
	}
}

// readLine returns one CRLF-terminated line without its end; the slice is valid until the
// next read.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		if err == bufio.ErrBufferFull {
			err = errMalformed // a 16 KiB header line is not one of our server's
		}
		return nil, err
	}
	return bytes.TrimSuffix(line[:len(line)-1], []byte("\r")), nil
}

// readN appends exactly n bytes of r to buf.
func readN(r *bufio.Reader, buf []byte, n int) ([]byte, error) {
	buf = grow(buf, n)
	start := len(buf)
	buf = buf[:start+n]
	if _, err := io.ReadFull(r, buf[start:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return buf[:start], err
	}
	return buf, nil
}

// readChunked appends a chunked body (RFC 9112 section 7.1) to buf, trailers skipped.
func readChunked(r *bufio.Reader, buf []byte) ([]byte, error) {
	for {
		line, err := readLine(r)
		if err != nil {
			return buf, err
		}
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i] // chunk extensions
		}
		size, err := strconv.ParseUint(string(bytes.TrimSpace(line)), 16, 31)
		if err != nil {
			return buf, errMalformed
		}
		if size == 0 {
			for { // trailer fields, then the empty line
				line, err := readLine(r)
				if err != nil {
					return buf, err
				}
				if len(line) == 0 {
					return buf, nil
				}
			}
		}
		if buf, err = readN(r, buf, int(size)); err != nil {
			return buf, err
		}
		if line, err := readLine(r); err != nil || len(line) != 0 {
			if err == nil {
				err = errMalformed
			}
			return buf, err
		}
	}
}

func grow(buf []byte, n int) []byte {
	if cap(buf)-len(buf) < n {
		buf = append(buf[:cap(buf)], make([]byte, n-(cap(buf)-len(buf)))...)[:len(buf)]
	}
	return buf
}

// containsToken reports whether a comma-separated header value holds token (any case).
func containsToken(v []byte, token string) bool {
	for len(v) > 0 {
		var t []byte
		t, v, _ = bytes.Cut(v, []byte(","))
		if bytes.EqualFold(bytes.TrimSpace(t), []byte(token)) {
			return true
		}
	}
	return false
}

// jar is one browser's cookies for the one host the run drives, which is all a flow needs of
// a cookie jar: Set-Cookie replaces or (Max-Age <= 0, or an Expires in the past) removes a
// cookie by name and path; a cookie goes back when the request path is within its Path, and,
// when Secure, only over https. The server's cookies have no Domain (host-only), and one with a
// Domain other than the host is refused, as a browser would. Entries stay in order of creation.
type jar struct {
	https   bool
	host    string // without port, lower case
	cookies []cookie
	header  []byte // the Cookie header value last built, reused
}

type cookie struct {
	name, value, path string
	secure            bool
}

// set applies the Set-Cookie headers of a response.
func (j *jar) set(lines [][]byte, now time.Time) {
	for _, l := range lines {
		hc, err := http.ParseSetCookie(string(l))
		if err != nil {
			continue // an invalid Set-Cookie is ignored, as by browsers
		}
		if hc.Domain != "" && !equalHost(hc.Domain, j.host) {
			continue
		}
		if hc.Secure && !j.https {
			continue // RFC 6265bis: a non-secure origin may not set a Secure cookie
		}
		p := hc.Path
		if p == "" || p[0] != '/' {
			p = "/" // default-path of our requests' paths, all under the root
		}
		remove := hc.MaxAge < 0 || (!hc.Expires.IsZero() && !hc.Expires.After(now))
		i := j.find(hc.Name, p)
		switch {
		case remove && i >= 0:
			j.cookies = append(j.cookies[:i], j.cookies[i+1:]...)
		case remove:
		case i >= 0:
			j.cookies[i].value, j.cookies[i].secure = hc.Value, hc.Secure
		default:
			j.cookies = append(j.cookies, cookie{name: hc.Name, value: hc.Value, path: p, secure: hc.Secure})
		}
	}
}

func (j *jar) find(name, path string) int {
	for i, c := range j.cookies {
		if c.name == name && c.path == path {
			return i
		}
	}
	return -1
}

// header returns the Cookie header value for a request to path ("" when none applies); it is
// valid until the next call.
func (j *jar) headerFor(path string) []byte {
	h := j.header[:0]
	for _, c := range j.cookies {
		if (c.secure && !j.https) || !pathMatch(path, c.path) {
			continue
		}
		if len(h) > 0 {
			h = append(h, "; "...)
		}
		h = append(h, c.name...)
		h = append(h, '=')
		h = append(h, c.value...)
	}
	j.header = h
	return h
}

func (j *jar) reset() { j.cookies = j.cookies[:0] }

// pathMatch is RFC 6265 section 5.1.4's path-match.
func pathMatch(reqPath, cookiePath string) bool {
	if len(reqPath) < len(cookiePath) || reqPath[:len(cookiePath)] != cookiePath {
		return false
	}
	return len(reqPath) == len(cookiePath) || cookiePath[len(cookiePath)-1] == '/' || reqPath[len(cookiePath)] == '/'
}

func equalHost(domain, host string) bool {
	if len(domain) > 0 && domain[0] == '.' {
		domain = domain[1:]
	}
	return bytes.EqualFold([]byte(domain), []byte(host))
}

// form builds an application/x-www-form-urlencoded body or query in a reused buffer.
type form struct{ b []byte }

func (f *form) reset() { f.b = f.b[:0] }

// add appends name=value, both escaped as url.QueryEscape does.
func (f *form) add(name, value string) { addField(f, name, value) }

// addBytes is add of a value held in bytes.
func (f *form) addBytes(name string, value []byte) { addField(f, name, value) }

// addField is add of a name and value held in bytes.
func (f *form) addField(name, value []byte) { addField(f, name, value) }

func addField[N, V string | []byte](f *form, name N, value V) {
	if len(f.b) > 0 {
		f.b = append(f.b, '&')
	}
	f.b = appendEscaped(f.b, name)
	f.b = append(f.b, '=')
	f.b = appendEscaped(f.b, value)
}

// appendEscaped appends s form-encoded: the unreserved characters as they are, space as '+',
// everything else as %XX (the output of url.QueryEscape).
func appendEscaped[T string | []byte](b []byte, s T) []byte {
	const hex = "0123456789ABCDEF"
	i := 0
	for i < len(s) && unreserved[s[i]] {
		i++
	}
	b = append(b, s[:i]...) // most values (tokens, codes, base64url) end here
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case unreserved[c]:
			b = append(b, c)
		case c == ' ':
			b = append(b, '+')
		default:
			b = append(b, '%', hex[c>>4], hex[c&15])
		}
	}
	return b
}

// unreserved marks the bytes form encoding leaves as they are.
var unreserved = func() (t [256]bool) {
	for c := range 256 {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~'
	}
	return t
}()

// queryParams calls fn with each decoded name and value of a URL's query (between '?' and
// '#'), as url.ParseQuery reads it; a malformed escape is an error. The slices may alias u.
func queryParams(u []byte, fn func(name, value []byte)) error {
	q := u
	if i := bytes.IndexByte(q, '?'); i >= 0 {
		q = q[i+1:]
	} else {
		return nil
	}
	if i := bytes.IndexByte(q, '#'); i >= 0 {
		q = q[:i]
	}
	for len(q) > 0 {
		var kv []byte
		kv, q, _ = bytes.Cut(q, []byte("&"))
		if len(kv) == 0 {
			continue
		}
		k, v, _ := bytes.Cut(kv, []byte("="))
		name, err := unescape(k)
		if err != nil {
			return err
		}
		value, err := unescape(v)
		if err != nil {
			return err
		}
		fn(name, value)
	}
	return nil
}

func unescape(b []byte) ([]byte, error) {
	if bytes.IndexByte(b, '%') < 0 && bytes.IndexByte(b, '+') < 0 {
		return b, nil
	}
	s, err := url.QueryUnescape(string(b))
	return []byte(s), err
}

// hiddenFields scans page for the hidden inputs of our login and consent forms
// (<input type="hidden" name="..." value="...">) and calls fn with each name and value, the
// value's HTML character references decoded as a browser would before posting it. The slices
// may alias page.
func hiddenFields(page []byte, fn func(name, value []byte)) error {
	const open, mid = `<input type="hidden" name="`, `" value="`
	for {
		i := bytes.Index(page, []byte(open))
		if i < 0 {
			return nil
		}
		page = page[i+len(open):]
		name, rest, ok := bytes.Cut(page, []byte(mid))
		if !ok || bytes.IndexByte(name, '"') >= 0 || bytes.IndexByte(name, '>') >= 0 {
			return fmt.Errorf("hidden input without value")
		}
		value, rest, ok := bytes.Cut(rest, []byte(`"`))
		if !ok {
			return fmt.Errorf("hidden input value not closed")
		}
		if bytes.IndexByte(value, '&') >= 0 {
			value = []byte(html.UnescapeString(string(value)))
		}
		fn(name, value)
		page = rest
	}
}
