package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/pem"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acmebank/authserver/examples/fapi-client/fapiclient"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/oauth"
)

// docShellLines returns the lines of a document's sh blocks, continuations joined, without
// blank lines and comments.
func docShellLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(data), -1) {
		for _, line := range strings.Split(strings.ReplaceAll(block[1], "\\\n", " "), "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
				lines = append(lines, l)
			}
		}
	}
	return lines
}

// walkthrough runs the shell lines of docs/fapi-by-hand.md as a shell in the repository root
// would, for the few forms the page uses: `go run ./cmd/authctl ARGS [> FILE]` (in-process,
// against the tool's store), `printf '%s\n' VALUE | go run ./cmd/authctl ARGS` (VALUE on
// stdin), `[NAME=VALUE ...] go run ./cmd/authserver` (the service's handler over the same
// store, with those settings) and `go run ./examples/fapi-client ARGS` (the example client,
// in-process). Relative file names resolve in dir. Any other line fails the test, so the page
// cannot hold a step the test skips.
type walkthrough struct {
	t   *testing.T
	tl  *tool
	dir string
	// ln is the loopback listener standing for the redirect URI's port 4499.
	ln net.Listener
	s  *server
	// user and password are those the page registers, for the browser step.
	user, password string
	// clients are the example client's runs: their configuration, output and result.
	clients []clientRun
}

type clientRun struct {
	cfg fapiclient.Config
	out string
	res *fapiclient.Result
	err error
}

// The page's addresses, replaced by the test's.
const (
	docBase     = "http://127.0.0.1:8080"
	docLoopback = "127.0.0.1:4499"
)

