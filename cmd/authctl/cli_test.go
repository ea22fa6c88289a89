package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/spf13/cobra"

	"github.com/acmebank/authserver/shared/admin"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// TestHelp_EveryCommandHasHelp walks the whole command tree: every command answers --help
// with its usage and exit code 0, and says what it does.
func TestHelp_EveryCommandHasHelp(t *testing.T) {
	tl := embeddedTool(t)
	var walk func(cmd *cobra.Command, path []string)
	n := 0
	walk = func(cmd *cobra.Command, path []string) {
		if cmd.Hidden || cmd.Name() == "help" || cmd.Name() == "completion" {
			return
		}
		n++
		out, errOut, code := tl.run("", append(path, "--help")...)
		if code != exitOK || !strings.Contains(out, "Usage:") {
			t.Errorf("authctl %s --help: exit %d, stdout %.200q stderr %q", strings.Join(path, " "), code, out, errOut)
		}
		if cmd.Short == "" {
			t.Errorf("authctl %s has no short description", strings.Join(path, " "))
		}
		for _, sub := range cmd.Commands() {
			walk(sub, append(append([]string(nil), path...), sub.Name()))
		}
	}
	walk((&cli{lookupEnv: tl.lookup}).rootCommand(), nil)
	if n < 30 {
		t.Errorf("walked %d commands, want every subcommand of the issue (30+)", n)
	}
}

// TestExitCodes pins the exit code of each class of failure, which scripts rely on.
func TestExitCodes(t *testing.T) {
	tl := embeddedTool(t)
	tl.ok("", "clients", "create", "--id", "acme", "--name", "Acme", "--redirect-uri", "https://acme.example/cb", "--scope", "openid")
	tl.ok("correct-horse-battery", "users", "create", "alice", "--password-stdin")
	cases := []struct {
		name  string
		stdin string
		args  []string
		want  int
		say   string // in stderr
	}{
		{"unknown command", "", []string{"clientz"}, exitUsage, "unknown command"},
		{"unknown subcommand", "", []string{"clients", "frobnicate"}, exitUsage, "unknown command"},
		{"unknown flag", "", []string{"clients", "list", "--colour"}, exitUsage, "unknown flag"},
		{"missing argument", "", []string{"clients", "show"}, exitUsage, "CLIENT_ID"},
		{"missing required flag", "", []string{"clients", "create", "--redirect-uri", "https://x.example/cb", "--scope", "openid"}, exitUsage, "name"},
		{"no redirect URI for authorization_code", "", []string{"clients", "create", "--name", "x", "--scope", "openid"}, exitUsage, "needs at least one redirect URI"},
		{"bad output format", "", []string{"clients", "list", "-o", "yaml"}, exitUsage, "json or text"},
		{"redirect URI with a fragment", "", []string{"clients", "create", "--name", "x", "--redirect-uri", "https://x.example/cb#f", "--scope", "openid"}, exitUsage, "fragment"},
		{"relative redirect URI", "", []string{"clients", "create", "--name", "x", "--redirect-uri", "/cb", "--scope", "openid"}, exitUsage, "absolute"},
		{"plain http redirect URI", "", []string{"clients", "create", "--name", "x", "--redirect-uri", "http://x.example/cb", "--scope", "openid"}, exitUsage, "https"},
		{"unknown scope", "", []string{"clients", "create", "--name", "x", "--redirect-uri", "https://x.example/cb", "--scope", "openid,root"}, exitUsage, "unknown scope"},
		{"password as a flag", "", []string{"users", "create", "bob", "--password", "correct-horse-battery"}, exitUsage, "unknown flag"},
		{"no terminal for the password prompt", "", []string{"users", "create", "bob"}, exitUsage, "--password-stdin"},
		{"weak password", "short\n", []string{"users", "create", "bob", "--password-stdin"}, exitUsage, "at least 12"},
		{"delete without --yes", "", []string{"clients", "delete", "acme"}, exitUsage, "--yes"},
		{"update with nothing to change", "", []string{"clients", "update", "acme"}, exitUsage, "nothing to update"},
		{"grants without owner", "", []string{"grants", "list"}, exitUsage, "--user or --client"},
		{"unknown client", "", []string{"clients", "show", "nope"}, exitNotFound, "not found"},
		{"unknown user", "", []string{"users", "disable", "nobody"}, exitNotFound, "not found"},
		{"unknown grant", "", []string{"grants", "revoke", "gr_nope"}, exitNotFound, "not found"},
		{"grants of an unknown client", "", []string{"grants", "list", "--client", "nope"}, exitNotFound, "not found"},
		{"taken client id", "", []string{"clients", "create", "--id", "acme", "--name", "x", "--redirect-uri", "https://x.example/cb", "--scope", "openid"}, exitConflict, "taken"},
		{"duplicate username", "correct-horse-battery\n", []string{"users", "create", "ALICE", "--password-stdin"}, exitConflict, `username "alice" is taken`},
		{"table create without endpoint", "", []string{"table", "create", "--table", "t"}, exitUsage, "--endpoint"},
		{"bad store kind", "", []string{"clients", "list", "--store", "postgres"}, exitUsage, "embedded or dynamodb"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := tl.run(tc.stdin, tc.args...)
			if code != tc.want {
				t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", code, tc.want, out, errOut)
			}
			if !strings.Contains(errOut, tc.say) {
				t.Errorf("stderr %q does not say %q", errOut, tc.say)
			}
		})
	}
	var clients []clientView
	tl.okJSON(&clients, "", "clients", "list")
	if len(clients) != 1 {
		t.Errorf("failed commands changed the store: %d clients", len(clients))
	}
}

