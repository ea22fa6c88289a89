package kmskey_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/acmebank/authserver/shared/keys/kmskey"
)

// hostRecorder is an HTTP client that records the host of the one request it is given and
// answers nothing: the endpoint the SDK resolved, without a network.
type hostRecorder struct{ host string }

var errRecorded = errors.New("recorded")

func (h *hostRecorder) Do(r *http.Request) (*http.Response, error) {
	h.host = r.URL.Host
	return nil, errRecorded
}

// TestNewClient_EmptyEndpointVariableKeepsTheRegionalEndpoint: the template declares
// AWS_ENDPOINT_URL_KMS empty in every function so that sam local can point it at local-kms;
// in AWS the empty value must leave the SDK on the region's KMS endpoint, and a set value
// must replace it.
func TestNewClient_EmptyEndpointVariableKeepsTheRegionalEndpoint(t *testing.T) {
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-only")
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_CA_BUNDLE", "")
	t.Setenv("AWS_PROFILE", "")
	for _, tc := range []struct{ env, want string }{
		{"", "kms.eu-west-1.amazonaws.com"},
		{"http://host.docker.internal:8100", "host.docker.internal:8100"},
	} {
		t.Setenv("AWS_ENDPOINT_URL_KMS", tc.env)
		rec := &hostRecorder{}
		client, err := kmskey.NewClient(context.Background(), "", config.WithHTTPClient(rec), config.WithRetryMaxAttempts(1))
		if err != nil {
			t.Fatal(err)
		}
		_, err = client.GetPublicKey(context.Background(), &kms.GetPublicKeyInput{KeyId: new(string)})
		if !errors.Is(err, errRecorded) {
			t.Fatalf("AWS_ENDPOINT_URL_KMS=%q: %v, want the recorded request", tc.env, err)
		}
		if rec.host != tc.want {
			t.Errorf("AWS_ENDPOINT_URL_KMS=%q: request to %q, want %q", tc.env, rec.host, tc.want)
		}
	}
}
