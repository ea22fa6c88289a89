package kmskey

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kms"
)

// NewClient builds the KMS client of the functions and the admin tool from the environment's
// AWS configuration (region, credentials, and the SDK's standard retryer, which retries
// throttling with backoff before the adapter reports it as transient). A non-empty endpoint
// replaces the AWS one (a VPC endpoint, or a test double).
func NewClient(ctx context.Context, endpoint string) (*kms.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load aws config: %w", err)
	}
	return kms.NewFromConfig(cfg, func(o *kms.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	}), nil
}
