package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// The local server's health endpoints, for a load balancer or an orchestrator. They sit
// outside the OAuth paths, need no authentication and reveal nothing but up or not.
const (
	// PathLive answers 200 while the process serves requests (liveness: restart it if not).
	PathLive = "/healthz"
	// PathReady answers 200 only while the store takes a write (readiness: send it traffic).
	PathReady = "/readyz"
)

// Health serves PathLive and PathReady.
type Health struct {
	// Store is written to by each readiness check (one small item of its own).
	Store oauth.WriteChecker
	Clock oauth.Clock
	// Timeout bounds a readiness check: a store that hangs is not ready.
	Timeout time.Duration
	Log     *slog.Logger
}

// Register mounts both endpoints on m.
func (h *Health) Register(m *http.ServeMux) {
	m.HandleFunc("GET "+PathLive, func(w http.ResponseWriter, r *http.Request) { healthAnswer(w, http.StatusOK, "ok") })
	m.HandleFunc("GET "+PathReady, h.ready)
}

func (h *Health) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.Timeout)
	defer cancel()
	if err := h.Store.CheckWrite(ctx, h.Clock.Now()); err != nil {
		h.Log.WarnContext(r.Context(), "readiness: the store does not take writes", slog.Any("err", err))
		w.Header().Set("Retry-After", "5")
		healthAnswer(w, http.StatusServiceUnavailable, "unavailable")
		return
	}
	healthAnswer(w, http.StatusOK, "ok")
}

func healthAnswer(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body + "\n"))
}
