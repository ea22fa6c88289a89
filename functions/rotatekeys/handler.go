package main

import (
	"context"
	"log/slog"

	"github.com/acmebank/authserver/shared/keys"
)

// event is what the function is invoked with: an EventBridge scheduled event (only its
// envelope is read), or {"promote": true} from an operator who wants the current key replaced
// now (still never before the next key has been published for the policy's lead time).
type event struct {
	ID         string `json:"id"`
	DetailType string `json:"detail-type"`
	Source     string `json:"source"`
	Promote    bool   `json:"promote"`
}

// rotator is the part of keys.Rotator the function uses.
type rotator interface {
	Rotate(ctx context.Context) (keys.Report, error)
	Promote(ctx context.Context) (keys.Report, error)
}

// newHandler returns the Lambda handler: one rotation run per invocation, its report logged
// (kids and timestamps only, never key material) and returned to the invoker. A failed run
// returns its error, so the invocation is marked failed and EventBridge's retry runs it again;
// runs are idempotent.
func newHandler(r rotator, log *slog.Logger) func(context.Context, event) (keys.Report, error) {
	return func(ctx context.Context, ev event) (keys.Report, error) {
		run, mode := r.Rotate, "scheduled"
		if ev.Promote {
			run, mode = r.Promote, "promote"
		}
		rep, err := run(ctx)
		if err != nil {
			log.ErrorContext(ctx, "key rotation failed", "mode", mode, "event_id", ev.ID, "report", rep, "err", err)
			return rep, err
		}
		log.InfoContext(ctx, "key rotation done", "mode", mode, "event_id", ev.ID, "report", rep)
		return rep, nil
	}
}
