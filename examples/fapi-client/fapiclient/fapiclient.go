// Package fapiclient is the example FAPI 2.0 client of docs/fapi-by-hand.md: given the
// issuer, its client_id and its private key, it runs the authorization code flow as the FAPI
// 2.0 Security Profile (Final) asks of a client (pushed authorization request, PKCE S256,
// private_key_jwt, DPoP-bound tokens, the iss check of RFC 9207), and prints every message it
// sends and receives, tokens and signed values truncated. It speaks to the server over HTTP
// only and links none of the server's code, as a third party's client would.
package fapiclient

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Config is what the client is given.
type Config struct {
	// Issuer is the authorization server's issuer identifier; discovery is read from it.
	Issuer string
	// ClientID is the client's registered client_id.
	ClientID string
	// KeyFile is the client's private key (PEM), whose public half is registered (jwks).
	KeyFile string
	// KeyID is the kid the key is registered under; "" is its RFC 7638 thumbprint (what
	// `authctl clients keygen` registers).
	KeyID string
	// RedirectURI is a registered redirect URI. An http loopback one (127.0.0.1, [::1],
	// localhost) is listened on, unless Paste.
	RedirectURI string
	// Scope is the scope asked for.
	Scope string
	// Paste reads the URL the browser was redirected to from In instead of listening.
	Paste bool
	// Timeout bounds the wait for the browser's redirect on the loopback listener (a paste is
	// waited for as long as In stays open).
	Timeout time.Duration

	// In is where a pasted redirect URL is read; Out is where the messages are printed.
	In  io.Reader
	Out io.Writer
	// Listener, if set, is the loopback listener of RedirectURI (tests pass one on a free
	// port); nil listens on RedirectURI's host and port.
	Listener net.Listener
	// OnAuthorizationURL, if set, is called with the URL for the user's browser once it is
	// printed (a test drives its browser from it).
	OnAuthorizationURL func(string)
}

// Result is what the flow obtained; the tokens are for the caller, and printed only truncated.
type Result struct {
	Code, AccessToken, RefreshToken, IDToken, TokenType string
	// DPoPJKT is the thumbprint of the key the tokens are bound to (cnf.jkt).
	DPoPJKT string
	// IDTokenClaims are the id_token's claims, verified; UserInfo is userinfo's answer.
	IDTokenClaims, UserInfo map[string]any
}

// metadata is the part of the discovery document the flow uses (RFC 8414, RFC 9126 5).
type metadata struct {
	Issuer                 string   `json:"issuer"`
	AuthorizationEndpoint  string   `json:"authorization_endpoint"`
	TokenEndpoint          string   `json:"token_endpoint"`
	PAREndpoint            string   `json:"pushed_authorization_request_endpoint"`
	UserinfoEndpoint       string   `json:"userinfo_endpoint"`
	DPoPAlgs               []string `json:"dpop_signing_alg_values_supported"`
	IssParameterSupported  bool     `json:"authorization_response_iss_parameter_supported"`
	AssertionSigningAlgs   []string `json:"token_endpoint_auth_signing_alg_values_supported"`
	IDTokenSigningAlgs     []string `json:"id_token_signing_alg_values_supported"`
	CodeChallengeMethods   []string `json:"code_challenge_methods_supported"`
	TokenEndpointAuthMeths []string `json:"token_endpoint_auth_methods_supported"`
}

// flow is one run's state.
type flow struct {
	cfg   Config
	http  *http.Client
	key   *clientKey
	dpop  *dpopKey
	meta  metadata
	nonce string // the authorization server's last DPoP nonce (RFC 9449 8)
	say   func(format string, args ...any)
}

