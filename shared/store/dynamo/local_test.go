package dynamo_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/acmebank/authserver/shared/store/dynamo"
)

// endpointVar names the environment variable that hands the tests DynamoDB Local's endpoint;
// scripts/dynamodb-local.sh start prints it.
const endpointVar = "DYNAMODB_LOCAL_ENDPOINT"

// localEndpoint returns DynamoDB Local's endpoint, or skips the test when none is configured.
// In CI (CI=true) a missing endpoint fails instead: CI must really run these tests.
func localEndpoint(tb testing.TB) string {
	tb.Helper()
	ep := os.Getenv(endpointVar)
	if ep == "" {
		msg := endpointVar + " is unset, so the DynamoDB store tests cannot reach DynamoDB Local; run: " +
			`bash scripts/dynamodb-local.sh install && eval "$(bash scripts/dynamodb-local.sh start)"`
		if os.Getenv("CI") == "true" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	return ep
}

// localClient builds an SDK client for DynamoDB Local: dummy static credentials and a region
// (DynamoDB Local wants signed requests, and rejects anonymous ones), the SDK's standard
// retryer, and the call counter in its stack.
func localClient(tb testing.TB, counter *dynamo.CallCounter) *dynamodb.Client {
	tb.Helper()
	ep := localEndpoint(tb)
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("local", "local", ""),
		BaseEndpoint: aws.String(ep),
		APIOptions:   []func(*middleware.Stack) error{counter.Register},
	})
}

// fixture is one test's own table and a store over it.
type fixture struct {
	client  *dynamodb.Client
	store   *dynamo.Store
	counter *dynamo.CallCounter
	table   string
}

// newFixture creates a table with a unique name for this test and deletes it afterwards.
func newFixture(tb testing.TB) *fixture {
	tb.Helper()
	counter := dynamo.NewCallCounter()
	client := localClient(tb, counter)
	table := uniqueTable()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := dynamo.CreateTable(ctx, client, table); err != nil {
		tb.Fatalf("create table: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
			tb.Errorf("delete table %s: %v", table, err)
		}
	})
	counter.Reset()
	return &fixture{client: client, store: dynamo.New(client, table), counter: counter, table: table}
}

func uniqueTable() string {
	var b [8]byte
	rand.Read(b[:])
	return "authserver-test-" + hex.EncodeToString(b[:])
}