// TestOutput_NeverShowsHashesOrStoredSecrets checks what show and list print: the secret once
// at creation, never its hash, never a password hash.
func TestOutput_NeverShowsHashesOrStoredSecrets(t *testing.T) {
	tl := embeddedTool(t)
	var c createdClient
	tl.okJSON(&c, "", "clients", "create", "--name", "Acme", "--redirect-uri", "https://acme.example/cb", "--scope", "openid")
	tl.ok("correct-horse-battery", "users", "create", "alice", "--password-stdin")
	for _, format := range []string{"text", "json"} {
		for _, args := range [][]string{
			{"clients", "show", c.Client.ClientID}, {"clients", "list"}, {"users", "show", "alice"}, {"users", "list"},
			{"clients", "update", c.Client.ClientID, "--name", "Acme 2"}, {"users", "update", "alice", "--name", "Alice"},
		} {
			out := tl.ok("", append(args, "-o", format)...)
			for _, bad := range []string{c.ClientSecret, oauth.HashSecret(c.ClientSecret), "argon2id", "password"} {
				if strings.Contains(out, bad) {
					t.Errorf("authctl %s -o %s prints %q:\n%s", strings.Join(args, " "), format, bad, out)
				}
			}
		}
	}
	out, errOut, _ := tl.run("", "clients", "create", "--name", "B", "--redirect-uri", "https://b.example/cb", "--scope", "openid")
	if !strings.Contains(out, "client_secret: cs1_") || !strings.Contains(errOut, "shown only now") {
		t.Errorf("create prints the secret once with a warning: stdout %q stderr %q", out, errOut)
	}
}

// TestStoreFlags_OverrideTheEnvironment proves --data chooses the store over AUTH_DATA_DIR,
// and that reading commands refuse a data directory with no store instead of creating one.
func TestStoreFlags_OverrideTheEnvironment(t *testing.T) {
	tl := embeddedTool(t)
	other := t.TempDir()
	tl.ok("", "--data", other, "clients", "create", "--id", "elsewhere", "--name", "x", "--redirect-uri", "https://x.example/cb", "--scope", "openid")
	if _, _, code := tl.run("", "clients", "show", "elsewhere"); code != exitNotFound {
		t.Errorf("the client created under --data is visible under AUTH_DATA_DIR (exit %d)", code)
	}
	tl.ok("", "clients", "show", "elsewhere", "--data", other)
	empty := filepath.Join(t.TempDir(), "typo")
	_, errOut, code := tl.run("", "users", "list", "--data", empty)
	if code != exitNotFound || !strings.Contains(errOut, "no embedded store") {
		t.Errorf("users list on an empty directory: exit %d, %s", code, errOut)
	}
	if _, _, code := tl.run("", "--store", "dynamodb", "clients", "list"); code != exitUsage {
		t.Errorf("--store dynamodb without a table: exit %d, want %d", code, exitUsage)
	}
}

func TestKeysRotate_RefusesALocalKeyForTheDeployedTable(t *testing.T) {
	tl := embeddedTool(t)
	tl.env[config.EnvStore], tl.env[config.EnvTable] = "dynamodb", "auth-prod"
	_, errOut, code := tl.run("", "keys", "rotate")
	if code != exitUsage || !strings.Contains(errOut, "kms") {
		t.Fatalf("keys rotate with a local key against a deployed table: exit %d, %s", code, errOut)
	}
}

