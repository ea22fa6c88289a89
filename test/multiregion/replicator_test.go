// Package multiregion_test simulates a DynamoDB global table with two DynamoDB Local instances
// (two "regions") and a replicator between them, to show what the service's single-use
// guarantees become across regions (docs/multiregion.md).
//
// The replicator reads each table's DynamoDB Stream (DynamoDB Local implements the Streams API)
// and, a delay after each change, copies the changed item to the other region, item by item,
// as global tables
// in multi-Region eventual consistency do: a write is visible in its own region at once and in
// the other one a replication delay later; items of one transaction may arrive separately; a
// conditional write is evaluated against the replica it is sent to. Where two regions write
// one item within the window, the later application wins here (AWS resolves such conflicts by
// the writes' timestamps, last writer wins); the tests below are about what happens inside the
// window, which does not depend on how the conflict is resolved afterwards.
package multiregion_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// region is one DynamoDB Local standing for one AWS region's replica of the table.
type region struct {
	name    string
	db      *dynamodb.Client
	streams *dynamodbstreams.Client
	table   string
}

// replicator copies the changes of each region's table to the other after delay.
type replicator struct {
	delay  time.Duration
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// applied[r][key] is the image the replicator last wrote into region r for key (nil for a
	// delete), so that r's stream record of that write is not sent back where it came from.
	applied map[string]map[string][]map[string]types.AttributeValue
	// copies counts the changes applied, per destination region.
	copies map[string]int
	errs   []error
}

func startReplicator(t *testing.T, a, b *region, delay time.Duration) *replicator {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &replicator{delay: delay, cancel: cancel,
		applied: map[string]map[string][]map[string]types.AttributeValue{a.name: {}, b.name: {}},
		copies:  map[string]int{}}
	for _, dir := range [][2]*region{{a, b}, {b, a}} {
		arn, shards, err := streamShards(ctx, dir[0])
		if err != nil {
			cancel()
			t.Fatalf("streams of %s: %v", dir[0].name, err)
		}
		for _, shard := range shards {
			r.wg.Add(1)
			go r.follow(ctx, dir[0], dir[1], arn, shard)
		}
	}
	t.Cleanup(func() {
		r.cancel()
		r.wg.Wait()
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, err := range r.errs {
			t.Errorf("replicator: %v", err)
		}
	})
	return r
}

// streamShards returns the table's stream and its shards.
func streamShards(ctx context.Context, from *region) (*string, []*string, error) {
	d, err := from.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(from.table)})
	if err != nil {
		return nil, nil, err
	}
	arn := d.Table.LatestStreamArn
	s, err := from.streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: arn})
	if err != nil {
		return nil, nil, err
	}
	var out []*string
	for _, sh := range s.StreamDescription.Shards {
		out = append(out, sh.ShardId)
	}
	return arn, out, nil
}

// iterator opens an iterator at the oldest record of a shard: the table is new, so that is
// every change since it was created (applying a change twice is harmless: apply copies the
// item's current state).
func iterator(ctx context.Context, from *region, arn, shard *string) (*string, error) {
	it, err := from.streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
		StreamArn: arn, ShardId: shard, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		return nil, err
	}
	return it.ShardIterator, nil
}

// follow polls one shard of from's stream and applies each record to to, delay after it was
// read.
func (r *replicator) follow(ctx context.Context, from, to *region, arn, shard *string) {
	defer r.wg.Done()
	it, err := iterator(ctx, from, arn, shard)
	if err != nil {
		r.fail(fmt.Errorf("shard iterator on %s: %w", from.name, err))
		return
	}
	for it != nil && ctx.Err() == nil {
		out, err := from.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
		var trimmed *streamtypes.TrimmedDataAccessException
		var expired *streamtypes.ExpiredIteratorException
		if errors.As(err, &trimmed) || errors.As(err, &expired) {
			// DynamoDB Local, busy with other tests, can trim or expire an iterator: open
			// another at the shard's oldest record.
			if it, err = iterator(ctx, from, arn, shard); err == nil {
				continue
			}
		}
		if err != nil {
			if ctx.Err() == nil {
				r.fail(fmt.Errorf("GetRecords on %s: %w", from.name, err))
			}
			return
		}
		seen := time.Now()
		for _, rec := range out.Records {
			wait := time.Until(seen.Add(r.delay))
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return
			}
			if err := r.apply(ctx, from, to, rec); err != nil && ctx.Err() == nil {
				r.fail(err)
			}
		}
		it = out.NextShardIterator
		if len(out.Records) == 0 {
			select {
			case <-time.After(10 * time.Millisecond):
			case <-ctx.Done():
				return
			}
		}
	}
}

// apply copies the item a stream record names from from to to, as it is in from now (a
// deletion when from no longer has it). The record is used for its keys only: the images
// DynamoDB Local's stream returns for nested empty maps do not decode faithfully with the SDK,
// and the item's current state is what replication converges to anyway.
func (r *replicator) apply(ctx context.Context, from, to *region, rec streamtypes.Record) error {
	keys, err := attributevalue.FromDynamoDBStreamsMap(rec.Dynamodb.Keys)
	if err != nil {
		return err
	}
	got, err := from.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(from.table), Key: keys, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return fmt.Errorf("read the changed item in %s: %w", from.name, err)
	}
	image := got.Item
	if len(image) == 0 {
		image = nil
	}
	key := itemKey(keys)
	r.mu.Lock()
	for _, written := range r.applied[from.name][key] {
		if reflect.DeepEqual(written, image) {
			r.mu.Unlock()
			return nil // from's record of a write this replicator made: replicated already
		}
	}
	// Recorded before the write, so the echo of it in to's stream is recognised.
	r.applied[to.name][key] = append(r.applied[to.name][key], image)
	r.mu.Unlock()
	if image == nil {
		_, err = to.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(to.table), Key: keys})
	} else {
		_, err = to.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(to.table), Item: image})
	}
	if err != nil {
		return fmt.Errorf("replicate to %s: %w", to.name, err)
	}
	// Counted once written: a test that waits for a count then reads to must find the item
	// (counted before the write, a loaded machine let the read in first).
	r.mu.Lock()
	r.copies[to.name]++
	r.mu.Unlock()
	return nil
}

// itemKey names an item by the values of its key attributes (pk and sk, strings). Printing the
// key map itself gave the addresses of its values, a new string for every record: no record was
// ever recognised as the echo of a replicated write, so each was copied back, and a region that
// was behind wrote its older image over the newer one (a revoked grant and its tokens restored).
func itemKey(keys map[string]types.AttributeValue) string {
	var b strings.Builder
	for _, name := range []string{"pk", "sk"} {
		if v, ok := keys[name].(*types.AttributeValueMemberS); ok {
			b.WriteString(v.Value)
		}
		b.WriteByte(0)
	}
	return b.String()
}

func (r *replicator) fail(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

// copied is how many changes the replicator has applied to region name.
func (r *replicator) copied(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.copies[name]
}
