// Package dynamo is the DynamoDB adapter of the store port (oauth.Store): the store of the
// deployed service. Everything lives in one table (docs/storage.md has the design): every
// item is found by its key with GetItem, every single-use step is one conditional write, every
// issuance one transaction, and nothing on a request path scans.
//
// The adapter keeps the contract of shared/oauth/store.go exactly as the embedded store does;
// both run the storetest conformance suite, this one against DynamoDB Local.
package dynamo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/acmebank/authserver/shared/oauth"
)

// Store keeps the whole oauth.Store in one DynamoDB table. It holds no state besides the
// client, so one Store serves any number of concurrent requests.
type Store struct {
	db    *dynamodb.Client
	table *string
}

var _ oauth.Store = (*Store)(nil)

// New returns the store over table, which must exist with the layout of TableDefinition (see
// CreateTable).
func New(client *dynamodb.Client, table string) *Store {
	return &Store{db: client, table: aws.String(table)}
}

// localRegion and localCredentials let NewClient talk to DynamoDB Local on this machine with
// no AWS configuration: DynamoDB Local wants a region and signed requests, whatever they are.
const localRegion = "us-east-1"

var localCredentials = credentials.NewStaticCredentialsProvider("local", "local", "")

// NewClient builds the DynamoDB client of the functions, the local server and the admin tool
// from the environment's AWS configuration (region, credentials, retry mode: the standard
// retryer with backoff unless AWS_RETRY_MODE says otherwise). A non-empty endpoint replaces
// the AWS one (DynamoDB Local); when it is a loopback address and the environment names no
// credentials or region, dummy ones are used, since DynamoDB Local accepts any.
func NewClient(ctx context.Context, endpoint string, optFns ...func(*config.LoadOptions) error) (*dynamodb.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx, optFns...)
	if err != nil {
		return nil, fmt.Errorf("load aws config: %w", err)
	}
	if endpoint != "" && isLoopback(endpoint) {
		if cfg.Region == "" {
			cfg.Region = localRegion
		}
		if os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "" {
			cfg.Credentials = localCredentials
		}
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		// DynamoDB Local sends no X-Amz-Crc32 header on its error answers (a failed condition,
		// a missing table); the SDK then checks the body against 0 and logs "failed to close
		// HTTP response body ... checksum" on every one. Only on this machine's emulator is
		// the check off: DynamoDB itself (no endpoint, or a remote one) keeps it.
		if endpoint != "" && isLoopback(endpoint) {
			o.DisableValidateResponseChecksum = true
		}
	}), nil
}

// isLoopback reports whether endpoint's host is on this machine.
func isLoopback(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// get reads one item with a strongly consistent GetItem (a read after a write or a revocation
// sees it at once); an absent item is nil.
func (s *Store) get(ctx context.Context, k map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: s.table, Key: k, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, wrapAWS(err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return out.Item, nil
}

// putNew writes an item whose key must be free; a taken key is oauth.ErrAlreadyExists.
func (s *Store) putNew(ctx context.Context, what string, item map[string]types.AttributeValue) error {
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                s.table,
		Item:                     item,
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: names(attrPK),
	})
	if failed, _ := conditionFailed(err); failed {
		return fmt.Errorf("%s: %w", what, oauth.ErrAlreadyExists)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, wrapAWS(err))
	}
	return nil
}

// put writes an item unconditionally.
func (s *Store) put(ctx context.Context, what string, item map[string]types.AttributeValue) error {
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: s.table, Item: item}); err != nil {
		return fmt.Errorf("%s: %w", what, wrapAWS(err))
	}
	return nil
}

// del deletes an item; an absent one is not an error.
func (s *Store) del(ctx context.Context, what string, k map[string]types.AttributeValue) error {
	if _, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: s.table, Key: k}); err != nil {
		return fmt.Errorf("%s: %w", what, wrapAWS(err))
	}
	return nil
}