func TestKeys_ListRotateAndJWKS(t *testing.T) {
	tl := embeddedTool(t)
	tl.ok("", "clients", "create", "--name", "x", "--redirect-uri", "https://x.example/cb", "--scope", "openid")
	if out := tl.ok("", "keys", "list"); !strings.Contains(out, "no keys yet") {
		t.Errorf("keys list of a fresh store: %s", out)
	}
	tl.ok("", "keys", "rotate")
	var list []keyView
	tl.okJSON(&list, "", "keys", "list")
	if len(list) != 6 {
		t.Fatalf("keys after the first rotation: %+v, want a current and a next key per algorithm", list)
	}
	for i, want := range []struct{ state, alg string }{{oauth.KeyCurrent, "RS256"}, {oauth.KeyCurrent, "PS256"}, {oauth.KeyCurrent, "ES256"},
		{oauth.KeyNext, "RS256"}, {oauth.KeyNext, "PS256"}, {oauth.KeyNext, "ES256"}} {
		if list[i].State != want.state || list[i].Alg != want.alg {
			t.Fatalf("keys after the first rotation: %+v, want current keys then next keys, RS256 PS256 ES256", list)
		}
	}
	var jwks struct {
		Keys []map[string]string `json:"keys"`
	}
	out := tl.ok("", "keys", "jwks")
	if err := json.Unmarshal([]byte(out), &jwks); err != nil || len(jwks.Keys) != 6 || jwks.Keys[0]["kid"] != list[0].Kid {
		t.Fatalf("jwks %s (err %v), want all six keys, RS256's current first", out, err)
	}
	for _, k := range jwks.Keys {
		if k["d"] != "" || k["p"] != "" {
			t.Fatal("the JWKS holds private key material")
		}
	}
	var rep struct{ Changed bool }
	tl.okJSON(&rep, "", "keys", "rotate", "--if-due")
	if rep.Changed {
		t.Error("keys rotate --if-due right after a rotation changed the registry")
	}
}

