package dynamo_test

import (
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/acmebank/authserver/shared/store/dynamo"
)

// TestCreateTable_IsIdempotentAndBuildsTheDefinedTable creates a table twice (as the local
// server and the admin tool do on every start) and checks what DynamoDB reports against
// TableDefinition: keys, both GSIs with all attributes projected, on-demand billing, TTL on
// the ttl attribute.
func TestCreateTable_IsIdempotentAndBuildsTheDefinedTable(t *testing.T) {
	f := newFixture(t) // created once already
	ctx := t.Context()
	if err := dynamo.CreateTable(ctx, f.client, f.table); err != nil {
		t.Fatalf("CreateTable on an existing table: %v", err)
	}
	def := dynamo.TableDefinition(f.table)
	out, err := f.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(f.table)})
	mustNil(t, err)
	tab := out.Table
	if tab.TableStatus != types.TableStatusActive {
		t.Errorf("table status %s, want ACTIVE", tab.TableStatus)
	}
	if got, want := keyNames(tab.KeySchema), keyNames(def.KeySchema); !slices.Equal(got, want) {
		t.Errorf("key schema %v, want %v", got, want)
	}
	if tab.BillingModeSummary == nil || tab.BillingModeSummary.BillingMode != types.BillingModePayPerRequest {
		t.Errorf("billing mode %+v, want PAY_PER_REQUEST", tab.BillingModeSummary)
	}
	if len(tab.GlobalSecondaryIndexes) != len(def.GlobalSecondaryIndexes) {
		t.Fatalf("%d GSIs, want %d", len(tab.GlobalSecondaryIndexes), len(def.GlobalSecondaryIndexes))
	}
	for _, want := range def.GlobalSecondaryIndexes {
		i := slices.IndexFunc(tab.GlobalSecondaryIndexes, func(g types.GlobalSecondaryIndexDescription) bool {
			return aws.ToString(g.IndexName) == aws.ToString(want.IndexName)
		})
		if i < 0 {
			t.Errorf("GSI %s missing", aws.ToString(want.IndexName))
			continue
		}
		got := tab.GlobalSecondaryIndexes[i]
		if !slices.Equal(keyNames(got.KeySchema), keyNames(want.KeySchema)) {
			t.Errorf("GSI %s keys %v, want %v", aws.ToString(want.IndexName), keyNames(got.KeySchema), keyNames(want.KeySchema))
		}
		if got.Projection == nil || got.Projection.ProjectionType != types.ProjectionTypeAll {
			t.Errorf("GSI %s projection %+v, want ALL", aws.ToString(want.IndexName), got.Projection)
		}
	}
	ttl, err := f.client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(f.table)})
	mustNil(t, err)
	if d := ttl.TimeToLiveDescription; d == nil || aws.ToString(d.AttributeName) != dynamo.TTLAttribute ||
		d.TimeToLiveStatus != types.TimeToLiveStatusEnabled {
		t.Errorf("TTL %+v, want ENABLED on %q", d, dynamo.TTLAttribute)
	}
}

func keyNames(ks []types.KeySchemaElement) []string {
	var out []string
	for _, k := range ks {
		out = append(out, aws.ToString(k.AttributeName)+":"+string(k.KeyType))
	}
	return out
}
