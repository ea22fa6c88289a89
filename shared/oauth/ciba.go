package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Client-Initiated Backchannel Authentication (OpenID CIBA Core 1.0, issue 31): a client asks,
// authenticated, for a customer it names by a hint; the customer approves or denies on the
// bank's authentication device (package ciba's Device port); the client polls the token
// endpoint with the auth_req_id (grant urn:openid:params:grant-type:ciba), or is pinged first.
// This file holds the request as stored and the store port; the rules are in package ciba
// (the backchannel authentication endpoint, the device's decision) and flow_ciba.go (the grant).

// GrantTypeCIBA is CIBA's grant type at the token endpoint (CIBA Core 10.1).
const GrantTypeCIBA = "urn:openid:params:grant-type:ciba"

// PrefixAuthReqID starts every auth_req_id (after the home, in a multi-region deployment).
const PrefixAuthReqID = "ciba_"

// Token delivery modes (CIBA Core 5). Push is not offered: FAPI-CIBA forbids it, and a token
// pushed to a client's endpoint is a token sent where no client authentication protects it.
const (
	CIBAModePoll = "poll"
	CIBAModePing = "ping"
)

// States of a backchannel request: pending until the device decides (approved or denied) or
// it expires; an approved one is issued once, by the poll that takes it.
const (
	CIBAPending  = "pending"
	CIBAApproved = "approved"
	CIBADenied   = "denied"
	CIBAIssued   = "issued"
)

// BackchannelRequestID is the store key of the request an auth_req_id names: a prefix of its
// own and the SHA-256 of the auth_req_id, so a stored key never is a usable auth_req_id. It
// is also the reference the authentication device gets (DeviceRequest.Ref in package ciba),
// and carries the auth_req_id's home as a token does ("bc_<home>.<hash>", HomeOf reads it),
// so a decision reaches the request's home.
func BackchannelRequestID(authReqID string) string {
	if h := HomeOf(authReqID); h != "" {
		return "bc_" + h + "." + HashToken(authReqID)
	}
	return "bc_" + HashToken(authReqID)
}

// BackchannelRequest is a CIBA authentication request as stored, from the backchannel
// authentication endpoint until its tokens are issued or it is past KeepUntil.
type BackchannelRequest struct {
	// ID is BackchannelRequestID of the auth_req_id.
	ID       string `json:"id" dynamodbav:"id"`
	ClientID string `json:"client_id" dynamodbav:"client_id"`
	// UID is the customer the hint named; empty when it named nobody: the request is then
	// kept like any other and answers polls the same way until it expires, so no answer says
	// whether a customer exists, and no device is ever asked.
	UID    string `json:"uid,omitempty" dynamodbav:"uid,omitempty"`
	Scopes Scopes `json:"scopes" dynamodbav:"scopes"`
	// AuthorizationDetails are the request's, validated as at the authorization endpoint.
	AuthorizationDetails json.RawMessage `json:"authorization_details,omitempty" dynamodbav:"authorization_details,omitempty"`
	// BindingMessage is shown on the consumption device and the authentication device (CIBA
	// Core 7.1), validated to a short, printable text.
	BindingMessage string   `json:"binding_message,omitempty" dynamodbav:"binding_message,omitempty"`
	ACRValues      []string `json:"acr_values,omitempty" dynamodbav:"acr_values,omitempty"`
	// Mode is CIBAModePoll or CIBAModePing (the client's registration).
	Mode string `json:"mode" dynamodbav:"mode"`
	// NotificationToken is a ping client's client_notification_token: the bearer token the
	// ping presents to the client's own endpoint (CIBA Core 10.2). AuthReqID is kept, for a
	// ping client only, because the ping carries it; a poll needs the client's authentication
	// beside it, so neither is usable alone.
	NotificationToken string `json:"notification_token,omitempty" dynamodbav:"notification_token,omitempty"`
	AuthReqID         string `json:"auth_req_id,omitempty" dynamodbav:"auth_req_id,omitempty"`
	// Interval is the least time between two polls (seconds, CIBA Core 7.3); a poll sooner
	// is slow_down.
	Interval int `json:"interval" dynamodbav:"interval"`
	// CreatedAt; ExpiresAt is the auth_req_id's expiry (expires_in): a decision after it is
	// refused and a poll after it is expired_token. KeepUntil (later) is when the store may
	// forget the request: an approved request can still be polled until then, and an unknown
	// id is told from an expired one until then.
	CreatedAt time.Time `json:"created_at" dynamodbav:"created_at"`
	ExpiresAt time.Time `json:"expires_at" dynamodbav:"expires_at"`
	KeepUntil time.Time `json:"keep_until" dynamodbav:"keep_until"`
	// NextPollAt is the earliest time the next poll is not slow_down.
	NextPollAt time.Time `json:"next_poll_at" dynamodbav:"next_poll_at"`
	// State is CIBAPending, CIBAApproved, CIBADenied or CIBAIssued.
	State string `json:"state" dynamodbav:"state"`
	// Grant is, once approved, the grant the poll issues (the customer, auth_time, amr, the
	// payment evidence); DecidedAt when the device decided.
	Grant     *Grant    `json:"grant,omitempty" dynamodbav:"grant,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitzero" dynamodbav:"decided_at,omitempty"`
}