// TestUsersImport_StdinJSONAndIdempotence imports from stdin twice: the second run only
// updates, and the exit code says when rows failed.
func TestUsersImport_StdinJSONAndIdempotence(t *testing.T) {
	tl := embeddedTool(t)
	file := `{"users": [
		{"uid": "u-1", "username": "alice", "password": "correct-horse-battery", "email": "alice@example.com"},
		{"uid": "u-2", "username": "bob", "password": "another-long-passphrase", "phone": "+33612345678"}
	]}`
	var rep admin.ImportReport
	tl.okJSON(&rep, file, "users", "import", "-")
	if rep.Created != 2 || rep.Failed != 0 {
		t.Fatalf("first import: %+v", rep)
	}
	tl.okJSON(&rep, file, "users", "import", "-")
	if rep.Created != 0 || rep.Updated != 2 {
		t.Fatalf("second import: %+v, want 2 updated", rep)
	}
	out, errOut, code := tl.run("username,password\ncarol,short\n", "users", "import", "-", "--format", "csv")
	if code != exitPartial || !strings.Contains(errOut, "line 2") || !strings.Contains(out, "1 failed") {
		t.Fatalf("import with a bad row: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, errOut, code := tl.run("uid,login\n", "users", "import", "-"); code != exitUsage || !strings.Contains(errOut, "login") {
		t.Errorf("import with an unknown column: exit %d, %s", code, errOut)
	}
}

func TestUsers_UpdateSetPasswordAndDelete(t *testing.T) {
	tl := embeddedTool(t)
	tl.ok("correct-horse-battery", "users", "create", "alice", "--password-stdin", "--uid", "u-1")
	var u userView
	tl.okJSON(&u, "", "users", "update", "u-1", "--phone", "+33612345678", "--email", "a@example.com", "--email-verified")
	if u.Claims.Phone != "+33612345678" || !u.Claims.EmailVerified {
		t.Fatalf("after update: %+v", u.Claims)
	}
	if _, _, code := tl.run("", "users", "update", "alice", "--phone", "0612"); code != exitUsage {
		t.Errorf("invalid phone: exit %d, want %d", code, exitUsage)
	}
	tl.ok("a-new-long-passphrase\n", "users", "set-password", "alice", "--password-stdin", "--revoke-grants")
	var del disabledResult
	tl.okJSON(&del, "", "users", "delete", "alice", "--yes")
	if !del.Deleted || del.UID != "u-1" {
		t.Fatalf("delete: %+v", del)
	}
	if _, _, code := tl.run("", "users", "show", "alice"); code != exitNotFound {
		t.Errorf("show after delete: exit %d", code)
	}
}

func TestClients_UpdateAndDelete(t *testing.T) {
	tl := embeddedTool(t)
	tl.ok("", "clients", "create", "--id", "acme", "--name", "Acme", "--redirect-uri", "https://acme.example/cb", "--scope", "openid")
	var v clientView
	tl.okJSON(&v, "", "clients", "update", "acme", "--add-redirect-uri", "http://127.0.0.1:8080/cb", "--add-scope", "email profile",
		"--remove-redirect-uri", "https://acme.example/cb")
	if strings.Join(v.RedirectURIs, " ") != "http://127.0.0.1:8080/cb" || strings.Join(v.Scopes, " ") != "openid email profile" {
		t.Fatalf("after update: %v %v", v.RedirectURIs, v.Scopes)
	}
	tl.ok("", "clients", "delete", "acme", "--yes")
	if _, _, code := tl.run("", "clients", "show", "acme"); code != exitNotFound {
		t.Errorf("show after delete: exit %d", code)
	}
}

// TestDisable_ResweepWaitsTheConfiguredLifetimes runs disable --resweep with short lifetimes:
// it says how long it waits (AUTH_CODE_TTL, plus AUTH_CLIENT_CACHE_TTL for a client).
func TestDisable_ResweepWaitsTheConfiguredLifetimes(t *testing.T) {
	tl := embeddedTool(t)
	tl.env[config.EnvCodeTTL], tl.env[config.EnvClientCacheTTL] = "3ms", "2ms"
	tl.ok("", "clients", "create", "--id", "acme", "--name", "Acme", "--redirect-uri", "https://acme.example/cb", "--scope", "openid")
	tl.ok("correct-horse-battery", "users", "create", "alice", "--password-stdin")
	cases := []struct {
		args []string
		wait string
	}{
		{[]string{"clients", "disable", "acme", "--resweep"}, "waiting 5ms"},
		{[]string{"users", "disable", "alice", "--resweep"}, "waiting 3ms"},
	}
	for _, tc := range cases {
		out, errOut, code := tl.run("", tc.args...)
		if code != exitOK || !strings.Contains(errOut, tc.wait) || !strings.Contains(out, "disabled") {
			t.Errorf("authctl %s: exit %d\nstdout %s\nstderr %s", strings.Join(tc.args, " "), code, out, errOut)
		}
	}
}

// TestClientsCreate_RequirePKCEUnlessOptedOut: clients registered with authctl must send PKCE,
// unless --no-require-pkce registers one that cannot yet.
func TestClientsCreate_RequirePKCEUnlessOptedOut(t *testing.T) {
	tl := embeddedTool(t)
	var strict, lax createdClient
	tl.okJSON(&strict, "", "clients", "create", "--name", "Strict", "--redirect-uri", "https://s.example/cb", "--scope", "openid")
	tl.okJSON(&lax, "", "clients", "create", "--name", "Lax", "--redirect-uri", "https://l.example/cb", "--scope", "openid", "--no-require-pkce")
	if !strict.Client.RequirePKCE || lax.Client.RequirePKCE {
		t.Fatalf("require_pkce: default %v, with --no-require-pkce %v; want true, false", strict.Client.RequirePKCE, lax.Client.RequirePKCE)
	}
	var shown clientView
	tl.okJSON(&shown, "", "clients", "show", strict.Client.ClientID)
	if !shown.RequirePKCE {
		t.Fatal("the stored client does not require PKCE")
	}
	var updated clientView
	tl.okJSON(&updated, "", "clients", "update", lax.Client.ClientID, "--require-pkce")
	if !updated.RequirePKCE {
		t.Fatal("clients update --require-pkce did not set it")
	}
	tl.okJSON(&updated, "", "clients", "update", lax.Client.ClientID, "--require-pkce=false")
	if updated.RequirePKCE {
		t.Fatal("clients update --require-pkce=false did not clear it")
	}
}

// TestClients_RequirePAR: --require-par registers a client whose authorization requests must be
// pushed (RFC 9126); update sets and clears it.
func TestClients_RequirePAR(t *testing.T) {
	tl := embeddedTool(t)
	var pushed, plain createdClient
	tl.okJSON(&pushed, "", "clients", "create", "--name", "Pushed", "--redirect-uri", "https://p.example/cb", "--scope", "openid", "--require-par")
	tl.okJSON(&plain, "", "clients", "create", "--name", "Plain", "--redirect-uri", "https://q.example/cb", "--scope", "openid")
	if !pushed.Client.RequirePAR || plain.Client.RequirePAR {
		t.Fatalf("require_pushed_authorization_requests: with --require-par %v, without %v", pushed.Client.RequirePAR, plain.Client.RequirePAR)
	}
	var updated clientView
	tl.okJSON(&updated, "", "clients", "update", plain.Client.ClientID, "--require-par")
	if !updated.RequirePAR {
		t.Fatal("clients update --require-par did not set it")
	}
	tl.okJSON(&updated, "", "clients", "update", plain.Client.ClientID, "--require-par=false")
	if updated.RequirePAR {
		t.Fatal("clients update --require-par=false did not clear it")
	}
}

// TestClientsList_ShowsTheRedirectURIs proves the list's REDIRECT_URIS column holds the URIs
// themselves, not how many there are.
func TestClientsList_ShowsTheRedirectURIs(t *testing.T) {
	tl := embeddedTool(t)
	tl.ok("", "clients", "create", "--id", "two-uris", "--name", "Two", "--redirect-uri", "https://a.example/cb",
		"--redirect-uri", "https://b.example/cb", "--scope", "openid")
	out := tl.ok("", "clients", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "REDIRECT_URIS") {
		t.Fatalf("clients list:\n%s", out)
	}
	if !strings.HasSuffix(lines[1], "https://a.example/cb https://b.example/cb") {
		t.Errorf("the row does not end with the redirect URIs:\n%s", out)
	}
}

// TestClientsCreateJSON_DescribesEachSecret proves -o json says of each valid secret what it
// is (current, or in its grace period until when) and never prints an empty object or a hash;
// the plaintext secret is in create's output only.
func TestClientsCreateJSON_DescribesEachSecret(t *testing.T) {
	tl := embeddedTool(t)
	out := tl.ok("", "clients", "create", "--id", "sec", "--name", "S", "--redirect-uri", "https://s.example/cb", "--scope", "openid", "-o", "json")
	if strings.Contains(out, "{}") {
		t.Errorf("create -o json prints an empty object:\n%s", out)
	}
	var c createdClient
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.ClientSecret, "cs1_") || len(c.Client.Secrets) != 1 ||
		c.Client.Secrets[0].Status != "current" || c.Client.Secrets[0].ExpiresAt != nil {
		t.Fatalf("create -o json: %s", out)
	}
	var r createdClient
	tl.okJSON(&r, "", "clients", "rotate-secret", "sec", "--grace", "1h")
	var shown clientView
	tl.okJSON(&shown, "", "clients", "show", "sec")
	if len(shown.Secrets) != 2 {
		t.Fatalf("after a rotation with grace, want 2 secrets: %+v", shown.Secrets)
	}
	var grace, current int
	for _, s := range shown.Secrets {
		switch {
		case s.Status == "current" && s.ExpiresAt == nil:
			current++
		case s.Status == "grace" && s.ExpiresAt != nil && time.Until(*s.ExpiresAt) > 50*time.Minute:
			grace++
		}
	}
	if current != 1 || grace != 1 {
		t.Errorf("want one current and one grace secret: %+v", shown.Secrets)
	}
	text := tl.ok("", "clients", "show", "sec")
	for _, bad := range []string{c.ClientSecret, r.ClientSecret, oauth.HashSecret(c.ClientSecret), oauth.HashSecret(r.ClientSecret)} {
		if strings.Contains(text, bad) {
			t.Errorf("clients show prints a secret or its hash:\n%s", text)
		}
	}
}

