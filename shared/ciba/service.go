package ciba

import (
	"context"
	"errors"
	"net/url"

	"github.com/acmebank/authserver/shared/oauth"
)

// SKELETON (issue 31): the signatures below are the contract the device adapters (the local
// bank app page, the AWS callback) build against; their bodies are being written.
var errNotBuilt = errors.New("ciba: not built yet")

// Service is CIBA's use case.
type Service struct{}

// StartResponse is the backchannel authentication endpoint's success (CIBA Core 7.3).
type StartResponse struct {
	AuthReqID string `json:"auth_req_id"`
	ExpiresIn int64  `json:"expires_in"`
	Interval  int    `json:"interval,omitempty"`
}

// Start is the backchannel authentication endpoint for an authenticated client: it checks
// the request (CIBA Core 7.1, FAPI-CIBA for fapi2 clients), stores it and reaches the
// customer's device. Errors are *oauth.Error (CIBA Core 13).
func (s *Service) Start(ctx context.Context, client *oauth.Client, params url.Values) (*StartResponse, error) {
	return nil, errNotBuilt
}

// Pending lists the requests awaiting uid's decision, newest first.
func (s *Service) Pending(ctx context.Context, uid string) ([]DeviceRequest, error) {
	return nil, errNotBuilt
}

// Request returns the pending request ref if it is uid's; ErrUnknownRequest otherwise.
func (s *Service) Request(ctx context.Context, ref, uid string) (DeviceRequest, error) {
	return DeviceRequest{}, errNotBuilt
}

// Decide records the customer's decision once (the errors above), audits it, and pings a
// ping client.
func (s *Service) Decide(ctx context.Context, d Decision) error {
	return errNotBuilt
}
