package dynamo

import (
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Item types: the pk prefix and the sk of each kind of item (docs/storage.md has the table).
// Every item of one kind has the same sk, so each lookup is a GetItem on a known key; the sk
// leaves room for items that hang under one pk later without a migration.
const (
	typeClient   = "CLIENT"
	typeUser     = "USER"
	typeUsername = "USERNAME"
	typeAuthReq  = "AUTHREQ"
	typeSession  = "SESSION"
	typeCode     = "CODE"
	typeGrant    = "GRANT"
	typeToken    = "TOKEN"
	typeFailures = "FAIL"
	typeKeys     = "KEYS"
	typeHealth   = "HEALTH"
	typeReplay   = "REPLAY"
	typeFactors  = "FACTORS"
	typeIAT      = "IAT"
	// typeBackchannel is a CIBA request (backchannel.go).
	typeBackchannel = "BC"

	// gsiAllClients and gsiAllUsers name the GSI1 partitions listing every client and user,
	// for operators: listShards partitions each (listPartition), so that a bulk import's
	// writes spread over as many index partitions instead of one hot one.
	gsiAllClients = "CLIENTS"
	gsiAllUsers   = "USERS"
)

// listShards is how many GSI1 partitions the clients' and the users' listings are spread over.
// An index partition takes about 1,000 writes a second; 16 of them take a bulk import at the
// table's default on-demand write limits, and a listing is 16 small queries (plus the
// unsharded partition of items written before the shards existed).
const listShards = 16

// listPartition is the GSI1 partition that lists the item id of a listing (base): a shard
// chosen by a hash of the id, so that an item's partition never changes.
func listPartition(base, id string) string {
	h := fnv.New32a()
	h.Write([]byte(id))
	return fmt.Sprintf("%s#%02d", base, h.Sum32()%listShards)
}

// listPartitions are every partition of a listing: its shards, then the unsharded partition
// that items written before the shards still sit in.
func listPartitions(base string) []string {
	out := make([]string, 0, listShards+1)
	for i := range listShards {
		out = append(out, fmt.Sprintf("%s#%02d", base, i))
	}
	return append(out, base)
}

// key is the primary key of the item of kind typ named id.
func key(typ, id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK: str(typ + "#" + id),
		attrSK: str(typ),
	}
}

// newItem marshals v (one of the oauth types, by its dynamodbav tags) and adds the item's key
// and type.
func newItem(typ, id string, v any) (map[string]types.AttributeValue, error) {
	item, err := attributevalue.MarshalMap(v)
	if err != nil {
		return nil, fmt.Errorf("marshal %s item: %w", typ, err)
	}
	for k, av := range key(typ, id) {
		item[k] = av
	}
	item[attrType] = str(typ)
	return item, nil
}

// setExpiry gives an item its exact expiry (attrExp) and its TTL. A zero time never expires.
func setExpiry(item map[string]types.AttributeValue, expires time.Time) {
	item[attrExp] = num(expNanos(expires))
	if !expires.IsZero() {
		item[attrTTL] = num(ttlSeconds(expires))
	}
}

// expNanos is the exact expiry instant conditions compare with; no expiry is the far future.
func expNanos(t time.Time) int64 {
	if t.IsZero() {
		return math.MaxInt64
	}
	return t.UnixNano()
}

// ttlSeconds rounds up to the second, so DynamoDB never deletes an item before it expired.
func ttlSeconds(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

// live reports whether an item read back has not expired at now (DynamoDB deletes expired
// items late, so every read checks). An item without attrExp never expires.
func live(item map[string]types.AttributeValue, now time.Time) bool {
	n, ok := item[attrExp].(*types.AttributeValueMemberN)
	if !ok {
		return true
	}
	exp, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return false
	}
	return now.UnixNano() < exp
}

// decode unmarshals an item into one of the oauth types; the table's own attributes are
// ignored.
func decode[T any](item map[string]types.AttributeValue) (T, error) {
	var v T
	if err := attributevalue.UnmarshalMap(item, &v); err != nil {
		return v, fmt.Errorf("unmarshal %T item: %w", v, err)
	}
	return v, nil
}

// boolAttr reads a BOOL attribute; absent is false.
func boolAttr(item map[string]types.AttributeValue, name string) bool {
	b, ok := item[name].(*types.AttributeValueMemberBOOL)
	return ok && b.Value
}

// intAttr reads an N attribute; absent is zero.
func intAttr(item map[string]types.AttributeValue, name string) (int64, error) {
	n, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, nil
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("attribute %s: %w", name, err)
	}
	return v, nil
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// timeAttr encodes a time as the SDK's marshaller does for oauth's time.Time fields
// (RFC 3339 with nanoseconds, in UTC), so that an expression can write one and compare it.
func timeAttr(t time.Time) types.AttributeValue { return str(t.UTC().Format(time.RFC3339Nano)) }

func boolean(b bool) types.AttributeValue { return &types.AttributeValueMemberBOOL{Value: b} }

func strList(ss []string) types.AttributeValue {
	l := make([]types.AttributeValue, len(ss))
	for i, s := range ss {
		l[i] = str(s)
	}
	return &types.AttributeValueMemberL{Value: l}
}

// names maps each #placeholder to its attribute name; every expression of the store names its
// attributes this way, since ttl, count, state and others are DynamoDB reserved words.
func names(attrs ...string) map[string]string {
	m := make(map[string]string, len(attrs))
	for _, a := range attrs {
		m["#"+a] = a
	}
	return m
}
