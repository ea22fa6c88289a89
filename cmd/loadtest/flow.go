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
	"net/url"
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

// endpoints are where a flow's requests go, resolved once from the base URL: the server to
// connect to and the request paths (base path prefix included).
type endpoints struct {
	target                   target
	authorize, token, revoke string
}

func resolve(base string) (endpoints, error) {
	b, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || (b.Scheme != "http" && b.Scheme != "https") || b.Host == "" || b.RawQuery != "" || b.Fragment != "" {
		return endpoints{}, fmt.Errorf("base URL %q: want http(s)://host[:port][/prefix]", base)
	}
	prefix := b.EscapedPath()
	return endpoints{
		target:    newTarget(b),
		authorize: prefix + httpapi.PathAuthorize,
		token:     prefix + httpapi.PathToken,
		revoke:    prefix + httpapi.PathRevoke,
	}, nil
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

// user is one simulated user: a browser (its cookies and its keep-alive connection) that runs
// flows one after another. Its buffers are reused from request to request.
type user struct {
	cfg  *Config
	ep   endpoints
	conn conn
	jar  jar
	auth string   // Authorization header of client_secret_basic, or "" for client_secret_post
	resp response // the response last read
	q    form     // the query or form being built
	rnd  [64]byte
	text []byte // rnd in base64url: state, code_verifier, nonce
	tok  [2]tokenResponse
	// openid is whether the scope asks for openid (and so an id_token is due), read once.
	openid bool
}

func newUser(cfg *Config, ep endpoints) *user {
	u := &user{cfg: cfg, ep: ep, conn: conn{t: ep.target, timeout: cfg.Timeout}, openid: cfg.openid()}
	u.jar.https = ep.target.tls != nil
	host, _, _ := net.SplitHostPort(ep.target.addr)
	u.jar.host = strings.ToLower(host)
	if cfg.AuthMethod != "post" {
		// RFC 6749 section 2.3.1: both parts form-encoded, then Basic.
		cred := url.QueryEscape(cfg.ClientID) + ":" + url.QueryEscape(cfg.ClientSecret)
		u.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(cred))
	}
	return u
}

// close ends the user's connection.
func (u *user) close() { u.conn.close() }

// sample is the latency of one step of a flow.
type sample struct {
	step int
	d    time.Duration
}

// The marker of our forms' action field, and the login page's password field.
var (
	actionField  = []byte(`name="action" value="`)
	passwordType = []byte(`type="password"`)
)

// formAction returns the action of the page's form ("login", "consent"), or "" when the page
// has none: one scan of the page for the hidden action field.
func formAction(page []byte) string {
	i := bytes.Index(page, actionField)
	if i < 0 {
		return ""
	}
	v, _, ok := bytes.Cut(page[i+len(actionField):], []byte(`"`))
	switch {
	case !ok:
		return ""
	case string(v) == "login":
		return "login"
	case string(v) == "consent":
		return "consent"
	}
	return "other"
}