// Run runs the flow once and returns what it obtained. It stops at the first check that fails
// and sends nothing after it: a redirect with another state or iss never reaches the token
// endpoint.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Scope == "" {
		cfg.Scope = "openid"
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Minute
	}
	f := &flow{cfg: cfg, say: func(format string, args ...any) { fmt.Fprintf(cfg.Out, format+"\n", args...) }}
	f.http = &http.Client{
		Transport: &printer{out: cfg.Out, next: http.DefaultTransport},
		Timeout:   30 * time.Second,
		// The server's answers are read as they are: a redirect is never followed.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	var err error
	if f.key, err = readClientKey(cfg.KeyFile, cfg.KeyID); err != nil {
		return nil, fmt.Errorf("client key: %w", err)
	}
	if f.dpop, err = newDPoPKey(); err != nil {
		return nil, fmt.Errorf("DPoP key: %w", err)
	}
	f.say("client %s signs its assertions %s with kid %s; its tokens will be bound to the DPoP key %s (ES256, made for this run)",
		cfg.ClientID, f.key.alg, f.key.kid, f.dpop.jkt)

	// 1. Discovery: go-oidc reads the document and checks its issuer is the one asked for.
	f.say("\n# 1. Discovery (OpenID Connect Discovery 1.0, RFC 8414)")
	ctx = oidc.ClientContext(ctx, f.http)
	provider, err := oidc.NewProvider(ctx, cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	if err := provider.Claims(&f.meta); err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	if f.meta.PAREndpoint == "" {
		return nil, errors.New("discovery: the server announces no pushed_authorization_request_endpoint (FAPI 2.0 5.3.2.2 needs PAR)")
	}
	f.say("PAR %s\nauthorization %s\ntoken %s\nuserinfo %s", f.meta.PAREndpoint, f.meta.AuthorizationEndpoint, f.meta.TokenEndpoint, f.meta.UserinfoEndpoint)

	// 2. The pushed authorization request: client assertion, DPoP proof, PKCE.
	f.say("\n# 2. Pushed authorization request (RFC 9126) with private_key_jwt (RFC 7523) and a DPoP proof (RFC 9449)")
	verifier := oauth2.GenerateVerifier()
	state, nonce := rand.Text(), rand.Text()
	var par struct {
		RequestURI string `json:"request_uri"`
		ExpiresIn  int    `json:"expires_in"`
	}
	err = f.post(ctx, f.meta.PAREndpoint, http.StatusCreated, url.Values{
		"response_type": {"code"}, "client_id": {cfg.ClientID}, "redirect_uri": {cfg.RedirectURI}, "scope": {cfg.Scope},
		"state": {state}, "nonce": {nonce},
		"code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "code_challenge_method": {"S256"},
	}, &par)
	if err != nil {
		return nil, fmt.Errorf("pushed authorization request: %w", err)
	}
	if par.RequestURI == "" {
		return nil, errors.New("pushed authorization request: no request_uri in the answer")
	}

	// 3. The browser: the user signs in and consents; the redirect comes back here.
	authURL, err := url.Parse(f.meta.AuthorizationEndpoint)
	if err != nil {
		return nil, fmt.Errorf("authorization endpoint: %w", err)
	}
	q := authURL.Query()
	q.Set("client_id", cfg.ClientID)
	q.Set("request_uri", par.RequestURI)
	authURL.RawQuery = q.Encode()
	f.say("\n# 3. Open this URL in a browser within %d seconds, sign in and consent:\n\n    %s\n", par.ExpiresIn, authURL)
	redirect, err := f.awaitRedirect(ctx, authURL.String())
	if err != nil {
		return nil, err
	}
	f.say("<-- the browser was redirected to %s", redactedURL(redirect))
	code, err := f.checkRedirect(redirect, state)
	if err != nil {
		return nil, err
	}
	f.say("state and iss are as expected (RFC 9207: the response comes from %s)", f.meta.Issuer)

	// 4. The token request: the code with its PKCE verifier, a new assertion, a new proof.
	f.say("\n# 4. Token request: the code, the PKCE verifier (RFC 7636), private_key_jwt, a DPoP proof")
	var tok struct {
		AccessToken  string `json:"access_token"`
		TokenType    string `json:"token_type"`
		RefreshToken string `json:"refresh_token"`
		IDToken      string `json:"id_token"`
		ExpiresIn    int    `json:"expires_in"`
		Scope        string `json:"scope"`
	}
	err = f.post(ctx, f.meta.TokenEndpoint, http.StatusOK, url.Values{
		"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {cfg.RedirectURI}, "code_verifier": {verifier},
	}, &tok)
	if err != nil {
		return nil, fmt.Errorf("token request: %w", err)
	}
	if !strings.EqualFold(tok.TokenType, "DPoP") || tok.AccessToken == "" {
		return nil, fmt.Errorf("token request: token_type %q, want a DPoP-bound access token (FAPI 2.0 5.3.2.1)", tok.TokenType)
	}
	res := &Result{Code: code, AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, IDToken: tok.IDToken,
		TokenType: tok.TokenType, DPoPJKT: f.dpop.jkt}

	// 5. The id_token, verified with the server's JWKS (go-oidc), and its nonce.
	if tok.IDToken != "" {
		f.say("\n# 5. The id_token, verified against the JWKS (OpenID Connect Core 3.1.3.7)")
		idt, err := provider.Verifier(&oidc.Config{ClientID: cfg.ClientID, SupportedSigningAlgs: []string{oidc.PS256, oidc.ES256}}).
			Verify(ctx, tok.IDToken)
		if err != nil {
			return nil, fmt.Errorf("id_token: %w", err)
		}
		if idt.Nonce != nonce {
			return nil, errors.New("id_token: its nonce is not the one sent")
		}
		if err := idt.Claims(&res.IDTokenClaims); err != nil {
			return nil, fmt.Errorf("id_token: %w", err)
		}
		claims, _ := json.MarshalIndent(res.IDTokenClaims, "    ", "  ")
		f.say("    %s", claims)
	}

	// 6. A resource: userinfo with the DPoP-bound access token and a proof carrying ath.
	if f.meta.UserinfoEndpoint != "" {
		f.say("\n# 6. UserInfo with the DPoP-bound access token (RFC 9449 7.1: Authorization: DPoP, a proof with ath)")
		if res.UserInfo, err = f.userinfo(ctx, tok.AccessToken); err != nil {
			return nil, fmt.Errorf("userinfo: %w", err)
		}
	}
	f.say("\nDone: tokens of type %s bound to %s, scope %q.", tok.TokenType, f.dpop.jkt, tok.Scope)
	return res, nil
}

// oauthError is an error response of the authorization server (RFC 6749 5.2).
type oauthError struct {
	Status      int
	Code        string `json:"error"`
	Description string `json:"error_description"`
}

func (e *oauthError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Description)
}

