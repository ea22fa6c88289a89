package oauth

import (
	"context"
	"log/slog"
)

// AuditInfo is what the audit record of an event takes from the request (or the operator's
// command) rather than from the grant: the client's network address, the client the request
// is for, and for an operator's action who ran it.
type AuditInfo struct {
	ClientIP string
	ClientID string
	Actor    string
}

type auditKey struct{}

// WithAuditInfo returns ctx carrying info for the audit records of what is done under it.
func WithAuditInfo(ctx context.Context, info AuditInfo) context.Context {
	return context.WithValue(ctx, auditKey{}, info)
}

// AuditInfoFrom returns the AuditInfo ctx carries (zero when none).
func AuditInfoFrom(ctx context.Context) AuditInfo {
	info, _ := ctx.Value(auditKey{}).(AuditInfo)
	return info
}

// auditLog is where security events go: Audit, else Log.
func (s *Service) auditLog() *slog.Logger {
	if s.Audit != nil {
		return s.Audit
	}
	return s.Log
}

// audit records one security event with the same fields every time (event, client_id, uid,
// grant_id, ip, reason; actor for an operator's action), so a reader or a SIEM finds them in
// every line; attrs add event-specific ones (a reason among them). Only identifiers: never a
// token, code, secret or password. It is written whatever the service log's level: the Audit
// logger has its own handler and writer.
func (s *Service) audit(ctx context.Context, event string, g *Grant, attrs ...slog.Attr) {
	WriteAudit(ctx, s.auditLog(), event, g, attrs...)
}

// WriteAudit writes one security event to log (nothing when log is nil) in the one format
// every audit record has (Service.audit): the token domain's events and the user's
// authentication's (package authn) alike.
func WriteAudit(ctx context.Context, log *slog.Logger, event string, g *Grant, attrs ...slog.Attr) {
	if log == nil {
		return
	}
	info := AuditInfoFrom(ctx)
	clientID := g.ClientID
	if clientID == "" {
		clientID = info.ClientID
	}
	// One slice: the fixed fields, reason among them (filled from attrs), then the others.
	line := make([]slog.Attr, 6, 7+len(attrs))
	line[0], line[1], line[2] = slog.String("event", event), slog.String("client_id", clientID), slog.String("uid", g.UID)
	line[3], line[4], line[5] = slog.String("grant_id", g.ID), slog.String("ip", info.ClientIP), slog.String("reason", "")
	if info.Actor != "" {
		line = append(line, slog.String("actor", info.Actor))
	}
	for _, a := range attrs {
		if a.Key == "reason" {
			line[5] = slog.String("reason", a.Value.String())
			continue
		}
		line = append(line, a)
	}
	log.LogAttrs(ctx, slog.LevelInfo, "audit", line...)
}
