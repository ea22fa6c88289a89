package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestWithAccessLog_OnlyWhenInfoIsWritten proves that requests are logged at info and debug,
// and that at warn the handler is served as it is, with no line and no wrapper.
func TestWithAccessLog_OnlyWhenInfoIsWritten(t *testing.T) {
	tests := []struct {
		name    string
		level   slog.Level
		logged  bool
		wrapped bool
	}{
		{"debug", slog.LevelDebug, true, true},
		{"info", slog.LevelInfo, true, true},
		{"warn", slog.LevelWarn, false, false},
		{"error", slog.LevelError, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: tt.level}))
			inner := &teapot{}
			h := withAccessLog(context.Background(), log, inner)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x?code=secret", nil))
			if rec.Code != http.StatusTeapot {
				t.Fatalf("status %d", rec.Code)
			}
			if got := strings.Contains(out.String(), "status=418"); got != tt.logged {
				t.Errorf("logged %v, want %v: %q", got, tt.logged, out.String())
			}
			if strings.Contains(out.String(), "secret") {
				t.Errorf("the query was logged: %q", out.String())
			}
			if wrapped := h != http.Handler(inner); wrapped != tt.wrapped {
				t.Errorf("handler wrapped %v, want %v", wrapped, tt.wrapped)
			}
		})
	}
}

type teapot struct{}

func (*teapot) ServeHTTP(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }
