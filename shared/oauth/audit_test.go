package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"testing"
)

// Every audit line has the same fields in the same order, whatever the event adds: event,
// client_id, uid, grant_id, ip, reason (the event's own, else empty), actor for an operator's
// action, then the event's other fields in the order given. The client_id is the grant's, else
// the request's.
func TestWriteAudit_FixedFieldsFirstThenTheEventsInOrder(t *testing.T) {
	for _, c := range []struct {
		name     string
		info     AuditInfo
		g        Grant
		attrs    []slog.Attr
		keys     []string
		clientID string
		reason   string
	}{
		{"no reason", AuditInfo{ClientIP: "203.0.113.7"}, Grant{ID: "gr_1", ClientID: "cl_1", UID: "u1"},
			[]slog.Attr{slog.String("scope", "openid"), slog.Bool("dpop_bound", true)},
			[]string{"event", "client_id", "uid", "grant_id", "ip", "reason", "scope", "dpop_bound"}, "cl_1", ""},
		{"reason among the attrs", AuditInfo{ClientIP: "203.0.113.7", ClientID: "cl_req"}, Grant{ID: "gr_2", UID: "u2"},
			[]slog.Attr{slog.String("scope", "openid"), slog.String("reason", "code_reuse"), slog.Int("n", 2)},
			[]string{"event", "client_id", "uid", "grant_id", "ip", "reason", "scope", "n"}, "cl_req", "code_reuse"},
		{"an operator's action", AuditInfo{Actor: "ops@bank"}, Grant{ID: "gr_3", ClientID: "cl_3"},
			[]slog.Attr{slog.String("reason", "operator")},
			[]string{"event", "client_id", "uid", "grant_id", "ip", "reason", "actor"}, "cl_3", "operator"},
	} {
		var buf bytes.Buffer
		log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey {
				return slog.Attr{}
			}
			return a
		}}))
		WriteAudit(WithAuditInfo(context.Background(), c.info), log, "grant_revoked", &c.g, c.attrs...)
		var keys []string
		dec := json.NewDecoder(bytes.NewReader(buf.Bytes()))
		dec.Token() // {
		for dec.More() {
			k, _ := dec.Token()
			keys = append(keys, k.(string))
			var skip any
			dec.Decode(&skip)
		}
		var m map[string]any
		json.Unmarshal(buf.Bytes(), &m)
		if !slices.Equal(keys, c.keys) || m["event"] != "grant_revoked" || m["client_id"] != c.clientID || m["reason"] != c.reason ||
			m["grant_id"] != c.g.ID {
			t.Errorf("%s: %s, want keys %v, client_id %q, reason %q", c.name, buf.String(), c.keys, c.clientID, c.reason)
		}
	}
}
