package main

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestConn_ReadsEveryBodyFramingAndKeepsTheConnection serves each way an HTTP/1.1 server frames
// a body (length, chunked, neither) through the real net/http server and expects the body whole
// and the connection kept exactly when the framing allows it.
func TestConn_ReadsEveryBodyFramingAndKeepsTheConnection(t *testing.T) {
	big := strings.Repeat("0123456789", 2000) // over net/http's 2 KiB: chunked unless sized
	tests := []struct {
		name      string
		handler   http.HandlerFunc
		status    int
		body      string
		location  string
		keepAlive bool
	}{
		{"content length", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "5")
			w.Write([]byte("hello"))
		}, 200, "hello", "", true},
		{"chunked", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(big[:3000]))
			w.(http.Flusher).Flush()
			w.Write([]byte(big[3000:]))
		}, 200, big, "", true},
		{"no body and a location", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "http://127.0.0.1:4499/callback?code=x&state=y")
			w.WriteHeader(http.StatusSeeOther)
		}, 303, "", "http://127.0.0.1:4499/callback?code=x&state=y", true},
		{"no content", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }, 204, "", "", true},
		{"connection close", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Connection", "close")
			w.Write([]byte("bye"))
		}, 200, "bye", "", false},
		{"the form posted comes back", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(r.PostFormValue("a") + "|" + r.Header.Get("Cookie") + "|" + r.Header.Get("Authorization")))
		}, 200, "b c|sid=1|Basic eA==", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			b, _ := url.Parse(srv.URL)
			c := conn{t: newTarget(b), timeout: 5 * time.Second}
			defer c.close()
			var resp response
			for i := range 2 {
				req := request{method: http.MethodPost, path: "/x", form: []byte("a=b+c"), cookie: []byte("sid=1"), auth: "Basic eA=="}
				if err := c.do(context.Background(), &req, &resp); err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				if resp.status != tt.status || string(resp.body) != tt.body || string(resp.location) != tt.location {
					t.Fatalf("request %d: status %d, body %.40q (%d bytes), location %q", i, resp.status, resp.body, len(resp.body), resp.location)
				}
				if (c.c != nil) != tt.keepAlive {
					t.Fatalf("request %d: connection kept = %v, want %v", i, c.c != nil, tt.keepAlive)
				}
			}
		})
	}
}

// TestConn_SpeaksHTTPSWhenTheBaseSaysSo checks the TLS connection of an https base URL: the
// server's certificate is verified (against the test CA here) and kept alive across requests.
func TestConn_SpeaksHTTPSWhenTheBaseSaysSo(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(r.Proto + " " + strconv.FormatBool(r.TLS != nil)))
	}))
	defer srv.Close()
	b, _ := url.Parse(srv.URL)
	tests := []struct {
		name    string
		trusted bool
	}{
		{"trusted certificate", true},
		{"unknown certificate refused", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := conn{t: newTarget(b), timeout: 5 * time.Second}
			defer c.close()
			if tt.trusted {
				pool := x509.NewCertPool()
				pool.AddCert(srv.Certificate())
				c.t.tls.RootCAs = pool
			}
			var resp response
			for i := range 2 {
				err := c.do(context.Background(), &request{method: http.MethodGet, path: "/"}, &resp)
				if !tt.trusted {
					if err == nil {
						t.Fatal("an unknown certificate was accepted")
					}
					return
				}
				if err != nil || string(resp.body) != "HTTP/1.1 true" || c.c == nil {
					t.Fatalf("request %d: %v, %q, kept %v", i, err, resp.body, c.c != nil)
				}
			}
		})
	}
}