// TestClients_RefreshReuseInterval: --refresh-reuse-interval sets the retry window at creation
// and update, `clients show` says it (off by default), and more than 60s is refused.
func TestClients_RefreshReuseInterval(t *testing.T) {
	tl := embeddedTool(t)
	tl.ok("", "clients", "create", "--id", "plain", "--name", "Plain", "--redirect-uri", "https://plain.example/cb", "--scope", "openid")
	if out := tl.ok("", "clients", "show", "plain"); !strings.Contains(out, "refresh_reuse_interval:  off") {
		t.Errorf("show of a client without a window:\n%s", out)
	}
	var v clientView
	tl.okJSON(&v, "", "clients", "create", "--id", "acme", "--name", "Acme", "--redirect-uri", "https://acme.example/cb",
		"--scope", "openid", "--refresh-reuse-interval", "30s")
	if out := tl.ok("", "clients", "show", "acme"); !strings.Contains(out, "refresh_reuse_interval:  30s") {
		t.Errorf("show after create with 30s:\n%s", out)
	}
	tl.okJSON(&v, "", "clients", "update", "acme", "--refresh-reuse-interval", "10s")
	if v.RefreshReuseIntervalSeconds != 10 {
		t.Errorf("after update to 10s: %d", v.RefreshReuseIntervalSeconds)
	}
	if _, errOut, code := tl.run("", "clients", "update", "acme", "--refresh-reuse-interval", "2m"); code != exitUsage || !strings.Contains(errOut, "60") {
		t.Errorf("update to 2m: exit %d, stderr %q", code, errOut)
	}
	if _, _, code := tl.run("", "clients", "create", "--id", "big", "--name", "Big", "--redirect-uri", "https://big.example/cb",
		"--scope", "openid", "--refresh-reuse-interval", "61s"); code != exitUsage {
		t.Errorf("create with 61s: exit %d", code)
	}
	tl.okJSON(&v, "", "clients", "show", "acme")
	if v.RefreshReuseIntervalSeconds != 10 {
		t.Errorf("a refused update changed the window to %ds", v.RefreshReuseIntervalSeconds)
	}
}

// TestClients_IDTokenAlg: --id-token-alg registers and changes the client's id_token
// algorithm; one outside AUTH_ID_TOKEN_ALGS is a usage error that names the setting.
func TestClients_IDTokenAlg(t *testing.T) {
	tl := embeddedTool(t)
	var c createdClient
	tl.okJSON(&c, "", "clients", "create", "--name", "FAPI", "--redirect-uri", "https://x.example/cb", "--scope", "openid", "--id-token-alg", "ES256")
	if c.Client.IDTokenSignedResponseAlg != "ES256" {
		t.Fatalf("created client alg %q, want ES256", c.Client.IDTokenSignedResponseAlg)
	}
	var v clientView
	tl.okJSON(&v, "", "clients", "update", c.Client.ClientID, "--id-token-alg", "PS256")
	if v.IDTokenSignedResponseAlg != "PS256" {
		t.Fatalf("updated client alg %q, want PS256", v.IDTokenSignedResponseAlg)
	}
	var plain createdClient
	tl.okJSON(&plain, "", "clients", "create", "--name", "Plain", "--redirect-uri", "https://x.example/cb", "--scope", "openid")
	if plain.Client.IDTokenSignedResponseAlg != "RS256" {
		t.Fatalf("default client alg %q, want RS256 shown", plain.Client.IDTokenSignedResponseAlg)
	}
	if _, errOut, code := tl.run("", "clients", "create", "--name", "Bad", "--redirect-uri", "https://x.example/cb", "--scope", "openid", "--id-token-alg", "HS256"); code != exitUsage || !strings.Contains(errOut, "HS256") {
		t.Errorf("--id-token-alg HS256: exit %d, %s", code, errOut)
	}
	tl.env[config.EnvIDTokenAlgs] = "RS256,ES256"
	if _, errOut, code := tl.run("", "clients", "update", c.Client.ClientID, "--id-token-alg", "PS256"); code != exitUsage || !strings.Contains(errOut, "AUTH_ID_TOKEN_ALGS") {
		t.Errorf("--id-token-alg PS256 where PS256 has no keys: exit %d, %s", code, errOut)
	}
}

