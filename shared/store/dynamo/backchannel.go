package dynamo

import (
	"context"
	"errors"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// errBackchannelPending: the DynamoDB adapter of oauth.BackchannelStore is not written yet.
var errBackchannelPending = errors.New("dynamo: backchannel requests are not implemented yet")

func (s *Store) PutBackchannelRequest(ctx context.Context, r oauth.BackchannelRequest) error {
	return errBackchannelPending
}

func (s *Store) GetBackchannelRequest(ctx context.Context, id string, now time.Time) (oauth.BackchannelRequest, error) {
	return oauth.BackchannelRequest{}, errBackchannelPending
}

func (s *Store) PollBackchannelRequest(ctx context.Context, id, clientID string, now time.Time) (oauth.BackchannelRequest, error) {
	return oauth.BackchannelRequest{}, errBackchannelPending
}

func (s *Store) DecideBackchannelRequest(ctx context.Context, id, uid string, d oauth.BackchannelDecision, now time.Time) (oauth.BackchannelRequest, error) {
	return oauth.BackchannelRequest{}, errBackchannelPending
}

func (s *Store) ConsumeBackchannelRequest(ctx context.Context, id, clientID string, now time.Time, once ...oauth.Once) (oauth.BackchannelRequest, error) {
	return oauth.BackchannelRequest{}, errBackchannelPending
}

func (s *Store) ListBackchannelRequests(ctx context.Context, uid string, now time.Time) ([]oauth.BackchannelRequest, error) {
	return nil, errBackchannelPending
}
