package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/acmebank/authserver/shared/app"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/httpapi"
	"github.com/acmebank/authserver/shared/store/dynamo"
)

// endpointVar hands the tests DynamoDB Local's endpoint (scripts/dynamodb-local.sh start).
const endpointVar = "DYNAMODB_LOCAL_ENDPOINT"

// tool runs authctl in-process against one store, with the environment a shell set up for
// the service would have. Its env is the only environment the command sees (besides the AWS
// SDK's own variables), so tests run side by side.
type tool struct {
	t   *testing.T
	env map[string]string
}

// embeddedTool is authctl over a fresh embedded store in a temporary data directory.
func embeddedTool(t *testing.T) *tool {
	t.Helper()
	return &tool{t: t, env: map[string]string{
		config.EnvStore:   "embedded",
		config.EnvDataDir: t.TempDir(),
		// argon2id at a cost that keeps tests fast; the cost is a parameter of the hash.
		config.EnvPasswordTime:   "1",
		config.EnvPasswordMemory: "64",
	}}
}

// dynamoTool is authctl over a uniquely named table in DynamoDB Local, created with the tool's
// own `table create` and deleted afterwards. It skips the test when DynamoDB Local is not
// configured, and fails it in CI, which always configures it.
func dynamoTool(t *testing.T) *tool {
	t.Helper()
	ep := os.Getenv(endpointVar)
	if ep == "" {
		msg := endpointVar + " is unset: run `eval \"$(bash scripts/dynamodb-local.sh start)\"` to test against DynamoDB Local"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	var b [6]byte
	rand.Read(b[:])
	table := "authctl-test-" + hex.EncodeToString(b[:])
	tl := &tool{t: t, env: map[string]string{
		config.EnvStore:          "dynamodb",
		config.EnvTable:          table,
		config.EnvDynamoEndpoint: ep,
		// Local signing keys live here; the registry is in the table.
		config.EnvDataDir:        t.TempDir(),
		config.EnvPasswordTime:   "1",
		config.EnvPasswordMemory: "64",
	}}
	for range 2 { // the second run finds the table and succeeds: create is idempotent
		if out := tl.ok("", "table", "create", "-o", "json"); !strings.Contains(out, `"active": true`) {
			t.Fatalf("table create answered %s", out)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		client, err := dynamo.NewClient(ctx, ep)
		if err != nil {
			t.Errorf("dynamodb client: %v", err)
			return
		}
		if _, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
			t.Errorf("delete table %s: %v", table, err)
		}
	})
	return tl
}

func (tl *tool) lookup(k string) (string, bool) {
	v, ok := tl.env[k]
	return v, ok
}

// run executes one command line with stdin and returns stdout, stderr and the exit code.
func (tl *tool) run(stdin string, args ...string) (string, string, int) {
	tl.t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, streams{in: strings.NewReader(stdin), out: &out, err: &errb}, tl.lookup)
	return out.String(), errb.String(), code
}

// ok runs a command that must succeed and returns its stdout.
func (tl *tool) ok(stdin string, args ...string) string {
	tl.t.Helper()
	out, errOut, code := tl.run(stdin, args...)
	if code != exitOK {
		tl.t.Fatalf("authctl %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// okJSON runs a command with -o json that must succeed and decodes its output into v.
func (tl *tool) okJSON(v any, stdin string, args ...string) {
	tl.t.Helper()
	out := tl.ok(stdin, append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		tl.t.Fatalf("authctl %s -o json: %v in %s", strings.Join(args, " "), err, out)
	}
}

// server is the real service (app.New, every handler) over the tool's store, on httptest.
type server struct {
	t   *testing.T
	srv *httptest.Server
	app *app.App
}

// serve starts the service over the store the tool uses. The embedded store admits one
// process at a time, so tests stop the server before running the tool again, as an operator
// stops the local server.
func (tl *tool) serve() *server {
	t := tl.t
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	cfg, err := config.FromLookup(func(k string) (string, bool) {
		if k == config.EnvBaseURL {
			return base, true
		}
		return tl.lookup(k)
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg.ClientCacheTTL = 0
	a, err := app.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	mux, err := a.Mux()
	if err != nil {
		a.Close()
		t.Fatal(err)
	}
	srv.Config.Handler = mux
	srv.Start()
	s := &server{t: t, srv: srv, app: a}
	t.Cleanup(s.stop)
	return s
}

func (s *server) stop() {
	if s.srv == nil {
		return
	}
	s.srv.Close()
	s.app.Close()
	s.srv = nil
}

func (s *server) url(path string) string { return s.srv.URL + path }

// tokenValid reports whether the service accepts an access token (what the API Gateway
// authorizer asks).
func (s *server) tokenValid(token string) bool {
	_, err := s.app.Service.ValidateAccessToken(context.Background(), token, "")
	return err == nil
}

// browser is a scripted user agent, adapted from test/e2e: it keeps cookies, reads the hidden
// fields of our forms, posts them like a browser, and stops at the redirect to the client.
type browser struct {
	t      *testing.T
	client *http.Client
	last   string
	form   url.Values
}

func newBrowser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

var hiddenRe = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`)

func (b *browser) read(resp *http.Response) *http.Response {
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	b.last = string(body)
	b.form = url.Values{}
	for _, m := range hiddenRe.FindAllStringSubmatch(b.last, -1) {
		b.form.Set(m[1], m[2])
	}
	return resp
}

func (b *browser) open(u string) *http.Response {
	b.t.Helper()
	resp, err := b.client.Get(u)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.read(resp)
}

func (b *browser) submit(action string, fields url.Values) *http.Response {
	b.t.Helper()
	v := url.Values{}
	for k := range b.form {
		v.Set(k, b.form.Get(k))
	}
	for k := range fields {
		v.Set(k, fields.Get(k))
	}
	resp, err := b.client.PostForm(action, v)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.read(resp)
}

// signIn opens an authorization URL, signs in and consents, and returns the redirect to the
// client; it fails the test when any page is not the one expected.
func (s *server) signIn(t *testing.T, authURL, username, password string) *url.URL {
	t.Helper()
	b := newBrowser(t)
	if resp := b.open(authURL); resp.StatusCode != http.StatusOK || !strings.Contains(b.last, `type="password"`) {
		t.Fatalf("authorize answered %d, not the login page: %.400s", resp.StatusCode, b.last)
	}
	resp := b.submit(s.url(httpapi.PathAuthorize), url.Values{"username": {username}, "password": {password}})
	if resp.StatusCode == http.StatusSeeOther { // the user's consent was remembered (an earlier grant covers it)
		loc, err := url.Parse(resp.Header.Get("Location"))
		if err != nil {
			t.Fatal(err)
		}
		return loc
	}
	if !strings.Contains(b.last, `value="allow"`) {
		t.Fatalf("after login, not the consent page: %.400s", b.last)
	}
	resp = b.submit(s.url(httpapi.PathAuthorize), url.Values{"decision": {"allow"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("consent answered %d, want 303: %.300s", resp.StatusCode, b.last)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// postForm posts a form to the service and returns the status and the JSON body.
func (s *server) postForm(t *testing.T, path string, form url.Values) (int, map[string]any) {
	t.Helper()
	resp, err := http.PostForm(s.url(path), form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

// tempFile writes content to a file in a temporary directory and returns its path.
func tempFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