// post sends a form to an endpoint of the authorization server, authenticated with a new
// client assertion and carrying a new DPoP proof. Asked for a nonce (400 use_dpop_nonce, RFC
// 9449 8), it sends the request once more with new ones carrying it.
func (f *flow) post(ctx context.Context, endpoint string, want int, form url.Values, into any) error {
	for attempt := 0; ; attempt++ {
		now := time.Now()
		assertion, err := f.key.assertion(f.cfg.ClientID, f.meta.Issuer, now)
		if err != nil {
			return err
		}
		proof, err := f.dpop.proof(http.MethodPost, endpoint, f.nonce, "", now)
		if err != nil {
			return err
		}
		body := url.Values{"client_id": {f.cfg.ClientID},
			"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"}, "client_assertion": {assertion}}
		for k, v := range form {
			body[k] = v
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(body.Encode()))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("DPoP", proof)
		resp, err := f.http.Do(req)
		if err != nil {
			return err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if n := resp.Header.Get("DPoP-Nonce"); n != "" {
			f.nonce = n
		}
		if resp.StatusCode == want {
			return json.Unmarshal(b, into)
		}
		oe := &oauthError{Status: resp.StatusCode}
		json.Unmarshal(b, oe)
		if oe.Code == "use_dpop_nonce" && attempt == 0 && resp.Header.Get("DPoP-Nonce") != "" {
			f.say("(the server asks for its DPoP nonce: the same request again, with new proofs carrying it)")
			continue
		}
		return oe
	}
}

