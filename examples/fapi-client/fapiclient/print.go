package fapiclient

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// secretParams are the parameters and JSON members printed only truncated: what would let a
// reader of the output act as the client or the user (tokens, the code and its verifier) or
// replay a signed request.
var secretParams = map[string]bool{
	"access_token": true, "refresh_token": true, "id_token": true, "code": true, "code_verifier": true,
	"client_assertion": true, "client_secret": true,
}

// signedParams are the JWTs the client signs: printed truncated, with their header and claims
// decoded, since those are what a developer checks.
var signedParams = map[string]bool{"client_assertion": true}

// printedHeaders are the headers of each message worth reading, in the order printed.
var printedHeaders = []string{"Content-Type", "Authorization", "DPoP", "DPoP-Nonce", "WWW-Authenticate", "Location", "Cache-Control"}

// maxPrintedBody bounds the part of a body printed (the discovery document is long).
const maxPrintedBody = 1000

// truncate shows the first characters of a secret value and its length.
func truncate(s string) string {
	const keep = 10
	if len(s) <= keep {
		return "…"
	}
	return fmt.Sprintf("%s… (%d characters)", s[:keep], len(s))
}

// printer is the client's HTTP transport: it prints every request and response, secrets
// truncated, and passes them on unchanged.
type printer struct {
	out  io.Writer
	next http.RoundTripper
	mu   sync.Mutex
}

func (p *printer) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.out, "\n--> %s %s\n", req.Method, req.URL.Redacted())
	p.headers(req.Header)
	if len(body) > 0 {
		p.form(body)
	}
	resp, err := p.next.RoundTrip(req)
	if err != nil {
		fmt.Fprintf(p.out, "<-- %v\n", err)
		return nil, err
	}
	rb, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(rb))
	fmt.Fprintf(p.out, "<-- %s\n", resp.Status)
	p.headers(resp.Header)
	p.body(rb)
	return resp, nil
}

func (p *printer) headers(h http.Header) {
	for _, name := range printedHeaders {
		v := h.Get(name)
		switch {
		case v == "":
			continue
		case name == "Authorization":
			scheme, cred, _ := strings.Cut(v, " ")
			v = scheme + " " + truncate(cred)
		case name == "DPoP":
			fmt.Fprintf(p.out, "    %s: %s\n", name, truncate(v))
			p.jwt(v)
			continue
		}
		fmt.Fprintf(p.out, "    %s: %s\n", name, v)
	}
}

// form prints a form body one parameter a line, sorted.
func (p *printer) form(body []byte) {
	q, err := url.ParseQuery(string(body))
	if err != nil {
		fmt.Fprintf(p.out, "    (%d bytes)\n", len(body))
		return
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		fmt.Fprintf(p.out, "    %s=%s\n", k, shown(k, q.Get(k)))
		if signedParams[k] {
			p.jwt(q.Get(k))
		}
	}
}

// shown is a parameter's value as it is printed: truncated when it is a secret.
func shown(name, value string) string {
	if secretParams[name] {
		return truncate(value)
	}
	return value
}

// body prints a JSON response indented with its secret members truncated; anything else by
// its size.
func (p *printer) body(b []byte) {
	if len(b) == 0 {
		return
	}
	var v any
	if json.Unmarshal(b, &v) != nil {
		fmt.Fprintf(p.out, "    (%d bytes)\n", len(b))
		return
	}
	if m, ok := v.(map[string]any); ok {
		for k, x := range m {
			if s, ok := x.(string); ok && secretParams[k] {
				m[k] = truncate(s)
			}
		}
	}
	out, _ := json.MarshalIndent(v, "    ", "  ")
	if len(out) > maxPrintedBody {
		out = append(out[:maxPrintedBody], fmt.Sprintf("… (%d bytes more)", len(out)-maxPrintedBody)...)
	}
	fmt.Fprintf(p.out, "    %s\n", out)
}

// jwt prints the header and claims of a JWT the client signed (nothing in them is secret: the
// DPoP header holds the public key).
func (p *printer) jwt(s string) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return
	}
	for i, name := range []string{"header", "claims"} {
		if b, err := base64.RawURLEncoding.DecodeString(parts[i]); err == nil {
			fmt.Fprintf(p.out, "        %s %s\n", name, b)
		}
	}
}

// redactedURL shows u for reading: its query parameters one a line, decoded, the secret ones
// truncated.
func redactedURL(u *url.URL) string {
	c := *u
	c.RawQuery = ""
	var b strings.Builder
	b.WriteString(c.Redacted())
	q := u.Query()
	for _, k := range slices.Sorted(maps.Keys(q)) {
		fmt.Fprintf(&b, "\n    %s=%s", k, shown(k, q.Get(k)))
	}
	return b.String()
}