// TestClients_ProfileFAPI2RefusesAnIncompleteRegistration: --profile fapi2 registers a client
// only with every rule of the profile met, names what is missing otherwise, and an update
// cannot take a FAPI client out of a rule (nor is anything stored by a refused one).
func TestClients_ProfileFAPI2RefusesAnIncompleteRegistration(t *testing.T) {
	tl := embeddedTool(t)
	_, errOut, code := tl.run("", "clients", "create", "--id", "tpp", "--name", "TPP", "--redirect-uri", "https://tpp.example/cb",
		"--scope", "openid", "--profile", "fapi2")
	if code != exitUsage || !strings.Contains(errOut, "fapi2 client must") || !strings.Contains(errOut, "private_key_jwt") {
		t.Fatalf("an incomplete fapi2 registration: exit %d, stderr %q", code, errOut)
	}
	if _, _, code := tl.run("", "clients", "show", "tpp"); code == exitOK {
		t.Fatal("the refused registration was stored")
	}
	if _, errOut, code := tl.run("", "clients", "create", "--id", "tpp", "--name", "TPP", "--redirect-uri", "https://tpp.example/cb",
		"--scope", "openid", "--profile", "fapi9"); code != exitUsage || !strings.Contains(errOut, "unknown profile") {
		t.Fatalf("an unknown profile: exit %d, stderr %q", code, errOut)
	}
	var created createdClient
	tl.okJSON(&created, "", "clients", "create", "--id", "tpp", "--name", "TPP", "--redirect-uri", "https://tpp.example/cb",
		"--scope", "openid", "--profile", "fapi2", "--cert-thumbprint", "bwcK0esc3ACC3DB2Y5_lESsXE8o9ltc05O89jdN-dg2",
		"--refresh-reuse-interval", "30s", "--id-token-alg", "ES256")
	if created.Client.Profile != "fapi2" || created.ClientSecret != "" {
		t.Fatalf("fapi2 client: profile %q, secret given %v", created.Client.Profile, created.ClientSecret != "")
	}
	if _, errOut, code := tl.run("", "clients", "update", "tpp", "--require-pkce=false"); code != exitUsage || !strings.Contains(errOut, "PKCE") {
		t.Fatalf("turning PKCE off on a fapi2 client: exit %d, stderr %q", code, errOut)
	}
	if _, errOut, code := tl.run("", "clients", "update", "tpp", "--id-token-alg", "RS256"); code != exitUsage || !strings.Contains(errOut, "PS256 or ES256") {
		t.Fatalf("RS256 id_tokens for a fapi2 client: exit %d, stderr %q", code, errOut)
	}
	var shown clientView
	tl.okJSON(&shown, "", "clients", "show", "tpp")
	if !shown.RequirePKCE || shown.Profile != "fapi2" {
		t.Fatalf("after the refused update: require_pkce %v, profile %q", shown.RequirePKCE, shown.Profile)
	}
	var cleared clientView
	tl.okJSON(&cleared, "", "clients", "update", "tpp", "--profile=")
	if cleared.Profile != "" || cleared.ClientID != "tpp" {
		t.Fatalf("--profile= left profile %q", cleared.Profile)
	}
}

