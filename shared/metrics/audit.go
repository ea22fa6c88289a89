package metrics

import (
	"context"
	"log/slog"
	"strings"

	"github.com/acmebank/authserver/shared/oauth"
)

// GrantTypes are the values of the GrantType dimension.
var GrantTypes = []string{"authorization_code", "refresh_token", "client_credentials", "ciba"}

// Factors are the values of the Factor dimension: the password and the second factors.
var Factors = []string{"password", oauth.FactorTOTP, "recovery_code", oauth.FactorPasskey}

// fromAudit is the one table from audit events (oauth.WriteAudit's event and reason) to
// metrics: the exchanges the token domain records and the sign-in attempts of package authn.
// A factor's enrolment proves the factor (its first code, its registration) and counts as a
// success of that factor; its failures are already factor_failed. Every other event is no metric.
func (r *Recorder) fromAudit(ctx context.Context, event, reason string) {
	switch event {
	case "grant_issued":
		r.Exchange(ctx, "authorization_code")
	case "grant_refreshed", "refresh_retry": // a retry within the window answers with tokens too
		r.Exchange(ctx, "refresh_token")
	case "client_credentials_issued":
		r.Exchange(ctx, "client_credentials")
	case "ciba_issued":
		r.Exchange(ctx, "ciba")
	case "login_succeeded":
		r.SignIn(ctx, "password", true)
	case "login_failed", "login_locked":
		r.SignIn(ctx, "password", false)
	case "factor_succeeded", "factor_enrolled", "factor_failed":
		if f := factorOf(reason); f != "" {
			r.SignIn(ctx, f, event != "factor_failed")
		}
	}
}

// factorOf is the factor an audit reason names (totp, totp_step_used, passkey_malformed, ...),
// "" when it names none.
func factorOf(reason string) string {
	for _, f := range Factors {
		if reason == f || strings.HasPrefix(reason, f+"_") {
			return f
		}
	}
	return ""
}

// Audit returns log with every audit record it writes also turned into its metric (an
// exchange, a sign-in); the records themselves are written unchanged. With a nil Recorder it
// returns log.
func (r *Recorder) Audit(log *slog.Logger) *slog.Logger {
	if r == nil || log == nil {
		return log
	}
	return slog.New(auditHandler{Handler: log.Handler(), r: r})
}

// auditHandler passes every record on, then records the metric of an audit record.
type auditHandler struct {
	slog.Handler
	r *Recorder
}

func (h auditHandler) Handle(ctx context.Context, rec slog.Record) error {
	err := h.Handler.Handle(ctx, rec)
	var event, reason string
	rec.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "event":
			event = a.Value.String()
		case "reason":
			reason = a.Value.String()
		}
		return true
	})
	h.r.fromAudit(ctx, event, reason)
	return err
}

func (h auditHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return auditHandler{Handler: h.Handler.WithAttrs(attrs), r: h.r}
}

func (h auditHandler) WithGroup(name string) slog.Handler {
	return auditHandler{Handler: h.Handler.WithGroup(name), r: h.r}
}
