package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/acmebank/authserver/shared/keys"
)

type fakeRotator struct {
	calls []string
	err   error
}

func (f *fakeRotator) Rotate(context.Context) (keys.Report, error) {
	f.calls = append(f.calls, "rotate")
	return keys.Report{Changed: true, Current: "kid-cur", Next: "kid-next", Created: []string{"kid-next"}}, f.err
}

func (f *fakeRotator) Promote(context.Context) (keys.Report, error) {
	f.calls = append(f.calls, "promote")
	return keys.Report{Promoted: "kid-next"}, f.err
}

// scheduled is an EventBridge scheduled event as Lambda delivers it.
const scheduled = `{"version":"0","id":"53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa","detail-type":"Scheduled Event",
"source":"aws.events","account":"123456789012","time":"2026-01-01T00:00:00Z","region":"eu-west-1",
"resources":["arn:aws:events:eu-west-1:123456789012:rule/rotate-keys"],"detail":{}}`

func TestHandler_RunsTheRotationAndLogsItsReportAsJSON(t *testing.T) {
	for _, tc := range []struct {
		name, payload, want string
	}{
		{"scheduled event rotates", scheduled, "rotate"},
		{"operator asks to promote", `{"promote":true}`, "promote"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			r := &fakeRotator{}
			h := newHandler(r, slog.New(slog.NewJSONHandler(&logs, nil)))
			var ev event
			if err := json.Unmarshal([]byte(tc.payload), &ev); err != nil {
				t.Fatal(err)
			}
			if _, err := h(context.Background(), ev); err != nil {
				t.Fatal(err)
			}
			if len(r.calls) != 1 || r.calls[0] != tc.want {
				t.Fatalf("calls %v, want %s", r.calls, tc.want)
			}
			var line map[string]any
			if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
				t.Fatalf("log is not one JSON line: %q", logs.String())
			}
			if _, ok := line["report"].(map[string]any); !ok || line["msg"] != "key rotation done" {
				t.Fatalf("log line %v lacks the report", line)
			}
		})
	}
}

func TestHandler_FailedRunFailsTheInvocation(t *testing.T) {
	var logs bytes.Buffer
	boom := errors.New("kms: throttled")
	h := newHandler(&fakeRotator{err: boom}, slog.New(slog.NewJSONHandler(&logs, nil)))
	if _, err := h(context.Background(), event{}); !errors.Is(err, boom) {
		t.Fatalf("handler = %v, want the rotation's error", err)
	}
	if !strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Fatalf("failure not logged as an error: %s", logs.String())
	}
}