// userinfo calls the UserInfo endpoint with the access token and a proof bound to it.
func (f *flow) userinfo(ctx context.Context, accessToken string) (map[string]any, error) {
	proof, err := f.dpop.proof(http.MethodGet, f.meta.UserinfoEndpoint, "", accessToken, time.Now())
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.meta.UserinfoEndpoint, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "DPoP "+accessToken)
	req.Header.Set("DPoP", proof)
	resp, err := f.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s (WWW-Authenticate: %s)", resp.Status, resp.Header.Get("WWW-Authenticate"))
	}
	var out map[string]any
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// checkRedirect checks the authorization response before anything is sent with its code: it
// came to our redirect URI, carries our state, and the issuer we sent the user to (RFC 9207
// 2.4: the server announces authorization_response_iss_parameter_supported, so a response
// without iss, or with another, is refused; the mix-up defence FAPI 2.0 relies on); an error
// response is reported as such.
func (f *flow) checkRedirect(u *url.URL, state string) (string, error) {
	want, err := url.Parse(f.cfg.RedirectURI)
	if err != nil {
		return "", err
	}
	if u.Scheme != want.Scheme || u.Host != want.Host || u.Path != want.Path {
		return "", fmt.Errorf("the redirect went to %s://%s%s, not to the redirect URI %s", u.Scheme, u.Host, u.Path, f.cfg.RedirectURI)
	}
	q := u.Query()
	if q.Get("state") != state {
		return "", errors.New("the redirect's state is not the one sent: refusing the response (CSRF, RFC 6749 10.12)")
	}
	if q.Get("iss") != f.meta.Issuer {
		return "", fmt.Errorf("the redirect's iss is %q, not the issuer %s: refusing the response (RFC 9207 2.4, mix-up)", q.Get("iss"), f.meta.Issuer)
	}
	if e := q.Get("error"); e != "" {
		return "", fmt.Errorf("the authorization was refused: %s: %s", e, q.Get("error_description"))
	}
	if q.Get("code") == "" {
		return "", errors.New("the redirect carries no code")
	}
	return q.Get("code"), nil
}

// isLoopback reports whether a redirect URI can be listened on here: http on 127.0.0.1,
// [::1] or localhost (RFC 8252 7.3).
func isLoopback(u *url.URL) bool {
	h := u.Hostname()
	return u.Scheme == "http" && (h == "localhost" || net.ParseIP(h).IsLoopback())
}

// awaitRedirect waits for the URL the browser is redirected to: on the loopback listener, or
// pasted on In.
func (f *flow) awaitRedirect(ctx context.Context, authURL string) (*url.URL, error) {
	ru, err := url.Parse(f.cfg.RedirectURI)
	if err != nil {
		return nil, fmt.Errorf("redirect URI: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	if f.cfg.Paste || !isLoopback(ru) {
		if f.cfg.OnAuthorizationURL != nil {
			f.cfg.OnAuthorizationURL(authURL)
		}
		return f.readPasted()
	}
	ln := f.cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", ru.Host); err != nil {
			return nil, fmt.Errorf("listen on the redirect URI %s: %w (or use --paste)", f.cfg.RedirectURI, err)
		}
	}
	got := make(chan *url.URL, 1)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != ru.Path {
			http.NotFound(w, r)
			return
		}
		u := *ru
		u.RawQuery = r.URL.RawQuery
		select {
		case got <- &u:
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			io.WriteString(w, "The client received the authorization response; the rest is in its terminal. You can close this page.\n")
		default:
			http.Error(w, "This client already received its authorization response.", http.StatusConflict)
		}
	})}
	go srv.Serve(ln)
	defer srv.Close()
	f.say("Listening on %s for the redirect ...", f.cfg.RedirectURI)
	if f.cfg.OnAuthorizationURL != nil {
		f.cfg.OnAuthorizationURL(authURL)
	}
	select {
	case u := <-got:
		return u, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("no redirect to %s: %w", f.cfg.RedirectURI, ctx.Err())
	}
}

// readPasted reads the redirect URL the user pastes.
func (f *flow) readPasted() (*url.URL, error) {
	if f.cfg.In == nil {
		return nil, errors.New("no input to read the redirect URL from")
	}
	f.say("Paste the URL the browser was redirected to (its address bar), then Enter:")
	sc := bufio.NewScanner(f.cfg.In)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<10)
	if !sc.Scan() {
		return nil, fmt.Errorf("no redirect URL was pasted: %v", sc.Err())
	}
	u, err := url.Parse(strings.TrimSpace(sc.Text()))
	if err != nil {
		return nil, fmt.Errorf("the pasted redirect URL: %w", err)
	}
	return u, nil
}
