package dynamo

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/acmebank/authserver/shared/oauth"
)

// Reasons DynamoDB gives per item when it cancels a transaction.
const (
	reasonNone        = "None"
	reasonConditional = "ConditionalCheckFailed"
	reasonConflict    = "TransactionConflict"
)

// transientCodes are the error codes of DynamoDB that retrying later can fix. The SDK's
// standard retryer has already retried them with backoff by the time the store sees them.
var transientCodes = map[string]bool{
	"ProvisionedThroughputExceededException": true,
	"ThrottlingException":                    true,
	"RequestLimitExceeded":                   true,
	"InternalServerError":                    true,
	"ServiceUnavailable":                     true,
	"TransactionConflictException":           true,
	"TransactionInProgressException":         true,
	"LimitExceededException":                 true,
	// Per-item cancellation reasons of a transaction.
	reasonConflict:                     true,
	"ThrottlingError":                  true,
	"ProvisionedThroughputExceeded":    true,
	"TransactionConflictCancellation":  true,
	"ReplicatedWriteConflictException": true,
}

// wrapAWS marks err with oauth.ErrTransient when it is a failure worth retrying later
// (throttling, timeouts, 5xx, transaction conflicts, an unreachable endpoint), so the handlers
// answer temporarily_unavailable; anything else passes through and becomes server_error.
func wrapAWS(err error) error {
	if err == nil || !isTransient(err) {
		return err
	}
	return fmt.Errorf("%w: %w", oauth.ErrTransient, err)
}

func isTransient(err error) bool {
	if errors.Is(err, oauth.ErrTransient) {
		return false // already marked
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) {
		for _, r := range tc.CancellationReasons {
			if transientCodes[stringOf(r.Code)] {
				return true
			}
		}
		return false
	}
	var api smithy.APIError
	if errors.As(err, &api) && transientCodes[api.ErrorCode()] {
		return true
	}
	var resp *smithyhttp.ResponseError
	if errors.As(err, &resp) && resp.HTTPStatusCode() >= 500 {
		return true
	}
	var maxAttempts *retry.MaxAttemptsError
	if errors.As(err, &maxAttempts) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	var opErr *net.OpError
	return errors.As(err, &opErr)
}

// cancelReasons returns the per-item reason codes of a cancelled transaction, or nil when err
// is not one.
func cancelReasons(err error) []string {
	var tc *types.TransactionCanceledException
	if !errors.As(err, &tc) {
		return nil
	}
	out := make([]string, len(tc.CancellationReasons))
	for i, r := range tc.CancellationReasons {
		out[i] = stringOf(r.Code)
		if out[i] == "" {
			out[i] = reasonNone
		}
	}
	return out
}

// cancelledItem returns the item as it was of the transaction's i-th write, when its condition
// failed and the write asked for ALL_OLD on failure.
func cancelledItem(err error, i int) map[string]types.AttributeValue {
	var tc *types.TransactionCanceledException
	if !errors.As(err, &tc) || i >= len(tc.CancellationReasons) {
		return nil
	}
	return tc.CancellationReasons[i].Item
}

// conditionFailed reports whether err is a failed condition of a single-item write, and returns
// the item as it was (when the request asked for ALL_OLD on failure).
func conditionFailed(err error) (bool, map[string]types.AttributeValue) {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return true, ccf.Item
	}
	return false, nil
}

func stringOf(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