// TestClients_PrivateKeyJWTAndDPoPFAPIClient: a FAPI 2.0 client registered with its public
// keys (--auth-method private_key_jwt --jwks-file) and DPoP gets no secret, shows its key ids,
// auth method and DPoP binding; a key file with a private key is refused and stores nothing;
// --jwks-file on update replaces the keys.
func TestClients_PrivateKeyJWTAndDPoPFAPIClient(t *testing.T) {
	tl := embeddedTool(t)
	dir := t.TempDir()
	writeJWKS := func(name string, kid string, private bool) string {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		var k any = key.Public()
		if private {
			k = key
		}
		b, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: k, KeyID: kid, Use: "sig"}}})
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	args := []string{"clients", "create", "--id", "tpp", "--name", "TPP", "--redirect-uri", "https://tpp.example/cb", "--scope", "openid",
		"--profile", "fapi2", "--require-par", "--dpop", "--auth-method", "private_key_jwt", "--refresh-reuse-interval", "30s", "--id-token-alg", "PS256"}
	if _, errOut, code := tl.run("", append(args, "--jwks-file", writeJWKS("private.json", "k1", true))...); code != exitUsage || !strings.Contains(errOut, "private key") {
		t.Fatalf("a private key file: exit %d, stderr %q", code, errOut)
	}
	if _, _, code := tl.run("", "clients", "show", "tpp"); code == exitOK {
		t.Fatal("the refused registration was stored")
	}
	var created createdClient
	tl.okJSON(&created, "", append(args, "--jwks-file", writeJWKS("public.json", "k1", false))...)
	v := created.Client
	if created.ClientSecret != "" || v.AuthMethod != "private_key_jwt" || !v.DPoPBoundAccessTokens || strings.Join(v.KeyIDs, " ") != "k1" || !v.RequirePAR {
		t.Fatalf("created %+v (secret given %v)", v, created.ClientSecret != "")
	}
	var updated clientView
	tl.okJSON(&updated, "", "clients", "update", "tpp", "--jwks-file", writeJWKS("next.json", "k2", false))
	if strings.Join(updated.KeyIDs, " ") != "k2" {
		t.Fatalf("after --jwks-file: kids %v, want k2", updated.KeyIDs)
	}
	if _, errOut, code := tl.run("", "clients", "update", "tpp", "--dpop=false"); code != exitUsage || !strings.Contains(errOut, "sender-constrained") {
		t.Fatalf("turning DPoP off on a fapi2 client without a certificate: exit %d, stderr %q", code, errOut)
	}
}

// TestUsers_FactorsListRemoveAndReset: an operator lists a user's factors (kinds, dates and
// recovery codes left, never a secret), removes a lost one, and resets them all; an unknown
// factor id changes nothing.
func TestUsers_FactorsListRemoveAndReset(t *testing.T) {
	tl := embeddedTool(t)
	var u struct {
		UID string `json:"uid"`
	}
	tl.okJSON(&u, "pw-0123456789abcdef\n", "users", "create", "alice", "--password-stdin")
	now := time.Now().UTC().Truncate(time.Second)
	st, err := embedded.Open(tl.env[config.EnvDataDir])
	if err != nil {
		t.Fatal(err)
	}
	err = st.UpdateFactors(context.Background(), u.UID, func(f oauth.UserFactors) (oauth.UserFactors, error) {
		f.Factors = []oauth.Factor{
			{ID: "f_passkey", Kind: oauth.FactorPasskey, CreatedAt: now, Credential: []byte(`{}`), CredentialID: []byte{1}},
			{ID: "f_totp", Kind: oauth.FactorTOTP, CreatedAt: now, LastUsedAt: now, Secret: "JBSWY3DPEHPK3PXP", RecoveryHashes: []string{"a", "b"}},
		}
		return f, nil
	})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	out, _, code := tl.run("", "users", "factors", "list", "alice")
	if code != exitOK || !strings.Contains(out, "f_passkey") || !strings.Contains(out, "f_totp") || strings.Contains(out, "JBSWY3DPEHPK3PXP") {
		t.Fatalf("factors list: exit %d\n%s", code, out)
	}
	var v factorsView
	tl.okJSON(&v, "", "users", "factors", "list", "alice")
	if len(v.Factors) != 2 || v.Factors[1].RecoveryCodes != 2 || v.Factors[0].LastUsedAt != nil {
		t.Fatalf("factors as JSON: %+v", v)
	}
	if _, errOut, code := tl.run("", "users", "factors", "remove", "alice", "f_nope"); code == exitOK || !strings.Contains(errOut, "no factor") {
		t.Fatalf("removing an unknown factor: exit %d, stderr %q", code, errOut)
	}
	tl.okJSON(&v, "", "users", "factors", "remove", "alice", "f_passkey")
	if len(v.Factors) != 1 || v.Factors[0].ID != "f_totp" {
		t.Fatalf("after removing the passkey: %+v", v)
	}
	if _, errOut, code := tl.run("", "users", "factors", "reset", "alice"); code != exitUsage || !strings.Contains(errOut, "--yes") {
		t.Fatalf("reset without --yes: exit %d, stderr %q", code, errOut)
	}
	tl.okJSON(&v, "", "users", "factors", "reset", "alice", "--yes")
	tl.okJSON(&v, "", "users", "factors", "list", "alice")
	if len(v.Factors) != 0 || v.LastStrongAuth != nil {
		t.Fatalf("after reset: %+v", v)
	}
}

// TestClientsShow_TextNamesRequirePKCEAndRequirePAR proves the text view of a client says
// whether it must send PKCE and pushed authorization requests, as its JSON view does.
func TestClientsShow_TextNamesRequirePKCEAndRequirePAR(t *testing.T) {
	tl := embeddedTool(t)
	var c createdClient
	tl.okJSON(&c, "", "clients", "create", "--name", "Shown", "--redirect-uri", "https://s.example/cb", "--scope", "openid", "--require-par")
	out := tl.ok("", "clients", "show", c.Client.ClientID)
	for _, want := range []string{"require_pkce:", "require_par:"} {
		line := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, want) {
				line = l
			}
		}
		if !strings.HasSuffix(line, "true") {
			t.Errorf("clients show: line %q for %s, want true:\n%s", line, want, out)
		}
	}
}

