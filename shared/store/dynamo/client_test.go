package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/logging"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/dynamo"
)

// isolateAWSConfig makes the test see only the AWS configuration it sets: no shared config
// files of the machine, no instance metadata, then env.
func isolateAWSConfig(t *testing.T, env map[string]string) {
	none := filepath.Join(t.TempDir(), "none")
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
		"AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE",
		"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", none)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", none)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// TestNewClient_ResolvesEndpointRegionAndCredentials proves how NewClient configures the
// client of the functions, the local server and the admin tool: the environment's region and
// credentials always win; a loopback endpoint (DynamoDB Local) with none configured gets dummy
// ones, so a newcomer needs no AWS setup; a remote endpoint never gets dummy credentials.
func TestNewClient_ResolvesEndpointRegionAndCredentials(t *testing.T) {
	tests := []struct {
		name       string
		endpoint   string
		env        map[string]string
		wantRegion string
		wantKeyID  string // "" means: resolving credentials must fail
	}{
		{"LoopbackWithNothingConfiguredUsesDummies", "http://127.0.0.1:8000", nil, "us-east-1", "local"},
		{"LocalhostWithNothingConfiguredUsesDummies", "http://localhost:8000", nil, "us-east-1", "local"},
		{"LoopbackKeepsConfiguredRegionAndKeys", "http://127.0.0.1:8000",
			map[string]string{"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKIDENV", "AWS_SECRET_ACCESS_KEY": "s"}, "eu-west-1", "AKIDENV"},
		{"AWSUsesTheEnvironment", "",
			map[string]string{"AWS_REGION": "eu-central-1", "AWS_ACCESS_KEY_ID": "AKIDENV", "AWS_SECRET_ACCESS_KEY": "s"}, "eu-central-1", "AKIDENV"},
		{"RemoteEndpointGetsNoDummyCredentials", "https://dynamodb.example.com", map[string]string{"AWS_REGION": "eu-west-1"}, "eu-west-1", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			isolateAWSConfig(t, tc.env)
			client, err := dynamo.NewClient(t.Context(), tc.endpoint)
			mustNil(t, err)
			o := client.Options()
			if o.Region != tc.wantRegion {
				t.Errorf("region %q, want %q", o.Region, tc.wantRegion)
			}
			if got := aws.ToString(o.BaseEndpoint); got != tc.endpoint {
				t.Errorf("endpoint %q, want %q", got, tc.endpoint)
			}
			creds, err := o.Credentials.Retrieve(t.Context())
			switch {
			case tc.wantKeyID == "" && err == nil:
				t.Errorf("credentials %q resolved for a remote endpoint with none configured", creds.AccessKeyID)
			case tc.wantKeyID != "" && err != nil:
				t.Errorf("credentials: %v", err)
			case tc.wantKeyID != "" && creds.AccessKeyID != tc.wantKeyID:
				t.Errorf("access key id %q, want %q", creds.AccessKeyID, tc.wantKeyID)
			}
		})
	}
}

// TestNewClient_ServesTheStoreOnDynamoDBLocal uses NewClient as the local server does, with no
// AWS configuration at all, to create a table and keep a client in it.
func TestNewClient_ServesTheStoreOnDynamoDBLocal(t *testing.T) {
	ep := localEndpoint(t)
	isolateAWSConfig(t, nil)
	client, err := dynamo.NewClient(t.Context(), ep)
	mustNil(t, err)
	table := uniqueTable()
	mustNil(t, dynamo.CreateTable(t.Context(), client, table))
	t.Cleanup(func() {
		client.DeleteTable(t.Context(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	s := dynamo.New(client, table)
	want := oauth.Client{ID: oauth.NewID(oauth.PrefixClientID), Name: "Demo", RedirectURIs: []string{"http://127.0.0.1:9000/cb"}}
	mustNil(t, s.CreateClient(t.Context(), want))
	got, err := s.GetClient(t.Context(), want.ID)
	mustNil(t, err)
	if got.Name != want.Name {
		t.Errorf("client name %q, want %q", got.Name, want.Name)
	}
}

// TestNewClient_RetriesThrottlingWithTheStandardRetryer proves that the production client keeps
// the SDK's retries: a throttled request is tried again before the store gives up with
// oauth.ErrTransient.
func TestNewClient_RetriesThrottlingWithTheStandardRetryer(t *testing.T) {
	backend := &faultyDynamoDB{status: 400, body: awsError("ThrottlingException", "rate exceeded")}
	srv := newServer(t, backend)
	isolateAWSConfig(t, map[string]string{"AWS_MAX_ATTEMPTS": "2"})
	client, err := dynamo.NewClient(t.Context(), srv)
	mustNil(t, err)
	_, err = dynamo.New(client, "table").GetToken(t.Context(), "h", now())
	if !errors.Is(err, oauth.ErrTransient) {
		t.Errorf("error %v, want ErrTransient", err)
	}
	if n := backend.calls.Load(); n != 2 {
		t.Errorf("backend saw %d attempts, want 2 (one retry)", n)
	}
}

// TestNewClient_DynamoDBLocalErrorsLogNoChecksumWarning proves the client NewClient builds for
// DynamoDB Local logs nothing when a request is refused (DynamoDB Local's error answers carry
// no X-Amz-Crc32, which made the SDK warn "failed to close HTTP response body" on each), while
// a remote endpoint and DynamoDB itself keep the SDK's response checksum check.
func TestNewClient_DynamoDBLocalErrorsLogNoChecksumWarning(t *testing.T) {
	ep := localEndpoint(t)
	isolateAWSConfig(t, nil)
	var logged strings.Builder
	var mu sync.Mutex
	logger := logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(&logged, "%s "+format+"\n", append([]any{c}, v...)...)
	})
	client, err := dynamo.NewClient(t.Context(), ep, config.WithLogger(logger))
	mustNil(t, err)
	table := uniqueTable()
	mustNil(t, dynamo.CreateTable(t.Context(), client, table))
	t.Cleanup(func() {
		client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	s := dynamo.New(client, table)
	c := oauth.Client{ID: oauth.NewID(oauth.PrefixClientID), Name: "Demo", RedirectURIs: []string{"http://127.0.0.1:9000/cb"}}
	mustNil(t, s.CreateClient(t.Context(), c))
	if err := s.CreateClient(t.Context(), c); err == nil {
		t.Fatal("a second client with the same id was accepted")
	}
	if _, err := dynamo.New(client, table+"-missing").GetClient(t.Context(), c.ID); err == nil {
		t.Fatal("a read of a missing table succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	if logged.Len() != 0 {
		t.Errorf("refused requests to DynamoDB Local logged:\n%s", logged.String())
	}
	for _, remote := range []string{"", "https://dynamodb.eu-west-1.amazonaws.com"} {
		isolateAWSConfig(t, map[string]string{"AWS_REGION": "eu-west-1"})
		rc, err := dynamo.NewClient(t.Context(), remote)
		mustNil(t, err)
		if rc.Options().DisableValidateResponseChecksum {
			t.Errorf("endpoint %q: the response checksum check is off", remote)
		}
	}
}
