package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/acmebank/authserver/shared/httpapi"
)

// The steps of one complete flow, in order; each is one HTTP request and has its own latency
// figures. They are indexes into per-step arrays, so recording a sample takes no map lookup.
const (
	stepAuthorize = iota
	stepLogin
	stepConsent
	stepCode
	stepRefresh
	stepRevoke
	numSteps
)

// stepNames name the steps in the table and the JSON. token_code and token_refresh are the two
// grants of the token endpoint; "token" in the results is both together.
var stepNames = [numSteps]string{"authorize", "login", "consent", "token_code", "token_refresh", "revoke"}

// endpoints are the absolute URLs a flow calls, resolved once from the base URL.
type endpoints struct {
	authorize, token, revoke string
	authorizeURL             *url.URL
}

func resolve(base string) (endpoints, error) {
	b, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || (b.Scheme != "http" && b.Scheme != "https") || b.Host == "" {
		return endpoints{}, fmt.Errorf("base URL %q: want http(s)://host[:port][/prefix]", base)
	}
	e := endpoints{
		authorize: b.String() + httpapi.PathAuthorize,
		token:     b.String() + httpapi.PathToken,
		revoke:    b.String() + httpapi.PathRevoke,
	}
	e.authorizeURL, _ = url.Parse(e.authorize)
	return e, nil
}

// flowError is a failed step: which step, and a short kind that groups like failures (an HTTP
// status with the OAuth error code, a missing page element, a transport failure class). The
// kind never carries a token, secret or password.
type flowError struct {
	step int
	kind string
}

func (e *flowError) Error() string { return stepNames[e.step] + ": " + e.kind }

func fail(step int, format string, args ...any) *flowError {
	return &flowError{step: step, kind: fmt.Sprintf(format, args...)}
}

// user is one simulated user: a browser (its cookie jar) that runs flows one after another.
type user struct {
	cfg    *Config
	ep     endpoints
	client *http.Client
	jar    *cookiejar.Jar
	form   url.Values // hidden fields of the page last read
	body   []byte     // reused read buffer
}

// sample is the latency of one step of a flow.
type sample struct {
	step int
	d    time.Duration
}

// hiddenRe finds the hidden fields of our login and consent forms (request_id, csrf_token,
// action), which the browser posts back.
var hiddenRe = regexp.MustCompile(`<input type="hidden" name="([a-zA-Z_]+)" value="([^"]*)">`)