// BackchannelDecision is the device's answer to a request: approved with the grant to issue,
// or denied (Grant nil).
type BackchannelDecision struct {
	Approve bool
	Grant   *Grant
	// Once are the decision's one-time values (the app backend's decision token's jti),
	// recorded in the decision's own write or not at all: one used before is a
	// *ReplayedError naming it, checked first, and nothing is decided; a refused decision
	// records none.
	Once []Once
}

// ErrSlowDown is a poll sooner than the request's NextPollAt: nothing was written.
var ErrSlowDown = errors.New("polled too soon")

// BackchannelStore keeps CIBA requests. Every method acts at the request's home (the ID's
// prefix, WithHome). Its single-use semantics are the grant's security; storetest checks them.
type BackchannelStore interface {
	// PutBackchannelRequest stores a new request; ErrAlreadyExists when its ID is taken.
	PutBackchannelRequest(ctx context.Context, r BackchannelRequest) error
	// GetBackchannelRequest returns a request in one strongly consistent read; ErrNotFound
	// when unknown or past KeepUntil.
	GetBackchannelRequest(ctx context.Context, id string, now time.Time) (BackchannelRequest, error)
	// PollBackchannelRequest is a poll by clientID, in one atomic step. It returns the request
	// as it was before the poll. Unknown, past KeepUntil or another client's: ErrNotFound,
	// nothing written. Pending and now before NextPollAt: ErrSlowDown, nothing written.
	// Pending otherwise: NextPollAt becomes now + Interval (of N racing polls of one request at
	// most one moves it; the others are ErrSlowDown). Approved, denied or issued: returned as
	// it is, nothing written.
	PollBackchannelRequest(ctx context.Context, id, clientID string, now time.Time) (BackchannelRequest, error)
	// DecideBackchannelRequest records the device's decision once: the request must be
	// pending, the customer's (uid, non-empty, equal to UID) and now before ExpiresAt. It sets
	// State (approved or denied), Grant and DecidedAt, and returns the request as decided.
	// Decided before: ErrUsed. Unknown, expired or another customer's: ErrNotFound. A refused
	// call writes nothing; of N racing decisions exactly one succeeds. The decision's once
	// values are recorded in the same atomic write (BackchannelDecision.Once).
	DecideBackchannelRequest(ctx context.Context, id, uid string, d BackchannelDecision, now time.Time) (BackchannelRequest, error)
	// ConsumeBackchannelRequest turns an approved request of clientID into issued, once, and
	// returns it; the once values are recorded in the same atomic write (as ConsumeCode: one
	// used before is a *ReplayedError, checked first, and nothing is written). Issued before:
	// the request with ErrUsed (the caller revokes its grant, as for a code used twice).
	// Unknown, past KeepUntil, another client's, pending or denied: ErrNotFound. Of N racing
	// calls exactly one succeeds.
	ConsumeBackchannelRequest(ctx context.Context, id, clientID string, now time.Time, once ...Once) (BackchannelRequest, error)
	// ListBackchannelRequests lists the pending, unexpired requests of a customer (the local
	// bank app page); it may lag a decision by a moment where the backend's index does.
	ListBackchannelRequests(ctx context.Context, uid string, now time.Time) ([]BackchannelRequest, error)
}
