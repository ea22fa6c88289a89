// Package ciba is OpenID Client-Initiated Backchannel Authentication (CIBA Core 1.0, with the
// FAPI-CIBA rules for fapi2 clients): the backchannel authentication endpoint's use case
// (Start), the authentication device's decision (Decide) and what a device shows (Pending,
// Request). The customer's device is a port (Device) with two adapters: in AWS an event the
// bank's app backend consumes (package ciba/eventbridge) and a callback that backend calls
// with the decision (package ciba/appbackend); locally the bank app page of the local server
// (shared/web), which lists Pending and decides through Decide. The grant that turns an
// approved request into tokens is shared/oauth's flow_ciba.go.
package ciba

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// Device is the port to the customer's authentication device: Reach asks the channel to show
// r on the customer's device and returns once the channel accepted it. The decision comes
// back later, through Service.Decide. A Device is never given the auth_req_id.
type Device interface {
	Reach(ctx context.Context, r DeviceRequest) error
}

// DeviceRequest is what an authentication device shows the customer, and the reference its
// decision names.
type DeviceRequest struct {
	// Ref is the request's reference (oauth.BackchannelRequestID of its auth_req_id): what
	// Decision.Ref names. It is not the auth_req_id and cannot be turned into one.
	Ref        string
	UID        string
	ClientID   string
	ClientName string
	// BindingMessage is the text the client shows on its own screen (CIBA Core 7.1), to be
	// shown as it is: the customer compares the two.
	BindingMessage string
	Scopes         []string
	// AuthorizationDetails are the request's (RFC 9396), e.g. a payment's amount and payee,
	// as stored: a payment's approval is bound to these bytes (Decision.Evidence).
	AuthorizationDetails json.RawMessage
	ExpiresAt            time.Time
}

// Decision is the customer's answer to a request, as the device reports it.
type Decision struct {
	// Ref names the request (DeviceRequest.Ref).
	Ref string
	// UID is the customer who answered: the request's own, or the decision is refused.
	UID     string
	Approve bool
	// AMR are the methods (RFC 8176) the device authenticated the customer with for this
	// decision, and AuthTime when. An approval needs strong authentication (oauth.AMRStrong):
	// never a password alone.
	AMR      []string
	AuthTime time.Time
	// Evidence binds the approval of a payment to its amount and payee (dynamic linking,
	// shared/oauth/dynamic_linking.go); an approval of a request holding a payment_initiation
	// is refused without evidence over its AuthorizationDetails.
	Evidence *oauth.PaymentEvidence
	// Once are the decision's one-time values (the app backend's decision token's jti),
	// recorded in the decision's own write: a value used before decides nothing
	// (ErrReplayed), and a refused decision records none.
	Once []oauth.Once
}

// Errors of Decide, compared with errors.Is; nothing is written on any of them.
var (
	// ErrUnknownRequest: no pending request of this customer has this reference (unknown,
	// expired, or another customer's: the three are not told apart).
	ErrUnknownRequest = errors.New("ciba: no such pending request")
	// ErrDecided: the request was decided before.
	ErrDecided = errors.New("ciba: the request was decided before")
	// ErrNotStrong: an approval without strong authentication.
	ErrNotStrong = errors.New("ciba: an approval needs strong authentication")
	// ErrPaymentLink: an approval of a payment without evidence over its details.
	ErrPaymentLink = errors.New("ciba: the approval is not bound to the payment's details")
	// ErrReplayed: one of the decision's one-time values (Decision.Once) was used before.
	ErrReplayed = errors.New("ciba: the decision's one-time value was used before")
)

// Pinger tells a ping client that its request is decided (CIBA Core 10.2): a POST of
// {"auth_req_id": …} to the client's backchannel_client_notification_endpoint with its
// client_notification_token as the bearer token; https only, public addresses only outside
// tests, bounded retries. A failed ping changes nothing: the client can still poll.
type Pinger interface {
	Ping(ctx context.Context, endpoint, notificationToken, authReqID string) error
}