// flow runs one complete flow: authorize, login, consent, code exchange, refresh, revoke. It
// appends the latency of each step that answered to out, and returns the first failure.
func (u *user) flow(ctx context.Context, out []sample) ([]sample, error) {
	if !u.cfg.KeepSession || u.jar == nil {
		u.jar, _ = cookiejar.New(nil) // a new browser: no session, so the login page comes
	}
	state := randomString(16)
	verifier := randomString(32)
	q := url.Values{
		"client_id":     {u.cfg.ClientID},
		"redirect_uri":  {u.cfg.RedirectURI},
		"response_type": {"code"},
		"scope":         {u.cfg.Scope},
		"state":         {state},
	}
	if u.cfg.openid() {
		q.Set("nonce", randomString(16))
	}
	if !u.cfg.NoPKCE {
		sum := sha256.Sum256([]byte(verifier))
		q.Set("code_challenge", base64.RawURLEncoding.EncodeToString(sum[:]))
		q.Set("code_challenge_method", "S256")
	}

	// 1. The authorization request shows the login page (or the consent page to a user whose
	// session cookie was kept).
	resp, d, err := u.do(ctx, http.MethodGet, u.ep.authorize+"?"+q.Encode(), nil)
	if err != nil {
		return out, transportError(stepAuthorize, err)
	}
	out = append(out, sample{stepAuthorize, d})
	if resp.StatusCode != http.StatusOK {
		return out, fail(stepAuthorize, "HTTP %d", resp.StatusCode)
	}
	page := u.body
	if !hasForm(page, "consent") {
		if !hasForm(page, "login") || !strings.Contains(string(page), `type="password"`) {
			return out, fail(stepAuthorize, "no login page")
		}
		// 2. The login form.
		resp, d, err = u.submit(ctx, url.Values{"username": {u.cfg.Username}, "password": {u.cfg.Password}})
		if err != nil {
			return out, transportError(stepLogin, err)
		}
		out = append(out, sample{stepLogin, d})
		if resp.StatusCode != http.StatusOK {
			return out, fail(stepLogin, "HTTP %d", resp.StatusCode)
		}
		if !hasForm(u.body, "consent") {
			if hasForm(u.body, "login") {
				return out, fail(stepLogin, "login refused")
			}
			return out, fail(stepLogin, "no consent page")
		}
	}

	// 3. The consent form: allow, then a 303 to the client with code and state.
	resp, d, err = u.submit(ctx, url.Values{"decision": {"allow"}})
	if err != nil {
		return out, transportError(stepConsent, err)
	}
	out = append(out, sample{stepConsent, d})
	if resp.StatusCode != http.StatusSeeOther {
		return out, fail(stepConsent, "HTTP %d, want 303", resp.StatusCode)
	}
	loc := resp.Header.Get("Location")
	if !strings.HasPrefix(loc, u.cfg.RedirectURI) {
		return out, fail(stepConsent, "redirect not to the redirect_uri")
	}
	cb, err := url.Parse(loc)
	if err != nil {
		return out, fail(stepConsent, "malformed redirect")
	}
	cq := cb.Query()
	if e := cq.Get("error"); e != "" {
		return out, fail(stepConsent, "redirect error=%s", short(e))
	}
	if cq.Get("state") != state {
		return out, fail(stepConsent, "state mismatch")
	}
	code := cq.Get("code")
	if code == "" {
		return out, fail(stepConsent, "no code")
	}

	// 4. The code exchange.
	p := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {u.cfg.RedirectURI}}
	if !u.cfg.NoPKCE {
		p.Set("code_verifier", verifier)
	}
	tok, d, err := u.tokenRequest(ctx, stepCode, u.ep.token, p)
	out = appendIf(out, stepCode, d, err)
	if err != nil {
		return out, err
	}
	if u.cfg.openid() != (tok.IDToken != "") {
		if tok.IDToken == "" {
			return out, fail(stepCode, "no id_token with openid")
		}
		return out, fail(stepCode, "id_token without openid")
	}
	if tok.RefreshToken == "" {
		return out, fail(stepCode, "no refresh_token")
	}

	// 5. The refresh, which rotates the refresh token.
	p = url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}}
	tok2, d, err := u.tokenRequest(ctx, stepRefresh, u.ep.token, p)
	out = appendIf(out, stepRefresh, d, err)
	if err != nil {
		return out, err
	}
	if tok2.RefreshToken == "" || tok2.AccessToken == "" {
		return out, fail(stepRefresh, "no tokens")
	}

	// 6. The revocation of the new refresh token (RFC 7009: 200 with an empty body).
	p = url.Values{"token": {tok2.RefreshToken}, "token_type_hint": {"refresh_token"}}
	resp, d, err = u.post(ctx, u.ep.revoke, p)
	if err != nil {
		return out, transportError(stepRevoke, err)
	}
	out = append(out, sample{stepRevoke, d})
	if resp.StatusCode != http.StatusOK {
		return out, fail(stepRevoke, "HTTP %d%s", resp.StatusCode, oauthError(u.body))
	}
	return out, nil
}

func appendIf(out []sample, step int, d time.Duration, err error) []sample {
	var fe *flowError
	if err == nil || (errors.As(err, &fe) && !strings.HasPrefix(fe.kind, "transport")) {
		return append(out, sample{step, d})
	}
	return out
}

// tokenResponse is the part of a token response the flow checks.
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	IDToken      string `json:"id_token"`
}

