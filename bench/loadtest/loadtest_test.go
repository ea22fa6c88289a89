package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	clientID     = "acceptance-client"
	clientSecret = "acceptance-secret-0123456789abcdef"
	redirectURI  = "http://127.0.0.1:4499/callback"
	username     = "alice"
	password     = "correct-horse-battery-staple"
)

// serverBin is the service's local server, built once from this repository by TestMain: the
// load driver is tested as it is used, against the real server over loopback, and imports
// nothing of the service.
var serverBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "loadtest-server")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	serverBin = filepath.Join(dir, "authserver")
	build := exec.Command("go", "build", "-o", serverBin, "./cmd/authserver")
	build.Dir = filepath.Join("..", "..") // the service module, next to this one
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	code := 1
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build the local server:", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// newServer starts the local server on a free loopback port over a fresh embedded store,
// seeded with one client and one user whose password has a cheap argon2id cost, and returns
// its base URL and process id. The server is stopped when the test ends.
func newServer(t *testing.T) (string, int) {
	t.Helper()
	dir := t.TempDir()
	seed := fmt.Sprintf(`{"clients": [{"client_id": %q, "client_secret": %q, "name": "Load", "redirect_uris": [%q],
  "scopes": ["openid", "email", "phone", "profile"]}],
 "users": [{"uid": "uid-alice", "username": %q, "password": %q, "email": "alice@example.com", "name": "Alice",
  "companyProfileId": "cp-1", "companyUserId": "cu-1"}]}`, clientID, clientSecret, redirectURI, username, password)
	if err := os.WriteFile(filepath.Join(dir, "seed.json"), []byte(seed), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // free again for the server; a race with another process is unlikely and fails loudly
	var log bytes.Buffer
	cmd := exec.Command(serverBin, "--addr", addr, "--data", filepath.Join(dir, "data"), "--seed", filepath.Join(dir, "seed.json"))
	cmd.Env = append(os.Environ(), "AUTH_STORE=embedded", "AUTH_EMBEDDED_NO_SYNC=true", "AUTH_ARGON2_TIME=1",
		"AUTH_ARGON2_MEMORY_KIB=64", "AUTH_LOG_LEVEL=warn", "AUTH_RATE_LIMIT=false")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	base := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/v2/authentication/oauth2/.well-known/openid-configuration")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base, cmd.Process.Pid
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("server exited: %v\n%s", err, log.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not ready at %s\n%s", base, log.String())
		}
	}
}

func baseConfig(base string) Config {
	return Config{Base: base, ClientID: clientID, ClientSecret: clientSecret, RedirectURI: redirectURI,
		Username: username, Password: password, Scope: "email profile", AuthMethod: "basic",
		Concurrency: 2, Duration: 500 * time.Millisecond} // no warm-up: the first flow counts even when a busy machine makes it slow
}

// TestRun_CompleteFlowsWithoutErrors drives the real server for about a second in every mode
// the load command offers and expects completed flows, every endpoint measured, and no error.
func TestRun_CompleteFlowsWithoutErrors(t *testing.T) {
	base, pid := newServer(t)
	tests := []struct {
		name   string
		modify func(*Config)
	}{
		{"without openid, the server's CPU time", func(c *Config) { c.ServerPID = pid }},
		{"with openid, client_secret_post", func(c *Config) { c.Scope = "openid email"; c.AuthMethod = "post" }},
		{"kept session, no PKCE", func(c *Config) { c.KeepSession = true; c.NoPKCE = true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := baseConfig(base)
			tt.modify(&cfg)
			res, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Errors != 0 {
				t.Fatalf("%d errors: %v", res.Errors, res.ErrorsByKind)
			}
			if res.Flows == 0 || res.FlowsPerSec <= 0 {
				t.Fatalf("no flows: %+v", res)
			}
			for _, name := range order {
				if name == "login" && cfg.KeepSession {
					continue // only the first flow of each user logs in, maybe in the warm-up
				}
				if l := res.Endpoints[name]; l.Count == 0 || l.P50 <= 0 || l.P99 < l.P50 || l.Max < l.P99 {
					t.Errorf("endpoint %s: %+v", name, l)
				}
			}
			if res.StealPct < 0 || res.StealPct > 100 {
				t.Errorf("CPU steal %.1f%% is not a share", res.StealPct)
			}
			if cfg.ServerPID > 0 && (res.CPU.ServerSec <= 0 || res.CPU.ServerMsPerFlow <= 0) {
				t.Errorf("no server CPU time: %+v", res.CPU)
			}
			if got := res.Endpoints["token"].Count; got != res.Endpoints["token_code"].Count+res.Endpoints["token_refresh"].Count {
				t.Errorf("token count %d is not the sum of both grants", got)
			}
		})
	}
}

// TestRun_FailuresAreCountedByKind proves that the load command sees failures: a wrong
// password, a wrong client secret and an unregistered redirect URI each fail every flow, at
// the step where they happen, with no flow counted.
func TestRun_FailuresAreCountedByKind(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Config)
		kind   string
	}{
		{"wrong password", func(c *Config) { c.Password = "wrong-password" }, "login: login refused"},
		{"wrong client secret", func(c *Config) { c.ClientSecret = "wrong" }, "token_code: HTTP 401 invalid_client"},
		{"unregistered redirect URI", func(c *Config) { c.RedirectURI = "http://127.0.0.1:4499/nope" }, "authorize: HTTP 400"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base, _ := newServer(t)
			cfg := baseConfig(base) // a server of its own: failed logins lock the user out
			cfg.Concurrency, cfg.Duration, cfg.Warmup = 1, 200*time.Millisecond, 0
			tt.modify(&cfg)
			res, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Flows != 0 || res.Errors == 0 || res.ErrorsByKind[tt.kind] != res.Errors {
				t.Fatalf("flows %d, errors %d, by kind %v; want all errors of kind %q", res.Flows, res.Errors, res.ErrorsByKind, tt.kind)
			}
		})
	}
}

// TestMain_WritesTableAndJSON runs the command as a user would and reads back its JSON.
func TestMain_WritesTableAndJSON(t *testing.T) {
	base, _ := newServer(t)
	out := filepath.Join(t.TempDir(), "r.json")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"-base", base, "-c", "2", "-d", "1200ms", "-warmup", "0s",
		"-client-secret", clientSecret, "-password", password, "-label", "test", "-json", out}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	for _, want := range []string{"flows:", "token_refresh", "p99 ms"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "flows") || !strings.Contains(stderr.String(), "/s") {
		t.Errorf("no progress line on stderr:\n%s", stderr.String())
	}
	if strings.Contains(stdout.String()+stderr.String(), password) || strings.Contains(stdout.String()+stderr.String(), clientSecret) {
		t.Error("the output shows a secret")
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res Result
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	if res.Label != "test" || res.Concurrency != 2 || res.Flows == 0 || res.Endpoints["token"].Count == 0 || res.Machine.CPUs == 0 {
		t.Errorf("JSON: %+v", res)
	}
}

func TestPercentile_NearestRank(t *testing.T) {
	ten := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	tests := []struct {
		name   string
		in     []time.Duration
		p      int
		expect time.Duration
	}{
		{"empty", nil, 50, 0},
		{"single", []time.Duration{7}, 99, 7},
		{"median of ten", ten, 50, 5},
		{"p95 of ten", ten, 95, 10},
		{"p99 of ten is the max", ten, 99, 10},
		{"p1 of ten is the min", ten, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.in, tt.p); got != tt.expect {
				t.Errorf("percentile(%v, %d) = %d, want %d", tt.in, tt.p, got, tt.expect)
			}
		})
	}
}
