package eventbridge_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awseb "github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/acmebank/authserver/shared/ciba"
	"github.com/acmebank/authserver/shared/ciba/eventbridge"
	"github.com/acmebank/authserver/shared/ciba/eventbridge/ebtest"
	"github.com/acmebank/authserver/shared/oauth"
)

const bus = "arn:aws:events:eu-west-1:111122223333:event-bus/authserver-ciba"

// client is the real SDK client pointed at the recorder.
func client(rec *ebtest.Recorder) *awseb.Client {
	return awseb.New(awseb.Options{
		Region:       "eu-west-1",
		BaseEndpoint: aws.String(rec.URL()),
		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
	})
}

func payment() ciba.DeviceRequest {
	return ciba.DeviceRequest{
		Ref:                  oauth.BackchannelRequestID("ciba_secret-auth-req-id"),
		UID:                  "u-123",
		ClientID:             "cl_shop",
		ClientName:           "Shop",
		BindingMessage:       "W4SCT",
		Scopes:               []string{"openid", "payments"},
		AuthorizationDetails: json.RawMessage(`[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"12.50"},"creditorName":"Shop"}]`),
		ExpiresAt:            time.Date(2026, 11, 26, 16, 0, 0, 0, time.UTC),
	}
}

func TestReach_PublishesOneEventWithTheRequestAndNeverTheAuthReqID(t *testing.T) {
	rec := ebtest.New()
	defer rec.Close()
	dev, err := eventbridge.New(client(rec), bus)
	if err != nil {
		t.Fatal(err)
	}
	r := payment()
	if err := dev.Reach(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	got := rec.Entries()
	if len(got) != 1 {
		t.Fatalf("%d events, want 1", len(got))
	}
	e := got[0]
	if e.EventBusName != bus || e.Source != eventbridge.Source || e.DetailType != eventbridge.DetailType || e.Service != "events" {
		t.Errorf("envelope %+v", e)
	}
	if strings.Contains(e.Detail, "secret-auth-req-id") || strings.Contains(e.Detail, "auth_req_id") {
		t.Errorf("the event carries the auth_req_id: %s", e.Detail)
	}
	var d map[string]any
	if err := json.Unmarshal([]byte(e.Detail), &d); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"ref": r.Ref, "uid": "u-123", "client_id": "cl_shop", "client_name": "Shop",
		"binding_message": "W4SCT", "expires_at": "2026-11-26T16:00:00Z",
		"authorization_details_sha256": base64.RawURLEncoding.EncodeToString(oauth.DetailsHash(r.AuthorizationDetails))}
	for k, v := range want {
		if d[k] != v {
			t.Errorf("detail %s = %v, want %v", k, d[k], v)
		}
	}
	var raw struct {
		AuthorizationDetails json.RawMessage `json:"authorization_details"`
	}
	_ = json.Unmarshal([]byte(e.Detail), &raw)
	if details := raw.AuthorizationDetails; string(details) != string(r.AuthorizationDetails) {
		t.Errorf("authorization_details %s, want the request's bytes %s", details, r.AuthorizationDetails)
	}
}

func TestReach_AFailedEntryIsAnError(t *testing.T) {
	rec := ebtest.New()
	defer rec.Close()
	rec.FailEntries(true)
	dev, _ := eventbridge.New(client(rec), bus)
	if err := dev.Reach(context.Background(), payment()); err == nil {
		t.Fatal("an entry EventBridge did not accept was taken as delivered")
	}
}

func TestReach_AnUnreachableBusIsAnError(t *testing.T) {
	rec := ebtest.New()
	c := client(rec)
	rec.Close()
	dev, _ := eventbridge.New(c, bus)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := dev.Reach(ctx, payment()); err == nil {
		t.Fatal("a failed call was taken as delivered")
	}
}

func TestNew_NeedsAClientAndABus(t *testing.T) {
	if _, err := eventbridge.New(nil, bus); err == nil {
		t.Error("no client accepted")
	}
	rec := ebtest.New()
	defer rec.Close()
	if _, err := eventbridge.New(client(rec), ""); err == nil {
		t.Error("no bus accepted")
	}
}
