package main

import (
	"bytes"
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
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/html"
)

// The service's fixed paths under the base URL. This module is a black-box HTTP driver and
// imports nothing of the service, so the few paths it needs are written out here.
const (
	pathAuthorize = "/v2/authentication/oauth2/authorize"
	pathToken     = "/v2/authentication/oauth2/token"
	pathRevoke    = "/v2/authentication/oauth2/token/revoke"
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

// endpoints are the URLs of a flow's requests, resolved once from the base URL (base path
// prefix included).
type endpoints struct {
	authorize, token, revoke string
}

func resolve(base string) (endpoints, error) {
	b, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || (b.Scheme != "http" && b.Scheme != "https") || b.Host == "" || b.RawQuery != "" || b.Fragment != "" {
		return endpoints{}, fmt.Errorf("base URL %q: want http(s)://host[:port][/prefix]", base)
	}
	root := b.String()
	return endpoints{authorize: root + pathAuthorize, token: root + pathToken, revoke: root + pathRevoke}, nil
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

// user is one simulated user: a browser of its own (its cookie jar and its keep-alive
// connections) that runs flows one after another.
type user struct {
	cfg    *Config
	ep     endpoints
	http   *http.Client // browser requests: the user's cookie jar
	back   *http.Client // back-channel requests (token, revoke): the same connections, no cookies
	auth   string       // Authorization header of client_secret_basic, or "" for client_secret_post
	resp   response     // the response last read
	rnd    [64]byte
	openid bool // whether the scope asks for openid (and so an id_token is due), read once
}

// response is what a step checks of an HTTP response, its body read whole.
type response struct {
	status   int
	location string
	body     bytes.Buffer
}

func newUser(cfg *Config, ep endpoints) *user {
	u := &user{cfg: cfg, ep: ep, openid: cfg.openid()}
	u.http = &http.Client{
		// One transport per user, as one browser has its own connections; no proxy (only
		// loopback is driven).
		Transport: &http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: 90 * time.Second},
		Jar:       newJar(),
		Timeout:   cfg.Timeout,
		// Redirects are the flow's business: the consent's 303 to the client is checked, never
		// followed.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	back := *u.http
	back.Jar = nil
	u.back = &back
	if cfg.AuthMethod != "post" {
		// RFC 6749 section 2.3.1: both parts form-encoded, then Basic.
		cred := url.QueryEscape(cfg.ClientID) + ":" + url.QueryEscape(cfg.ClientSecret)
		u.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(cred))
	}
	return u
}

func newJar() http.CookieJar {
	j, _ := cookiejar.New(nil) // cannot fail without options
	return j
}

// close ends the user's idle connections.
func (u *user) close() { u.http.CloseIdleConnections() }

// sample is the latency of one step of a flow.
type sample struct {
	step int
	d    time.Duration
}

// page is what a flow reads of a login or consent page: its form's hidden fields (a browser
// posts them back) and whether it asks for a password.
type page struct {
	hidden   url.Values
	password bool
}

// action returns the page's form action ("login", "consent"), "other", or "" when it has none.
func (p *page) action() string {
	switch v := p.hidden.Get("action"); v {
	case "", "login", "consent":
		return v
	}
	return "other"
}

// parsePage reads the inputs of an HTML page with golang.org/x/net/html's tokenizer.
func parsePage(body []byte) page {
	p := page{hidden: url.Values{}}
	z := html.NewTokenizer(bytes.NewReader(body))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			return p
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		if name, hasAttr := z.TagName(); string(name) != "input" || !hasAttr {
			continue
		}
		var typ, name, value string
		for more := true; more; {
			var k, v []byte
			k, v, more = z.TagAttr()
			switch string(k) {
			case "type":
				typ = strings.ToLower(string(v))
			case "name":
				name = string(v)
			case "value":
				value = string(v)
			}
		}
		switch {
		case typ == "hidden" && name != "":
			p.hidden.Add(name, value)
		case typ == "password":
			p.password = true
		}
	}
}