// TestConn_MalformedResponsesAreErrors feeds raw bytes that are not a valid HTTP/1.1 response
// and expects an error, never a response.
func TestConn_MalformedResponsesAreErrors(t *testing.T) {
	tests := []struct {
		name, raw string
	}{
		{"not HTTP", "hello\r\n\r\n"},
		{"bad status", "HTTP/1.1 2x0 OK\r\n\r\n"},
		{"header without colon", "HTTP/1.1 200 OK\r\nbroken\r\n\r\n"},
		{"obsolete folding", "HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n"},
		{"bad length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"},
		{"two lengths", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"},
		{"unknown coding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"},
		{"bad chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"},
		{"chunk without its end", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n"},
		{"body cut short", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, server := net.Pipe()
			defer client.Close()
			go func() {
				bufio.NewReader(server).ReadString('\n') // the request line is enough
				server.Write([]byte(tt.raw))
				server.Close()
			}()
			c := conn{t: target{host: "x"}, timeout: 5 * time.Second, c: client, r: bufio.NewReader(client), stop: func() bool { return true }}
			var resp response
			if err := c.do(context.Background(), &request{method: http.MethodGet, path: "/"}, &resp); err == nil {
				t.Fatalf("no error; status %d body %q", resp.status, resp.body)
			}
		})
	}
}

// TestConn_StaleKeepAliveIsRetriedOnce proves that a request on a kept connection the server
// has closed meanwhile goes out again on a new one, and that a refused connection is an error.
func TestConn_StaleKeepAliveIsRetriedOnce(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	b, _ := url.Parse(srv.URL)
	c := conn{t: newTarget(b), timeout: 5 * time.Second}
	defer c.close()
	var resp response
	req := request{method: http.MethodGet, path: "/"}
	if err := c.do(context.Background(), &req, &resp); err != nil {
		t.Fatal(err)
	}
	srv.CloseClientConnections()
	time.Sleep(10 * time.Millisecond) // let the close reach this side (not a timed assertion)
	if err := c.do(context.Background(), &req, &resp); err != nil || string(resp.body) != "ok" {
		t.Fatalf("after the server closed the idle connection: %v, %q", err, resp.body)
	}
	srv.Close()
	err := c.do(context.Background(), &req, &resp)
	if fe := transportError(stepAuthorize, err); err == nil || !strings.HasPrefix(fe.kind, "transport: ") {
		t.Fatalf("server gone: err %v", err)
	}
}

// TestJar_KeepsReplacesAndRemovesCookiesLikeABrowser checks the per-user jar against the rules
// of RFC 6265 that matter for one host.
func TestJar_KeepsReplacesAndRemovesCookiesLikeABrowser(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		https bool
		set   []string
		path  string
		want  string
	}{
		{"set and sent", false, []string{"bid=1; Path=/; HttpOnly; SameSite=Lax"}, "/a", "bid=1"},
		{"replaced by name and path", false, []string{"bid=1; Path=/", "bid=2; Path=/"}, "/a", "bid=2"},
		{"kept in order of creation", false, []string{"bid=1; Path=/", "sid=2; Path=/; Max-Age=60"}, "/a", "bid=1; sid=2"},
		{"removed by Max-Age 0", false, []string{"bid=1; Path=/", "sid=2; Path=/", "sid=; Path=/; Max-Age=0"}, "/a", "bid=1"},
		{"removed by an old Expires", false, []string{"sid=2; Path=/", "sid=; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT"}, "/a", ""},
		{"path outside the cookie's", false, []string{"a=1; Path=/v2/x"}, "/v2/xy", ""},
		{"path inside the cookie's", false, []string{"a=1; Path=/v2/x"}, "/v2/x/y", "a=1"},
		{"secure refused over http", false, []string{"__Host-sid=1; Path=/; Secure"}, "/a", ""},
		{"secure kept over https", true, []string{"__Host-sid=1; Path=/; Secure"}, "/a", "__Host-sid=1"},
		{"another domain refused", false, []string{"a=1; Domain=example.com"}, "/", ""},
		{"own domain kept", false, []string{"a=1; Domain=127.0.0.1"}, "/", "a=1"},
		{"invalid ignored", false, []string{"=nameless"}, "/", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := jar{https: tt.https, host: "127.0.0.1"}
			for _, s := range tt.set {
				j.set([][]byte{[]byte(s)}, now)
			}
			if got := string(j.headerFor(tt.path)); got != tt.want {
				t.Errorf("Cookie: %q, want %q", got, tt.want)
			}
		})
	}
}

