// Package eventbridge is the AWS adapter of ciba.Device: it publishes one EventBridge event
// per backchannel authentication request, which a rule on the bus delivers to the bank's app
// backend (docs/api.md, "The bank's app backend: the contract"). The backend answers later
// through the decision callback (package ciba/appbackend). Only this package and the mains
// that build it link the EventBridge client; the domain (package ciba) knows nothing of AWS.
package eventbridge

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/acmebank/authserver/shared/ciba"
	"github.com/acmebank/authserver/shared/oauth"
)

// The event's envelope: what a rule on the bus matches (docs/api.md).
const (
	Source     = "acmebank.authserver"
	DetailType = "CIBA Authentication Requested"
)

// Detail is the event's detail: the request as the customer's device shows it, and the
// reference its decision names. It never holds the auth_req_id (ciba.Device's rule): Ref is
// its hash, which cannot be polled with.
type Detail struct {
	Ref                  string          `json:"ref"`
	UID                  string          `json:"uid"`
	ClientID             string          `json:"client_id"`
	ClientName           string          `json:"client_name,omitempty"`
	BindingMessage       string          `json:"binding_message,omitempty"`
	Scopes               []string        `json:"scopes"`
	AuthorizationDetails json.RawMessage `json:"authorization_details,omitempty"`
	// AuthorizationDetailsSHA256 is the base64url SHA-256 of AuthorizationDetails, exactly
	// as sent: what a payment's decision token must carry (details_sha256).
	AuthorizationDetailsSHA256 string    `json:"authorization_details_sha256,omitempty"`
	ExpiresAt                  time.Time `json:"expires_at"`
}

// DetailOf is the event detail of r.
func DetailOf(r ciba.DeviceRequest) Detail {
	d := Detail{Ref: r.Ref, UID: r.UID, ClientID: r.ClientID, ClientName: r.ClientName,
		BindingMessage: r.BindingMessage, Scopes: r.Scopes, ExpiresAt: r.ExpiresAt.UTC()}
	if d.Scopes == nil {
		d.Scopes = []string{}
	}
	if len(r.AuthorizationDetails) > 0 {
		d.AuthorizationDetails = r.AuthorizationDetails
		d.AuthorizationDetailsSHA256 = base64.RawURLEncoding.EncodeToString(oauth.DetailsHash(r.AuthorizationDetails))
	}
	return d
}

// API is the part of the EventBridge client the device calls.
type API interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

// Device publishes each request as one event on Bus.
type Device struct {
	client API
	bus    string
}

var _ ciba.Device = (*Device)(nil)

// New is a Device publishing on bus (its name or ARN) with client.
func New(client API, bus string) (*Device, error) {
	if client == nil || bus == "" {
		return nil, errors.New("eventbridge device: a client and a bus are needed")
	}
	return &Device{client: client, bus: bus}, nil
}

// NewClient is the EventBridge client of the function's role and region. Its endpoint is the
// SDK's: AWS_ENDPOINT_URL_EVENTBRIDGE points it elsewhere (the Lambda harness's recorder).
func NewClient(ctx context.Context, optFns ...func(*awsconfig.LoadOptions) error) (*eventbridge.Client, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx, optFns...)
	if err != nil {
		return nil, fmt.Errorf("load aws config: %w", err)
	}
	return eventbridge.NewFromConfig(cfg), nil
}

// Reach publishes r as one event. A call that fails, or an entry EventBridge did not accept
// (FailedEntryCount), is an error: the customer's device was not reached.
func (d *Device) Reach(ctx context.Context, r ciba.DeviceRequest) error {
	detail, err := json.Marshal(DetailOf(r))
	if err != nil {
		return fmt.Errorf("eventbridge device: detail: %w", err)
	}
	out, err := d.client.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []types.PutEventsRequestEntry{{
		EventBusName: aws.String(d.bus),
		Source:       aws.String(Source),
		DetailType:   aws.String(DetailType),
		Detail:       aws.String(string(detail)),
	}}})
	if err != nil {
		return fmt.Errorf("eventbridge device: put events: %w", err)
	}
	if out.FailedEntryCount > 0 || len(out.Entries) != 1 {
		code, msg := "", ""
		if len(out.Entries) > 0 {
			code, msg = aws.ToString(out.Entries[0].ErrorCode), aws.ToString(out.Entries[0].ErrorMessage)
		}
		return fmt.Errorf("eventbridge device: the event was not accepted: %s %s", code, msg)
	}
	return nil
}