// queryIndex returns every item of one partition of a GSI whose sort key starts with prefix,
// page by page. Only the operators' listings call it.
func (s *Store) queryIndex(ctx context.Context, index, pkAttr, pk, prefix string) ([]map[string]types.AttributeValue, error) {
	skAttr := attrGSI1SK
	if index == IndexGSI2 {
		skAttr = attrGSI2SK
	}
	p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
		TableName:                s.table,
		IndexName:                aws.String(index),
		KeyConditionExpression:   aws.String("#ipk = :pk AND begins_with(#isk, :prefix)"),
		ExpressionAttributeNames: map[string]string{"#ipk": pkAttr, "#isk": skAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": str(pk), ":prefix": str(prefix),
		},
	})
	var items []map[string]types.AttributeValue
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", index, wrapAWS(err))
		}
		items = append(items, page.Items...)
	}
	return items, nil
}

// queryListing returns every item of a sharded listing of GSI1 (listPartitions), in the order
// of their index sort keys, as one partition's query would.
func (s *Store) queryListing(ctx context.Context, base, prefix string) ([]map[string]types.AttributeValue, error) {
	var items []map[string]types.AttributeValue
	for _, pk := range listPartitions(base) {
		page, err := s.queryIndex(ctx, IndexGSI1, attrGSI1PK, pk, prefix)
		if err != nil {
			return nil, err
		}
		items = append(items, page...)
	}
	sortKey := func(item map[string]types.AttributeValue) string {
		v, _ := item[attrGSI1SK].(*types.AttributeValueMemberS)
		if v == nil {
			return ""
		}
		return v.Value
	}
	slices.SortFunc(items, func(a, b map[string]types.AttributeValue) int { return strings.Compare(sortKey(a), sortKey(b)) })
	return items, nil
}

var _ oauth.WriteChecker = (*Store)(nil)

// CheckWrite proves a round trip through this replica of the table: it overwrites one small
// item of its own with a fresh check id and an expiry within the hour, then reads it back with
// a strongly consistent GetItem. It is the local server's readiness probe in DynamoDB mode and
// the health function's answer to Route 53 (functions/health). Whoever calls it, it writes
// that one item and nothing else: a flood of checks grows nothing.
//
// The item is named after the client's region (HEALTH#ready#<region>): the replicas of a
// global table each overwrite their own, so a check replicated from the other region never
// lands between this region's write and its read. Concurrent checks in one region overwrite
// each other, in any order: the read accepts its own check or one written within
// concurrentCheck of it, never an old item.
func (s *Store) CheckWrite(ctx context.Context, now time.Time) error {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return fmt.Errorf("readiness check: %w", err)
	}
	k := key(typeHealth, "ready#"+s.db.Options().Region)
	item := maps.Clone(k)
	item[attrType] = str(typeHealth)
	item[attrCheckID] = str(hex.EncodeToString(id[:]))
	item[attrCheckedAt] = num(now.UnixNano())
	setExpiry(item, now.Add(time.Hour))
	if err := s.put(ctx, "readiness check", item); err != nil {
		return err
	}
	got, err := s.get(ctx, k)
	if err != nil {
		return fmt.Errorf("readiness check: read back: %w", err)
	}
	if got == nil {
		return errors.New("readiness check: the item just written is not read back")
	}
	if v, _ := got[attrCheckID].(*types.AttributeValueMemberS); v != nil && v.Value == hex.EncodeToString(id[:]) {
		return nil
	}
	if at, _ := got[attrCheckedAt].(*types.AttributeValueMemberN); at == nil || !notBefore(at.Value, now.Add(-concurrentCheck)) {
		return errors.New("readiness check: read back an older check than the one just written")
	}
	return nil
}

// concurrentCheck is how far apart two checks of one region may be written and still overwrite
// each other between one's write and its read: far longer than a check's deadline, far
// shorter than the hour an old item lives.
const concurrentCheck = 10 * time.Second

// notBefore reports whether the nanosecond instant n (a number attribute) is at or after t.
func notBefore(n string, t time.Time) bool {
	v, err := strconv.ParseInt(n, 10, 64)
	return err == nil && v >= t.UnixNano()
}