// TestClientSecret_HintFollowsTheSecretOnATerminal proves that on one screen (stdout and
// stderr interleaved, as on a terminal) the secret's hint comes right after the secret, the
// audit record not between them, for create and rotate-secret.
func TestClientSecret_HintFollowsTheSecretOnATerminal(t *testing.T) {
	tl := embeddedTool(t)
	screen := func(args ...string) string {
		var b bytes.Buffer
		if code := run(context.Background(), args, streams{in: strings.NewReader(""), out: &b, err: &b}, tl.lookup); code != exitOK {
			t.Fatalf("authctl %v: exit %d\n%s", args, code, b.String())
		}
		return b.String()
	}
	created := screen("clients", "create", "--name", "Screen", "--redirect-uri", "https://s.example/cb", "--scope", "openid")
	id := ""
	for _, l := range strings.Split(created, "\n") {
		if v, ok := strings.CutPrefix(l, "client_id:"); ok {
			id = strings.TrimSpace(v)
		}
	}
	rotated := screen("clients", "rotate-secret", id)
	for _, out := range []string{created, rotated} {
		if !strings.Contains(out, `"log":"audit"`) {
			t.Fatalf("no audit record on the screen, nothing to order:\n%s", out)
		}
		lines := strings.Split(out, "\n")
		for i, l := range lines {
			if strings.HasPrefix(l, "client_secret:") && (i+1 >= len(lines) || lines[i+1] != secretNotice) {
				t.Errorf("the line after the secret is not its hint:\n%s", out)
			}
		}
	}
}

// TestClients_TLSClientAuthOptions: --cert-subject-dn (an RFC 4514 DN with
// organizationIdentifier) and each --cert-san-* option register a tls_client_auth client
// (RFC 8705 2.1.2) that gets no secret, `clients show` prints the registered value in text and
// JSON, and two options at once or a DN that does not parse are usage errors that store nothing.
func TestClients_TLSClientAuthOptions(t *testing.T) {
	tl := embeddedTool(t)
	base := []string{"clients", "create", "--redirect-uri", "https://tpp.example/cb", "--scope", "openid", "--auth-method", "tls_client_auth"}
	for _, tc := range []struct{ id, flag, value, line string }{
		{"dn", "--cert-subject-dn", eidasDN, "cert_subject_dn:"},
		{"dns", "--cert-san-dns", "tpp.example.com", "cert_san_dns:"},
		{"uri", "--cert-san-uri", "https://tpp.example.com/software/123", "cert_san_uri:"},
		{"ip", "--cert-san-ip", "192.0.2.10", "cert_san_ip:"},
		{"email", "--cert-san-email", "ops@tpp.example.com", "cert_san_email:"},
	} {
		var c createdClient
		tl.okJSON(&c, "", append(base, "--id", tc.id, "--name", tc.id, tc.flag, tc.value)...)
		if c.ClientSecret != "" {
			t.Errorf("%s: a certificate client was given a secret", tc.id)
		}
		var v clientView
		tl.okJSON(&v, "", "clients", "show", tc.id)
		if got := v.CertSubjectDN + v.CertSANDNS + v.CertSANURI + v.CertSANIP + v.CertSANEmail; got != tc.value {
			t.Errorf("%s: show -o json has %q, want %q", tc.id, got, tc.value)
		}
		if out := tl.ok("", "clients", "show", tc.id); !strings.Contains(out, tc.line) || !strings.Contains(out, tc.value) {
			t.Errorf("%s: show does not print %s %s:\n%s", tc.id, tc.line, tc.value, out)
		}
	}
	for name, args := range map[string][]string{
		"two options":      {"--id", "two", "--name", "two", "--cert-san-dns", "tpp.example.com", "--cert-san-ip", "192.0.2.10"},
		"DN that is no DN": {"--id", "bad", "--name", "bad", "--cert-subject-dn", "organizationIdentifier"},
		"unknown DN type":  {"--id", "odd", "--name", "odd", "--cert-subject-dn", "colour=blue"},
		"IP that is no IP": {"--id", "noip", "--name", "noip", "--cert-san-ip", "tpp.example.com"},
	} {
		if _, errOut, code := tl.run("", append(base, args...)...); code != exitUsage {
			t.Errorf("%s: exit %d, stderr %q", name, code, errOut)
		}
	}
	var list []clientView
	tl.okJSON(&list, "", "clients", "list")
	if len(list) != 5 {
		t.Errorf("%d clients stored, want the 5 valid ones", len(list))
	}
}

const eidasDN = "CN=0015800001041REAAY+OU=Open Banking,organizationIdentifier=PSDGB-FCA-123456,O=Fintech Ltd,C=GB"
