package dynamo_test

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestCheckWrite_IsARoundTripThatOverwritesOneBoundedItem: a readiness check (the health
// function's answer to Route 53) is one PutItem and one strongly consistent GetItem of the
// replica's own item, HEALTH#ready#<region>; 50 racing checks all succeed and leave that one
// item, of a few dozen bytes, with an expiry: nothing an unauthenticated caller can grow.
func TestCheckWrite_IsARoundTripThatOverwritesOneBoundedItem(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.store.CheckWrite(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if got, want := f.counter.Calls(), map[string]int{"PutItem": 1, "GetItem": 1}; !maps.Equal(got, want) {
		t.Errorf("one check sent %v, want %v (a write and a read back)", got, want)
	}
	const racers = 50
	errs := make(chan error, racers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range racers {
		wg.Go(func() {
			<-start
			errs <- f.store.CheckWrite(ctx, time.Now())
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a racing check failed: %v", err)
		}
	}
	out, err := f.client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(f.table)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Items) != 1 {
		t.Fatalf("%d items after %d checks, want the one health item: %v", len(out.Items), racers+1, out.Items)
	}
	item := out.Items[0]
	if pk := item["pk"].(*types.AttributeValueMemberS).Value; pk != "HEALTH#ready#us-east-1" {
		t.Errorf("the health item is %q, want HEALTH#ready#us-east-1 (named after the replica's region)", pk)
	}
	if _, ok := item["ttl"]; !ok {
		t.Error("the health item has no ttl")
	}
	size := 0
	for k, v := range item {
		size += len(k)
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			size += len(v.Value)
		case *types.AttributeValueMemberN:
			size += len(v.Value)
		default:
			t.Errorf("attribute %s of an unexpected type %T", k, v)
		}
	}
	if size > 200 {
		t.Errorf("the health item is %d bytes: %v", size, item)
	}
	t.Logf("the health item after %d checks: %d bytes, %s", racers+1, size, strings.Join(keysOf(item), ", "))
}

func keysOf(m map[string]types.AttributeValue) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
