package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/dynamo"
)

// faultyDynamoDB is a test double of DynamoDB's JSON protocol that answers every request with
// one canned failure, the way DynamoDB spells it (status, __type, message and, for a cancelled
// transaction, its per-item reasons). It exists because DynamoDB Local cannot be made to
// throttle or fail; everything that works is tested against DynamoDB Local itself.
type faultyDynamoDB struct {
	status int
	body   string
	hang   bool // answer nothing until the client gives up
	calls  atomic.Int32
}

func (f *faultyDynamoDB) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	io.Copy(io.Discard, r.Body)
	if f.hang {
		<-r.Context().Done()
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(f.status)
	io.WriteString(w, f.body)
}

func awsError(code, message string) string {
	return fmt.Sprintf(`{"__type":"com.amazonaws.dynamodb.v20120810#%s","message":%q}`, code, message)
}

func cancelled(reasons ...string) string {
	body := `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","Message":"Transaction cancelled","CancellationReasons":[`
	for i, r := range reasons {
		if i > 0 {
			body += ","
		}
		body += fmt.Sprintf(`{"Code":%q}`, r)
	}
	return body + "]}"
}

// clientFor builds a client of endpoint whose standard retryer makes two attempts with no
// delay, so the retries are exercised without slowing the test down.
func clientFor(endpoint string, counter *dynamo.CallCounter) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("local", "local", ""),
		BaseEndpoint: aws.String(endpoint),
		APIOptions:   []func(*middleware.Stack) error{counter.Register},
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 2
			o.RateLimiter = ratelimit.None
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		}),
	})
}

// TestErrors_BackendFailuresMapToTheRightProtocolError proves the error mapping of the adapter:
// failures worth retrying (throttling, 5xx, transaction conflicts, timeouts, an unreachable
// endpoint) are retried by the SDK and then marked oauth.ErrTransient, which the handlers answer
// with temporarily_unavailable (503); cancelled transactions become the store's sentinels; any
// other failure is a server_error (500).
func TestErrors_BackendFailuresMapToTheRightProtocolError(t *testing.T) {
	at := now()
	issue := firstIssue(testGrant(at), at)
	getToken := func(ctx context.Context, s *dynamo.Store) error {
		_, err := s.GetToken(ctx, issue.Access.Hash, at)
		return err
	}
	issueTokens := func(ctx context.Context, s *dynamo.Store) error { return s.IssueTokens(ctx, issue, at) }
	refresh := func(ctx context.Context, s *dynamo.Store) error { return s.IssueTokens(ctx, nextIssue(issue, at), at) }
	consumeCode := func(ctx context.Context, s *dynamo.Store) error {
		_, err := s.ConsumeCode(ctx, "h", "c", at)
		return err
	}
	tests := []struct {
		name     string
		backend  *faultyDynamoDB // nil: an endpoint that refuses connections
		op       func(context.Context, *dynamo.Store) error
		want     error  // a sentinel errors.Is must find, or nil
		code     string // oauth.AsError(err).Code
		attempts int32  // requests the backend saw (0: not checked)
	}{
		{"ThrottlingIsRetriedThenTransient", &faultyDynamoDB{status: 400, body: awsError("ProvisionedThroughputExceededException", "slow down")},
			getToken, oauth.ErrTransient, oauth.ErrCodeTemporarilyUnavailable, 2},
		{"RequestLimitIsTransient", &faultyDynamoDB{status: 400, body: awsError("RequestLimitExceeded", "account limit")},
			getToken, oauth.ErrTransient, oauth.ErrCodeTemporarilyUnavailable, 2},
		{"InternalServerErrorIsRetriedThenTransient", &faultyDynamoDB{status: 500, body: awsError("InternalServerError", "oops")},
			consumeCode, oauth.ErrTransient, oauth.ErrCodeTemporarilyUnavailable, 2},
		{"ServiceUnavailableIsTransient", &faultyDynamoDB{status: 503, body: ""},
			getToken, oauth.ErrTransient, oauth.ErrCodeTemporarilyUnavailable, 2},
		{"TransactionConflictIsTransient", &faultyDynamoDB{status: 400, body: cancelled("TransactionConflict", "None", "None")},
			issueTokens, oauth.ErrTransient, oauth.ErrCodeTemporarilyUnavailable, 0},
		{"RefreshCancelledByAConflictIsSentAgainFourTimesThenTransient", &faultyDynamoDB{status: 400, body: cancelled("None", "None", "None", "TransactionConflict")},
			refresh, oauth.ErrTransient, oauth.ErrCodeTemporarilyUnavailable, 4},
		{"RefreshWhoseTokenWasSpentIsConflict", &faultyDynamoDB{status: 400, body: cancelled("None", "None", "None", "ConditionalCheckFailed")},
			refresh, oauth.ErrConflict, oauth.ErrCodeServerError, 1},
		{"CancelledOnTheGrantIsRevoked", &faultyDynamoDB{status: 400, body: cancelled("ConditionalCheckFailed", "None", "None")},
			issueTokens, oauth.ErrRevoked, oauth.ErrCodeServerError, 1},
		{"CancelledOnATokenIsAlreadyExists", &faultyDynamoDB{status: 400, body: cancelled("None", "ConditionalCheckFailed", "None")},
			issueTokens, oauth.ErrAlreadyExists, oauth.ErrCodeServerError, 1},
		{"ValidationErrorIsServerError", &faultyDynamoDB{status: 400, body: awsError("ValidationException", "bad request")},
			getToken, nil, oauth.ErrCodeServerError, 1},
		{"MissingTableIsServerError", &faultyDynamoDB{status: 400, body: awsError("ResourceNotFoundException", "no table")},
			issueTokens, nil, oauth.ErrCodeServerError, 1},
		{"DeadlineIsTransient", &faultyDynamoDB{hang: true},
			getToken, oauth.ErrTransient, oauth.ErrCodeTemporarilyUnavailable, 0},
		{"UnreachableEndpointIsTransient", nil,
			getToken, oauth.ErrTransient, oauth.ErrCodeTemporarilyUnavailable, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var endpoint string
			if tc.backend != nil {
				endpoint = newServer(t, tc.backend)
			} else {
				srv := httptest.NewServer(http.NotFoundHandler())
				endpoint = srv.URL
				srv.Close() // nothing listens there any more
			}
			ctx := t.Context()
			if tc.backend != nil && tc.backend.hang {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
				defer cancel()
			}
			s := dynamo.New(clientFor(endpoint, dynamo.NewCallCounter()), "table")
			err := tc.op(ctx, s)
			if err == nil {
				t.Fatal("no error from a failing backend")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
			if tc.want != oauth.ErrTransient && errors.Is(err, oauth.ErrTransient) {
				t.Errorf("error %v is marked transient; retrying cannot fix it", err)
			}
			if got := oauth.AsError(err).Code; got != tc.code {
				t.Errorf("protocol error %s, want %s (error: %v)", got, tc.code, err)
			}
			if tc.attempts != 0 && tc.backend.calls.Load() != tc.attempts {
				t.Errorf("backend saw %d requests, want %d", tc.backend.calls.Load(), tc.attempts)
			}
		})
	}
}

// newServer serves h on a loopback port for the test and returns its URL.
func newServer(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