// flow runs one complete flow: authorize, login, consent, code exchange, refresh, revoke. It
// appends the latency of each step that answered to out, and returns the first failure.
func (u *user) flow(ctx context.Context, out []sample) ([]sample, error) {
	if !u.cfg.KeepSession {
		u.jar.reset() // a new browser: no session, so the login page comes
	}
	// state, code_verifier and nonce: 16, 32 and 16 random bytes, base64url.
	rand.Read(u.rnd[:])
	u.text = base64.RawURLEncoding.AppendEncode(u.text[:0], u.rnd[:16])
	u.text = base64.RawURLEncoding.AppendEncode(u.text, u.rnd[16:48])
	u.text = base64.RawURLEncoding.AppendEncode(u.text, u.rnd[48:64])
	state, verifier, nonce := u.text[:22], u.text[22:65], u.text[65:87]

	u.q.reset()
	u.q.add("client_id", u.cfg.ClientID)
	u.q.add("redirect_uri", u.cfg.RedirectURI)
	u.q.add("response_type", "code")
	u.q.add("scope", u.cfg.Scope)
	u.q.addBytes("state", state)
	if u.openid {
		u.q.addBytes("nonce", nonce)
	}
	if !u.cfg.NoPKCE {
		sum := sha256.Sum256(verifier)
		var challenge [43]byte
		base64.RawURLEncoding.Encode(challenge[:], sum[:])
		u.q.addBytes("code_challenge", challenge[:])
		u.q.add("code_challenge_method", "S256")
	}

	// 1. The authorization request shows the login page (or the consent page to a user whose
	// session cookie was kept).
	d, err := u.page(ctx, http.MethodGet)
	if err != nil {
		return out, transportError(stepAuthorize, err)
	}
	out = append(out, sample{stepAuthorize, d})
	if u.resp.status != http.StatusOK {
		return out, fail(stepAuthorize, "HTTP %d", u.resp.status)
	}
	if formAction(u.resp.body) != "consent" {
		if formAction(u.resp.body) != "login" || !bytes.Contains(u.resp.body, passwordType) {
			return out, fail(stepAuthorize, "no login page")
		}
		// 2. The login form.
		if err := u.formOf(stepAuthorize); err != nil {
			return out, err
		}
		u.q.add("username", u.cfg.Username)
		u.q.add("password", u.cfg.Password)
		d, err = u.page(ctx, http.MethodPost)
		if err != nil {
			return out, transportError(stepLogin, err)
		}
		out = append(out, sample{stepLogin, d})
		if u.resp.status != http.StatusOK {
			return out, fail(stepLogin, "HTTP %d", u.resp.status)
		}
		if action := formAction(u.resp.body); action != "consent" {
			if action == "login" {
				return out, fail(stepLogin, "login refused")
			}
			return out, fail(stepLogin, "no consent page")
		}
	}

	// 3. The consent form: allow, then a 303 to the client with code and state.
	if err := u.formOf(stepConsent); err != nil {
		return out, err
	}
	u.q.add("decision", "allow")
	d, err = u.page(ctx, http.MethodPost)
	if err != nil {
		return out, transportError(stepConsent, err)
	}
	out = append(out, sample{stepConsent, d})
	if u.resp.status != http.StatusSeeOther {
		return out, fail(stepConsent, "HTTP %d, want 303", u.resp.status)
	}
	loc := u.resp.location
	if !bytes.HasPrefix(loc, []byte(u.cfg.RedirectURI)) {
		return out, fail(stepConsent, "redirect not to the redirect_uri")
	}
	var code, gotState, oauthErr []byte
	var seenCode, seenState, seenErr bool
	err = queryParams(loc, func(name, value []byte) {
		switch string(name) { // the first of each, as url.Values.Get reads them
		case "code":
			if !seenCode {
				code, seenCode = value, true
			}
		case "state":
			if !seenState {
				gotState, seenState = value, true
			}
		case "error":
			if !seenErr {
				oauthErr, seenErr = value, true
			}
		}
	})
	if err != nil {
		return out, fail(stepConsent, "malformed redirect")
	}
	if len(oauthErr) > 0 {
		return out, fail(stepConsent, "redirect error=%s", short(string(oauthErr)))
	}
	if !bytes.Equal(gotState, state) {
		return out, fail(stepConsent, "state mismatch")
	}
	if len(code) == 0 {
		return out, fail(stepConsent, "no code")
	}

	// 4. The code exchange. (code aliases the response buffer: the form is built before the
	// next request reads into it.)
	u.q.reset()
	u.q.add("grant_type", "authorization_code")
	u.q.addBytes("code", code)
	u.q.add("redirect_uri", u.cfg.RedirectURI)
	if !u.cfg.NoPKCE {
		u.q.addBytes("code_verifier", verifier)
	}
	tok := &u.tok[0]
	d, err = u.tokenRequest(ctx, stepCode, tok)
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
	u.q.reset()
	u.q.add("grant_type", "refresh_token")
	u.q.add("refresh_token", tok.RefreshToken)
	tok2 := &u.tok[1]
	d, err = u.tokenRequest(ctx, stepRefresh, tok2)
	out = appendIf(out, stepRefresh, d, err)
	if err != nil {
		return out, err
	}
	if tok2.RefreshToken == "" || tok2.AccessToken == "" {
		return out, fail(stepRefresh, "no tokens")
	}

	// 6. The revocation of the new refresh token (RFC 7009: 200 with an empty body).
	u.q.reset()
	u.q.add("token", tok2.RefreshToken)
	u.q.add("token_type_hint", "refresh_token")
	d, err = u.client(ctx, u.ep.revoke)
	if err != nil {
		return out, transportError(stepRevoke, err)
	}
	out = append(out, sample{stepRevoke, d})
	if u.resp.status != http.StatusOK {
		return out, fail(stepRevoke, "HTTP %d%s", u.resp.status, oauthError(u.resp.body))
	}
	return out, nil
}

// formOf starts the form of the page just read with its hidden fields, as a browser posts
// them; the caller adds the fields the user fills in.
func (u *user) formOf(step int) error {
	u.q.reset()
	n := 0
	err := hiddenFields(u.resp.body, func(name, value []byte) {
		u.q.addField(name, value)
		n++
	})
	if err != nil || n == 0 {
		return fail(step, "no hidden form fields")
	}
	return nil
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

// tokenRequest posts the form in u.q to the token endpoint and decodes the tokens into tok.
func (u *user) tokenRequest(ctx context.Context, step int, tok *tokenResponse) (time.Duration, error) {
	*tok = tokenResponse{}
	d, err := u.client(ctx, u.ep.token)
	if err != nil {
		return d, transportError(step, err)
	}
	if u.resp.status != http.StatusOK {
		return d, fail(step, "HTTP %d%s", u.resp.status, oauthError(u.resp.body))
	}
	if err := json.Unmarshal(u.resp.body, tok); err != nil || tok.AccessToken == "" {
		return d, fail(step, "malformed token response")
	}
	return d, nil
}

// client sends the form in u.q to the token or revocation endpoint, authenticated as the
// client (no cookies: a back-channel request).
func (u *user) client(ctx context.Context, path string) (time.Duration, error) {
	if u.auth == "" {
		u.q.add("client_id", u.cfg.ClientID)
		u.q.add("client_secret", u.cfg.ClientSecret)
	}
	return u.send(ctx, &request{method: http.MethodPost, path: path, auth: u.auth, form: u.q.b})
}

// page sends a browser request to the authorization endpoint with the user's cookies: a GET
// with u.q as its query, or a POST with u.q as its form; the response's cookies are kept.
func (u *user) page(ctx context.Context, method string) (time.Duration, error) {
	req := request{method: method, path: u.ep.authorize, cookie: u.jar.headerFor(u.ep.authorize)}
	if method == http.MethodGet {
		req.query = u.q.b
	} else {
		req.form = u.q.b
	}
	d, err := u.send(ctx, &req)
	if err == nil && len(u.resp.setCookies) > 0 {
		u.jar.set(u.resp.setCookies, time.Now())
	}
	return d, err
}

// send times one request until its whole response is read into u.resp.
func (u *user) send(ctx context.Context, req *request) (time.Duration, error) {
	start := time.Now()
	err := u.conn.do(ctx, req, &u.resp)
	return time.Since(start), err
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
	case errors.Is(err, errMalformed):
		kind = "malformed response"
	}
	return &flowError{step: step, kind: "transport: " + kind}
}