// flow runs one complete flow: authorize, login, consent, code exchange, refresh, revoke. It
// appends the latency of each step that answered to out, and returns the first failure.
func (u *user) flow(ctx context.Context, out []sample) ([]sample, error) {
	if !u.cfg.KeepSession {
		u.http.Jar = newJar() // a new browser: no session, so the login page comes
	}
	// state, code_verifier and nonce: 16, 32 and 16 random bytes, base64url.
	rand.Read(u.rnd[:])
	enc := base64.RawURLEncoding
	state, verifier, nonce := enc.EncodeToString(u.rnd[:16]), enc.EncodeToString(u.rnd[16:48]), enc.EncodeToString(u.rnd[48:64])

	// prompt=consent: each flow shows and answers the consent page, which a user's earlier
	// grant to the client would otherwise skip (remembered consent), so every flow does the
	// same work.
	q := url.Values{"client_id": {u.cfg.ClientID}, "redirect_uri": {u.cfg.RedirectURI},
		"response_type": {"code"}, "scope": {u.cfg.Scope}, "state": {state}, "prompt": {"consent"}}
	if u.openid {
		q.Set("nonce", nonce)
	}
	if !u.cfg.NoPKCE {
		sum := sha256.Sum256([]byte(verifier))
		q.Set("code_challenge", enc.EncodeToString(sum[:]))
		q.Set("code_challenge_method", "S256")
	}

	// 1. The authorization request shows the login page (or the consent page to a user whose
	// session cookie was kept).
	d, err := u.page(ctx, http.MethodGet, q)
	if err != nil {
		return out, transportError(stepAuthorize, err)
	}
	out = append(out, sample{stepAuthorize, d})
	if u.resp.status != http.StatusOK {
		return out, fail(stepAuthorize, "HTTP %d", u.resp.status)
	}
	pg := parsePage(u.resp.body.Bytes())
	if pg.action() != "consent" {
		if pg.action() != "login" || !pg.password {
			return out, fail(stepAuthorize, "no login page")
		}
		// 2. The login form: its hidden fields, as a browser posts them, and the user's.
		form := pg.hidden
		form.Set("username", u.cfg.Username)
		form.Set("password", u.cfg.Password)
		d, err = u.page(ctx, http.MethodPost, form)
		if err != nil {
			return out, transportError(stepLogin, err)
		}
		out = append(out, sample{stepLogin, d})
		if u.resp.status != http.StatusOK {
			return out, fail(stepLogin, "HTTP %d", u.resp.status)
		}
		pg = parsePage(u.resp.body.Bytes())
		if action := pg.action(); action != "consent" {
			if action == "login" {
				return out, fail(stepLogin, "login refused")
			}
			return out, fail(stepLogin, "no consent page")
		}
	}

	// 3. The consent form: allow, then a 303 to the client with code and state.
	form := pg.hidden
	if len(form) <= 1 { // the action field alone: no request id, no CSRF token
		return out, fail(stepConsent, "no hidden form fields")
	}
	form.Set("decision", "allow")
	d, err = u.page(ctx, http.MethodPost, form)
	if err != nil {
		return out, transportError(stepConsent, err)
	}
	out = append(out, sample{stepConsent, d})
	if u.resp.status != http.StatusSeeOther {
		return out, fail(stepConsent, "HTTP %d, want 303", u.resp.status)
	}
	loc := u.resp.location
	if !strings.HasPrefix(loc, u.cfg.RedirectURI) {
		return out, fail(stepConsent, "redirect not to the redirect_uri")
	}
	redirect, err := url.Parse(loc)
	if err != nil {
		return out, fail(stepConsent, "malformed redirect")
	}
	params, err := url.ParseQuery(redirect.RawQuery)
	if err != nil {
		return out, fail(stepConsent, "malformed redirect")
	}
	if e := params.Get("error"); e != "" {
		return out, fail(stepConsent, "redirect error=%s", short(e))
	}
	if params.Get("state") != state {
		return out, fail(stepConsent, "state mismatch")
	}
	code := params.Get("code")
	if code == "" {
		return out, fail(stepConsent, "no code")
	}

	// 4. The code exchange.
	form = url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {u.cfg.RedirectURI}}
	if !u.cfg.NoPKCE {
		form.Set("code_verifier", verifier)
	}
	var tok tokenResponse
	d, err = u.tokenRequest(ctx, stepCode, form, &tok)
	out = appendIf(out, stepCode, d, err)
	if err != nil {
		return out, err
	}
	if u.openid != (tok.IDToken != "") {
		if tok.IDToken == "" {
			return out, fail(stepCode, "no id_token with openid")
		}
		return out, fail(stepCode, "id_token without openid")
	}
	if tok.RefreshToken == "" {
		return out, fail(stepCode, "no refresh_token")
	}

	// 5. The refresh, which rotates the refresh token.
	form = url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}}
	var tok2 tokenResponse
	d, err = u.tokenRequest(ctx, stepRefresh, form, &tok2)
	out = appendIf(out, stepRefresh, d, err)
	if err != nil {
		return out, err
	}
	if tok2.RefreshToken == "" || tok2.AccessToken == "" {
		return out, fail(stepRefresh, "no tokens")
	}

	// 6. The revocation of the new refresh token (RFC 7009: 200 with an empty body).
	form = url.Values{"token": {tok2.RefreshToken}, "token_type_hint": {"refresh_token"}}
	d, err = u.client(ctx, u.ep.revoke, form)
	if err != nil {
		return out, transportError(stepRevoke, err)
	}
	out = append(out, sample{stepRevoke, d})
	if u.resp.status != http.StatusOK {
		return out, fail(stepRevoke, "HTTP %d%s", u.resp.status, oauthError(u.resp.body.Bytes()))
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

// tokenRequest posts form to the token endpoint and decodes the tokens into tok.
func (u *user) tokenRequest(ctx context.Context, step int, form url.Values, tok *tokenResponse) (time.Duration, error) {
	d, err := u.client(ctx, u.ep.token, form)
	if err != nil {
		return d, transportError(step, err)
	}
	if u.resp.status != http.StatusOK {
		return d, fail(step, "HTTP %d%s", u.resp.status, oauthError(u.resp.body.Bytes()))
	}
	if err := json.Unmarshal(u.resp.body.Bytes(), tok); err != nil || tok.AccessToken == "" {
		return d, fail(step, "malformed token response")
	}
	return d, nil
}

// client posts form to the token or revocation endpoint, authenticated as the client. It is a
// back-channel request: no cookies.
func (u *user) client(ctx context.Context, endpoint string, form url.Values) (time.Duration, error) {
	if u.auth == "" {
		form.Set("client_id", u.cfg.ClientID)
		form.Set("client_secret", u.cfg.ClientSecret)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if u.auth != "" {
		req.Header.Set("Authorization", u.auth)
	}
	return u.send(req, false)
}

// page sends a browser request to the authorization endpoint with the user's cookies (kept by
// the client's jar): a GET with q as its query, or a POST with q as its form.
func (u *user) page(ctx context.Context, method string, q url.Values) (time.Duration, error) {
	var req *http.Request
	var err error
	if method == http.MethodGet {
		req, err = http.NewRequestWithContext(ctx, method, u.ep.authorize+"?"+q.Encode(), nil)
	} else {
		req, err = http.NewRequestWithContext(ctx, method, u.ep.authorize, strings.NewReader(q.Encode()))
		if err == nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	}
	if err != nil {
		return 0, err
	}
	return u.send(req, true)
}

// send times one request until its whole response is read into u.resp. Only browser requests
// carry the jar's cookies.
func (u *user) send(req *http.Request, browser bool) (time.Duration, error) {
	c := u.back
	if browser {
		c = u.http
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return time.Since(start), err
	}
	u.resp.body.Reset()
	_, err = u.resp.body.ReadFrom(resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	u.resp.status, u.resp.location = resp.StatusCode, resp.Header.Get("Location")
	return d, err
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
