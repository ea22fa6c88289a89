package ciba

import (
	"context"
	"log/slog"
)

// PageDevice is the local server's Device: the customer is reached by the bank app page
// (shared/web), which lists Service.Pending when the customer opens it, so reaching them is
// only a log line (the request's reference, the customer and the client: never the
// auth_req_id, the binding message or the details).
type PageDevice struct {
	Log *slog.Logger
}

// Reach logs that r awaits its customer on the bank app page.
func (d PageDevice) Reach(ctx context.Context, r DeviceRequest) error {
	if d.Log != nil {
		d.Log.InfoContext(ctx, "ciba: a request awaits the customer on the bank app page",
			slog.String("request", r.Ref), slog.String("uid", r.UID), slog.String("client_id", r.ClientID))
	}
	return nil
}

var _ Device = PageDevice{}