func (u *user) tokenRequest(ctx context.Context, step int, endpoint string, p url.Values) (tokenResponse, time.Duration, error) {
	var tok tokenResponse
	resp, d, err := u.post(ctx, endpoint, p)
	if err != nil {
		return tok, d, transportError(step, err)
	}
	if resp.StatusCode != http.StatusOK {
		return tok, d, fail(step, "HTTP %d%s", resp.StatusCode, oauthError(u.body))
	}
	if err := json.Unmarshal(u.body, &tok); err != nil || tok.AccessToken == "" {
		return tok, d, fail(step, "malformed token response")
	}
	return tok, d, nil
}

// post sends a client-authenticated form request to the token or revocation endpoint.
func (u *user) post(ctx context.Context, endpoint string, p url.Values) (*http.Response, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(""))
	if err != nil {
		return nil, 0, err
	}
	if u.cfg.AuthMethod == "post" {
		p.Set("client_id", u.cfg.ClientID)
		p.Set("client_secret", u.cfg.ClientSecret)
	} else {
		req.SetBasicAuth(url.QueryEscape(u.cfg.ClientID), url.QueryEscape(u.cfg.ClientSecret))
	}
	setBody(req, p.Encode())
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return u.send(req, false)
}

// submit posts the open page's form with its hidden fields and extra ones, like a browser.
func (u *user) submit(ctx context.Context, extra url.Values) (*http.Response, time.Duration, error) {
	v := make(url.Values, len(u.form)+len(extra))
	for k, x := range u.form {
		v[k] = x
	}
	for k, x := range extra {
		v[k] = x
	}
	return u.do(ctx, http.MethodPost, u.ep.authorize, v)
}

// do sends a browser request of the pages (cookies kept); form, when set, is the posted body.
func (u *user) do(ctx context.Context, method, target string, form url.Values) (*http.Response, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		return nil, 0, err
	}
	if form != nil {
		setBody(req, form.Encode())
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for _, c := range u.jar.Cookies(u.ep.authorizeURL) {
		req.AddCookie(c)
	}
	resp, d, err := u.send(req, true)
	if err != nil {
		return nil, d, err
	}
	if cs := resp.Cookies(); len(cs) > 0 {
		u.jar.SetCookies(u.ep.authorizeURL, cs)
	}
	return resp, d, nil
}

// send times one request until its whole body is read into u.body; pages' hidden fields are
// parsed into u.form.
func (u *user) send(req *http.Request, page bool) (*http.Response, time.Duration, error) {
	start := time.Now()
	resp, err := u.client.Do(req)
	if err != nil {
		return nil, time.Since(start), err
	}
	u.body, err = readAll(resp.Body, u.body[:0])
	resp.Body.Close()
	d := time.Since(start)
	if err != nil {
		return nil, d, err
	}
	if page {
		u.form = url.Values{}
		for _, m := range hiddenRe.FindAllSubmatch(u.body, -1) {
			u.form.Set(string(m[1]), string(m[2]))
		}
	}
	return resp, d, nil
}

func setBody(req *http.Request, body string) {
	req.Body = io.NopCloser(strings.NewReader(body))
	req.ContentLength = int64(len(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(body)), nil }
}

// readAll reads r into buf's storage, growing it as needed.
func readAll(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// hasForm reports whether a page holds our form with the given action (login or consent).
func hasForm(page []byte, action string) bool {
	return strings.Contains(string(page), `name="action" value="`+action+`"`)
}

// oauthError returns " <error code>" of an OAuth error body, or "".
func oauthError(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == "" {
		return ""
	}
	return " " + short(e.Error)
}

// short keeps an error code from the server printable and bounded.
func short(s string) string {
	if len(s) > 40 {
		s = s[:40]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
}

// transportError classes a failed request by its cause, never by its message (which may quote
// the URL and so a code or token).
func transportError(step int, err error) *flowError {
	var ne net.Error
	kind := "other"
	switch {
	case errors.Is(err, context.Canceled):
		kind = "canceled"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		kind = "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		kind = "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		kind = "connection reset"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		kind = "no local port"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		kind = "connection closed"
	}
	return &flowError{step: step, kind: "transport: " + kind}
}

func randomString(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
