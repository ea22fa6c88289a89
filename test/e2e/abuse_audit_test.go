package e2e

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/admin"
	"github.com/acmebank/authserver/shared/app"
	"github.com/acmebank/authserver/shared/config"
	"github.com/acmebank/authserver/shared/oauth"
)

// auditLines reads the JSON lines of an audit file.
func auditLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("audit line is not JSON: %q", line)
		}
		out = append(out, m)
	}
	return out
}

// findAudit returns the first audit record of event whose fields include want.
func findAudit(lines []map[string]any, event string, want map[string]string) map[string]any {
	for _, l := range lines {
		if l["event"] != event {
			continue
		}
		ok := true
		for k, v := range want {
			if l[k] != v {
				ok = false
			}
		}
		if ok {
			return l
		}
	}
	return nil
}

// TestAudit_WrittenWhateverTheLogLevel: with AUTH_LOG_LEVEL=error, a failed login, a code
// presented twice and an operator's revocation are still recorded in the audit sink
// (AUTH_AUDIT_LOG), each with its time, client_id, uid, grant id, client address and reason, the
// operator's name for the revocation, marked "log":"audit", and with no secret in them; the
// service log at error says nothing of them.
func TestAudit_WrittenWhateverTheLogLevel(t *testing.T) {
	auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
	var svcLog syncBuffer
	e := newEnvFrom(t, envSetup{
		vars: map[string]string{config.EnvLogLevel: "error", config.EnvAuditLog: auditFile},
		build: func(cfg config.Config, _ *slog.Logger) (*app.App, error) {
			var level slog.Level
			if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
				t.Fatal(err)
			}
			a, err := app.New(context.Background(), cfg, slog.New(slog.NewJSONHandler(&svcLog, &slog.HandlerOptions{Level: level})))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { a.Close() })
			return a, nil
		},
	})
	// A failed login.
	b := newBrowser(t)
	e.loginAttempt(t, b, username, "not-the-password")
	// A code presented twice.
	code := e.code(t, nil)
	st, tokens := e.exchange(t, code, nil)
	if st != 200 {
		t.Fatalf("exchange: %d", st)
	}
	e.exchange(t, code, url.Values{})
	// An operator's revocation of every grant of the user.
	code2 := e.code(t, nil)
	if st, _ := e.exchange(t, code2, nil); st != 200 {
		t.Fatalf("second exchange: %d", st)
	}
	adm := admin.New(e.app.Store, cheapHasher, e.clock, e.app.Audit)
	adm.Actor = "ops-jane"
	revoked, err := adm.RevokeAll(context.Background(), oauth.GrantFilter{UID: "uid-alice"}, admin.ReasonOperator)
	if err != nil || len(revoked) == 0 {
		t.Fatalf("RevokeAll: %v %v", revoked, err)
	}

	lines := auditLines(t, auditFile)
	for _, c := range []struct {
		event string
		want  map[string]string
	}{
		{"login_failed", map[string]string{"client_id": clientID, "uid": "uid-alice", "ip": "127.0.0.1", "reason": "bad_credentials"}},
		{"code_reuse_detected", map[string]string{"client_id": clientID, "uid": "uid-alice", "ip": "127.0.0.1"}},
		{"grant_revoked", map[string]string{"client_id": clientID, "uid": "uid-alice", "ip": "127.0.0.1", "reason": "code_reuse"}},
		{"grant_revoked", map[string]string{"client_id": clientID, "uid": "uid-alice", "reason": admin.ReasonOperator, "actor": "ops-jane", "grant_id": revoked[0]}},
	} {
		rec := findAudit(lines, c.event, c.want)
		if rec == nil {
			t.Errorf("no audit record %s with %v in:\n%v", c.event, c.want, lines)
			continue
		}
		for _, k := range []string{"time", "event", "client_id", "uid", "grant_id", "ip", "reason"} {
			if _, ok := rec[k]; !ok {
				t.Errorf("%s record without %s: %v", c.event, k, rec)
			}
		}
		if rec["log"] != "audit" {
			t.Errorf("%s record not marked log=audit: %v", c.event, rec)
		}
		if c.event != "login_failed" && rec["grant_id"] == "" {
			t.Errorf("%s record without its grant id: %v", c.event, rec)
		}
	}
	raw, _ := os.ReadFile(auditFile)
	for _, secret := range []string{password, "not-the-password", code, code2, tokens["access_token"].(string), tokens["refresh_token"].(string), clientSecret} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the audit log holds a secret %.8s…", secret)
		}
	}
	if strings.Contains(svcLog.String(), `"audit"`) {
		t.Errorf("audit events reached the service log at level error: %s", svcLog.String())
	}
}
