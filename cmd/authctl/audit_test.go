package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/config"
)

// TestAudit_OperatorActionsNameWhoAndWhat: the operator's changes are audited whatever the
// flags (no --verbose), in AUTH_AUDIT_LOG: a revocation names the grant's client and user, the
// reason and the operator (--actor); disabling a user or a client names it and who did it (the
// OS user without --actor).
func TestAudit_OperatorActionsNameWhoAndWhat(t *testing.T) {
	tl := embeddedTool(t)
	auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
	tl.env[config.EnvAuditLog] = auditFile
	tl.ok("", "keys", "rotate")
	var c createdClient
	tl.okJSON(&c, "", "clients", "create", "--id", "acme", "--name", "Acme", "--redirect-uri", redirectURI, "--scope", "openid email")
	var u struct {
		UID string `json:"uid"`
	}
	tl.okJSON(&u, "correct-horse-battery", "users", "create", "dana", "--password-stdin")
	s := tl.serve()
	tokens(t, s, "acme", c.ClientSecret, "dana", "correct-horse-battery")
	s.stop()
	tl.ok("", "grants", "revoke-all", "--user", "dana", "--actor", "ops-bob")
	tl.ok("", "users", "disable", "dana", "--actor", "ops-bob")
	tl.ok("", "clients", "disable", "acme")

	data, err := os.ReadFile(auditFile)
	if err != nil {
		t.Fatal(err)
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("audit line is not JSON: %q", l)
		}
		lines = append(lines, m)
	}
	find := func(want map[string]string) map[string]any {
		for _, l := range lines {
			ok := l["log"] == "audit"
			for k, v := range want {
				ok = ok && l[k] == v
			}
			if ok {
				return l
			}
		}
		t.Errorf("no audit record with %v in:\n%s", want, data)
		return nil
	}
	if rec := find(map[string]string{"event": "grant_revoked", "reason": "operator", "actor": "ops-bob", "client_id": "acme", "uid": u.UID}); rec != nil && rec["grant_id"] == "" {
		t.Errorf("revocation without its grant id: %v", rec)
	}
	find(map[string]string{"event": "operator_action", "action": "user_disable", "actor": "ops-bob", "uid": u.UID})
	if rec := find(map[string]string{"event": "operator_action", "action": "client_disable", "client_id": "acme"}); rec != nil && rec["actor"] == "" {
		t.Errorf("client disabled without the operator's name: %v", rec)
	}
	if strings.Contains(string(data), "correct-horse-battery") {
		t.Error("the audit log holds a password")
	}
}
