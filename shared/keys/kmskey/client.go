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
// replaces the AWS one (a VPC endpoint, or local-kms); optFns add to the loaded configuration
// (awslog.Option, so the SDK logs through slog).
func NewClient(ctx context.Context, endpoint string, optFns ...func(*config.LoadOptions) error) (*kms.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx, optFns...)
	if err != nil {
		return nil, fmt.Errorf("load aws config: %w", err)
	}
	return kms.NewFromConfig(cfg, func(o *kms.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	}), nil
}
