package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Attribute names of the table design (docs/storage.md). The entity attributes of each item
// are the dynamodbav names of its oauth type, flattened into the item beside these.
const (
	attrPK = "pk"
	attrSK = "sk"
	// attrTTL is DynamoDB's TTL attribute: epoch seconds, rounded up, so the service never
	// deletes an item before it expired. TTL is a reserved word: expressions must name it
	// through ExpressionAttributeNames.
	attrTTL = "ttl"
	// attrExp is the exact expiry (Unix nanoseconds) that conditions and reads compare with
	// now, because DynamoDB deletes expired items only eventually, up to days late.
	attrExp     = "exp"
	attrType    = "type"
	attrVersion = "version"
	attrUsed    = "used"
	attrUsedAt  = "used_at"
	attrSpent   = "spent"
	attrRevoked = "revoked"
	attrTokens  = "tokens"
	attrCount   = "count"
	attrUID     = "uid"
	attrGSI1PK  = "gsi1pk"
	attrGSI1SK  = "gsi1sk"
	attrGSI2PK  = "gsi2pk"
	attrGSI2SK  = "gsi2sk"
	// attrCheckID and attrCheckedAt are the readiness check's item's (CheckWrite).
	attrCheckID   = "check_id"
	attrCheckedAt = "checked_at"
)

// The spend and retry-window fields of oauth.Token that IssueTokens' expressions write;
// docs/storage.md describes them.
const (
	attrSpentAt    = "spent_at"
	attrSuccessors = "successors"
	attrRetried    = "retried"
	// attrLive is the refresh token's list of live access tokens, which a refresh that keeps
	// the token replaces (oauth.Issue.Keep).
	attrLive = "live"
)

// Index names. GSI1 lists grants by user and all clients or users; GSI2 lists grants by client.
// Both serve operators only: no request path queries them.
const (
	IndexGSI1 = "gsi1"
	IndexGSI2 = "gsi2"
)

// TTLAttribute is the attribute DynamoDB's Time to Live deletes expired items by; the SAM
// template enables TTL on it.
const TTLAttribute = attrTTL

// TableDefinition is the table the store needs: string keys pk and sk, two GSIs with all
// attributes projected, on-demand capacity. It is exported so that the SAM template's tests can
// check that the deployed table matches what the code expects, and CreateTable uses it as is.
// TTL on TTLAttribute is set separately (CreateTable does it; the template has its own
// TimeToLiveSpecification), as are encryption and point-in-time recovery, which are the
// deployment's business.
func TableDefinition(table string) *dynamodb.CreateTableInput {
	str := func(name string) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(name), AttributeType: types.ScalarAttributeTypeS}
	}
	keys := func(hash, rng string) []types.KeySchemaElement {
		return []types.KeySchemaElement{
			{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(rng), KeyType: types.KeyTypeRange},
		}
	}
	return &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			str(attrPK), str(attrSK), str(attrGSI1PK), str(attrGSI1SK), str(attrGSI2PK), str(attrGSI2SK),
		},
		KeySchema: keys(attrPK, attrSK),
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{
			{
				IndexName:  aws.String(IndexGSI1),
				KeySchema:  keys(attrGSI1PK, attrGSI1SK),
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
			},
			{
				IndexName:  aws.String(IndexGSI2),
				KeySchema:  keys(attrGSI2PK, attrGSI2SK),
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
			},
		},
	}
}

// tableWait bounds how long CreateTable waits for a new table to become ACTIVE (DynamoDB
// usually takes seconds; DynamoDB Local none).
const tableWait = 5 * time.Minute

// CreateTable creates the table of TableDefinition, waits until it is ACTIVE and enables TTL on
// TTLAttribute. It is idempotent: a table that already exists is waited for and its TTL
// enabled if it was not, so the local server and the admin tool can call it on every start.
func CreateTable(ctx context.Context, client *dynamodb.Client, table string) error {
	_, err := client.CreateTable(ctx, TableDefinition(table))
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %s: %w", table, wrapAWS(err))
	}
	waiter := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 500*time.Millisecond, 5*time.Second
	})
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, tableWait); err != nil {
		return fmt.Errorf("wait for table %s to become active: %w", table, err)
	}
	ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		return fmt.Errorf("describe ttl of table %s: %w", table, wrapAWS(err))
	}
	if d := ttl.TimeToLiveDescription; d != nil && aws.ToString(d.AttributeName) == attrTTL &&
		(d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		return nil
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(attrTTL), Enabled: aws.Bool(true)},
	})
	if err != nil {
		return fmt.Errorf("enable ttl on table %s: %w", table, wrapAWS(err))
	}
	return nil
}