func (w *walkthrough) run(line string) {
	t := w.t
	t.Helper()
	line = strings.ReplaceAll(line, docLoopback, w.ln.Addr().String())
	if w.s != nil {
		line = strings.ReplaceAll(line, docBase, w.s.srv.URL)
	}
	words := shellWords(line)
	stdin := ""
	if i := slices.Index(words, "|"); i >= 0 {
		if i != 3 || words[0] != "printf" || words[1] != `%s\n` {
			t.Fatalf("the page pipes something other than printf '%%s\\n' VALUE: %s", line)
		}
		stdin, words = words[2]+"\n", words[i+1:]
	}
	stdout := ""
	if i := slices.Index(words, ">"); i >= 0 {
		if i != len(words)-2 {
			t.Fatalf("the page redirects other than at the end of the line: %s", line)
		}
		stdout, words = w.path(words[i+1]), words[:i]
	}
	env := map[string]string{}
	for len(words) > 0 && regexp.MustCompile(`^[A-Z_]+=`).MatchString(words[0]) {
		k, v, _ := strings.Cut(words[0], "=")
		env[k], words = v, words[1:]
	}
	if len(words) < 3 || words[0] != "go" || words[1] != "run" {
		t.Fatalf("the page runs something the walkthrough test does not know: %s", line)
	}
	args := words[3:]
	switch words[2] {
	case "./cmd/authctl":
		if len(env) > 0 {
			t.Fatalf("settings before authctl: %s", line)
		}
		for i, a := range args {
			if i > 0 && (args[i-1] == "--out" || args[i-1] == "--jwks-file") {
				args[i] = w.path(a)
			}
		}
		out := w.tl.ok(stdin, args...)
		if stdout != "" {
			if err := os.WriteFile(stdout, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if len(args) >= 3 && args[0] == "users" && args[1] == "create" {
			w.user, w.password = args[2], strings.TrimSuffix(stdin, "\n")
		}
	case "./cmd/authserver":
		if len(args) > 0 || stdin != "" || stdout != "" {
			t.Fatalf("the server's line: %s", line)
		}
		for k, v := range env {
			w.tl.env[k] = v
		}
		w.s = w.tl.serve()
		// What the local server does as it starts (cmd/authserver): the first signing keys.
		if _, err := w.s.app.Rotator().Rotate(context.Background()); err != nil {
			t.Fatal(err)
		}
	case "./examples/fapi-client":
		if w.s == nil || len(env) > 0 || stdin != "" || stdout != "" {
			t.Fatalf("the client runs before the server, or with redirections: %s", line)
		}
		cfg, err := fapiclient.Parse(args, os.Stderr)
		if err != nil {
			t.Fatalf("the page's fapi-client command line: %v", err)
		}
		cfg.KeyFile = w.path(cfg.KeyFile)
		w.clients = append(w.clients, w.client(cfg, nil))
	default:
		t.Fatalf("the page runs %s, which the walkthrough test does not know", words[2])
	}
}

// path resolves a file name of the page in the walkthrough's directory.
func (w *walkthrough) path(name string) string {
	if filepath.IsAbs(name) {
		w.t.Fatalf("the page names an absolute path %s", name)
	}
	return filepath.Join(w.dir, name)
}

// client runs the example client with cfg: its browser step signs in as the page's user and
// consents, then follows the redirect to the client (on the loopback listener), or, in paste
// mode, pastes the redirect's URL, changed by tamper if not nil.
func (w *walkthrough) client(cfg fapiclient.Config, tamper func(*url.URL)) clientRun {
	t := w.t
	t.Helper()
	var out bytes.Buffer
	var pasted bytes.Buffer
	cfg.Out, cfg.In = &out, &pasted
	paste := cfg.Paste || !strings.HasPrefix(cfg.RedirectURI, "http://127.0.0.1:")
	if !paste {
		cfg.Listener = w.ln
	}
	cfg.OnAuthorizationURL = func(authURL string) {
		loc := w.s.signIn(t, authURL, w.user, w.password)
		if paste {
			if tamper != nil {
				tamper(loc)
			}
			pasted.WriteString(loc.String() + "\n")
			return
		}
		resp, err := http.Get(loc.String()) // the browser follows the redirect to the client
		if err != nil {
			t.Fatalf("the browser's redirect to the client: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the client's redirect listener answered %d", resp.StatusCode)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := fapiclient.Run(ctx, cfg)
	return clientRun{cfg: cfg, out: out.String(), res: res, err: err}
}

func newWalkthrough(t *testing.T) *walkthrough {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return &walkthrough{t: t, tl: embeddedTool(t), dir: t.TempDir(), ln: ln}
}

// TestDocsFAPIByHand_TheWalkthroughRunsAsWritten runs docs/fapi-by-hand.md's commands as
// written, in order (only the server's address and the redirect URI's port change): keygen,
// the fapi2 registration, the user, the local server's handler with the DPoP nonce key, and
// the example client, whose browser step signs in as the page's user. The client gets DPoP
// tokens bound to its run's key after the nonce retry, userinfo answers, and its output shows
// each message with no token, code, verifier or private key whole.
func TestDocsFAPIByHand_TheWalkthroughRunsAsWritten(t *testing.T) {
	w := newWalkthrough(t)
	for _, line := range docShellLines(t, "../../docs/fapi-by-hand.md") {
		w.run(line)
	}
	if w.s == nil || len(w.clients) != 1 {
		t.Fatalf("the page started the server %v and ran the client %d times; want once each", w.s != nil, len(w.clients))
	}
	run := w.clients[0]
	t.Logf("the example client's output:\n%s", run.out)
	if run.err != nil {
		t.Fatalf("the example client failed: %v", run.err)
	}
	res := run.res
	if !strings.EqualFold(res.TokenType, "DPoP") || res.AccessToken == "" || res.RefreshToken == "" || res.IDToken == "" {
		t.Fatalf("the example client got %+v", res)
	}
	if res.IDTokenClaims["aud"] != run.cfg.ClientID || res.UserInfo["sub"] == nil || res.UserInfo["email"] != "alice@example.com" {
		t.Fatalf("id_token claims %v, userinfo %v", res.IDTokenClaims, res.UserInfo)
	}
	grants, err := w.s.app.Store.ListGrants(context.Background(), oauth.GrantFilter{ClientID: run.cfg.ClientID}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(grants) != 1 || grants[0].Grant.DPoPJKT != res.DPoPJKT {
		t.Fatalf("the client's grants %+v, want one bound to the run's DPoP key %s", grants, res.DPoPJKT)
	}

	par, token := w.s.url(httpapi.PathPAR), w.s.url(httpapi.PathToken)
	for _, want := range []string{
		"--> POST " + par, `"error": "use_dpop_nonce"`, "<-- 201 Created", `"request_uri": "urn:ietf:params:oauth:request_uri:`,
		"client_assertion_type=urn:ietf:params:oauth:client-assertion-type:jwt-bearer", `"typ":"dpop+jwt"`,
		"--> POST " + token, `"token_type": "DPoP"`, "Authorization: DPoP ", `"ath":"`, "state and iss are as expected",
	} {
		if !strings.Contains(run.out, want) {
			t.Errorf("the client's output lacks %q", want)
		}
	}
	if strings.Count(run.out, "--> POST "+par) != 2 {
		t.Errorf("the PAR request was sent %d times, want twice (the nonce retry)", strings.Count(run.out, "--> POST "+par))
	}
	keyPEM, err := os.ReadFile(w.path("client-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(keyPEM)
	secrets := map[string]string{"access token": res.AccessToken, "refresh token": res.RefreshToken, "id_token": res.IDToken,
		"code": res.Code, "private key (DER, base64)": base64.StdEncoding.EncodeToString(block.Bytes)[:40]}
	for what, s := range secrets {
		if strings.Contains(run.out, s) {
			t.Errorf("the client's output holds the whole %s", what)
		}
	}
	if strings.Contains(run.out, "PRIVATE KEY") {
		t.Error("the client's output holds a private key")
	}
}

// TestFAPIClient_PastedRedirectWithAnotherStateOrIssIsRefusedAndNoTokenRequestIsSent: in
// paste mode the example client exchanges the code of the redirect as the server sent it;
// the same redirect with another state, another iss or no iss (RFC 9207 2.4) is refused
// before anything is sent to the token endpoint, and the code is never printed whole.
func TestFAPIClient_PastedRedirectWithAnotherStateOrIssIsRefusedAndNoTokenRequestIsSent(t *testing.T) {
	w := newWalkthrough(t)
	for _, line := range docShellLines(t, "../../docs/fapi-by-hand.md") {
		if !strings.Contains(line, "./examples/fapi-client") {
			w.run(line)
		}
	}
	base := fapiclient.Config{Issuer: w.s.app.Config.Issuer, ClientID: "budget-app", KeyFile: w.path("client-key.pem"),
		RedirectURI: "http://" + w.ln.Addr().String() + "/callback", Scope: "openid", Paste: true}
	cases := []struct {
		name    string
		tamper  func(*url.URL)
		wantErr string
	}{
		{"as sent", nil, ""},
		{"another state", func(u *url.URL) { setQuery(u, "state", "forged-state") }, "state"},
		{"another iss", func(u *url.URL) { setQuery(u, "iss", "https://attacker.example/") }, "iss"},
		{"no iss", func(u *url.URL) { q := u.Query(); q.Del("iss"); u.RawQuery = q.Encode() }, "iss"},
		{"another redirect URI", func(u *url.URL) { u.Path = "/elsewhere" }, "redirect URI"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w.t = t
			run := w.client(base, c.tamper)
			tokenReq := strings.Contains(run.out, "--> POST "+w.s.url(httpapi.PathToken))
			if c.wantErr == "" {
				if run.err != nil || !tokenReq || run.res.AccessToken == "" {
					t.Fatalf("the redirect as sent: error %v, token request sent %v\n%s", run.err, tokenReq, run.out)
				}
				return
			}
			if run.err == nil || !strings.Contains(run.err.Error(), c.wantErr) {
				t.Fatalf("a redirect with %s: error %v, want one naming %s", c.name, run.err, c.wantErr)
			}
			if tokenReq {
				t.Fatalf("a redirect with %s reached the token endpoint:\n%s", c.name, run.out)
			}
		})
	}
}

func setQuery(u *url.URL, k, v string) {
	q := u.Query()
	q.Set(k, v)
	u.RawQuery = q.Encode()
}

// TestFAPIClient_AnHTTPSRedirectIsPastedAndKidNamesAKeyRegisteredUnderAnotherKid: a client
// whose redirect URI is not a loopback one gets its redirect pasted without --paste; a key
// registered under a kid other than its thumbprint authenticates with --kid naming it, and
// without --kid its assertion is refused at PAR (invalid_client) and nothing further is sent.
func TestFAPIClient_AnHTTPSRedirectIsPastedAndKidNamesAKeyRegisteredUnderAnotherKid(t *testing.T) {
	w := newWalkthrough(t)
	keyPath, jwksPath := w.path("tpp-key.pem"), w.path("tpp-jwks.json")
	jwks := w.tl.ok("", "clients", "keygen", "--alg", "PS256", "--out", keyPath)
	jwks = regexp.MustCompile(`"kid": "[^"]+"`).ReplaceAllString(jwks, `"kid": "tpp-signing-2026"`)
	if err := os.WriteFile(jwksPath, []byte(jwks), 0o644); err != nil {
		t.Fatal(err)
	}
	w.tl.ok("", "clients", "create", "--id", "tpp", "--name", "TPP", "--redirect-uri", "https://tpp.example/cb", "--scope", "openid",
		"--profile", "fapi2", "--dpop", "--auth-method", "private_key_jwt", "--jwks-file", jwksPath, "--id-token-alg", "PS256")
	w.user, w.password = "bob", "correct-horse-battery-staple"
	w.tl.ok(w.password+"\n", "users", "create", w.user, "--password-stdin")
	w.s = w.tl.serve()
	if _, err := w.s.app.Rotator().Rotate(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg := fapiclient.Config{Issuer: w.s.app.Config.Issuer, ClientID: "tpp", KeyFile: keyPath, RedirectURI: "https://tpp.example/cb"}

	run := w.client(cfg, nil)
	if run.err == nil || !strings.Contains(run.err.Error(), "invalid_client") || strings.Contains(run.out, "Paste the URL") {
		t.Fatalf("without --kid: error %v, want invalid_client at PAR and no browser step\n%s", run.err, run.out)
	}
	cfg.KeyID = "tpp-signing-2026"
	run = w.client(cfg, nil)
	if run.err != nil || !strings.EqualFold(run.res.TokenType, "DPoP") || !strings.Contains(run.out, "Paste the URL") {
		t.Fatalf("with --kid and an https redirect URI: error %v\n%s", run.err, run.out)
	}
}