// TestForm_EncodesAsQueryEscape compares the reused form buffer with url.QueryEscape.
func TestForm_EncodesAsQueryEscape(t *testing.T) {
	for _, s := range []string{"", "plain-._~09AZaz", "email phone profile", "a+b&c=d/é%", "\x00\xff"} {
		var f form
		f.add("k y", s)
		if want := url.QueryEscape("k y") + "=" + url.QueryEscape(s); string(f.b) != want {
			t.Errorf("%q: %q, want %q", s, f.b, want)
		}
	}
}

// TestQueryParams_ReadsTheRedirectLikeParseQuery checks the redirect's query reader.
func TestQueryParams_ReadsTheRedirectLikeParseQuery(t *testing.T) {
	tests := []struct {
		name, url, want string
		err             bool
	}{
		{"code and state", "http://c/cb?code=abc&state=x%2By", "code=abc,state=x+y,", false},
		{"plus is a space, fragment ignored", "http://c/cb?error=access_denied&error_description=a+b#frag", "error=access_denied,error_description=a b,", false},
		{"no query", "http://c/cb", "", false},
		{"empty pairs skipped", "http://c/cb?&a=1&&b", "a=1,b=,", false},
		{"bad escape", "http://c/cb?a=%zz", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got strings.Builder
			err := queryParams([]byte(tt.url), func(n, v []byte) { got.WriteString(string(n) + "=" + string(v) + ",") })
			if (err != nil) != tt.err || (!tt.err && got.String() != tt.want) {
				t.Errorf("got %q, %v; want %q, error %v", got.String(), err, tt.want, tt.err)
			}
		})
	}
}

// TestHiddenFields_ReadsTheFormsInputs checks the targeted scan of the pages' hidden inputs.
func TestHiddenFields_ReadsTheFormsInputs(t *testing.T) {
	tests := []struct {
		name, page, want string
		err              bool
	}{
		{"login form", `<form method="post"><input type="hidden" name="request_id" value="r1">` + "\n" +
			`<input type="hidden" name="csrf_token" value="c-2_">` + "\n" + `<input type="hidden" name="action" value="login">`,
			"request_id=r1,csrf_token=c-2_,action=login,", false},
		{"character references decoded", `<input type="hidden" name="a" value="x&#43;y&amp;z">`, "a=x+y&z,", false},
		{"none", `<input type="text" name="username" value="">`, "", false},
		{"value not closed", `<input type="hidden" name="a" value="x`, "", true},
		{"no value", `<input type="hidden" name="a">`, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got strings.Builder
			err := hiddenFields([]byte(tt.page), func(n, v []byte) { got.WriteString(string(n) + "=" + string(v) + ",") })
			if (err != nil) != tt.err || (!tt.err && got.String() != tt.want) {
				t.Errorf("got %q, %v; want %q, error %v", got.String(), err, tt.want, tt.err)
			}
		})
	}
}

// TestTransportError_MalformedIsAKind keeps a parse failure apart from other transport errors.
func TestTransportError_MalformedIsAKind(t *testing.T) {
	if got := transportError(stepCode, errMalformed).kind; got != "transport: malformed response" {
		t.Errorf("kind %q", got)
	}
	if got := transportError(stepCode, errors.New("x")).kind; got != "transport: other" {
		t.Errorf("kind %q", got)
	}
}

// TestFormAction_NamesThePagesForm checks the one-scan recognition of the login and consent
// pages.
func TestFormAction_NamesThePagesForm(t *testing.T) {
	tests := []struct{ name, page, want string }{
		{"login", `<form><input type="hidden" name="action" value="login"><input type="password">`, "login"},
		{"consent", `<input type="hidden" name="action" value="consent">`, "consent"},
		{"other action", `<input type="hidden" name="action" value="logout">`, "other"},
		{"no form", `<p>error</p>`, ""},
		{"cut short", `<input type="hidden" name="action" value="login`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := formAction([]byte(tt.page)); got != tt.want {
				t.Errorf("%q, want %q", got, tt.want)
			}
		})
	}
}
