package dynamo

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/acmebank/authserver/shared/oauth"
)

// UseOnce is one conditional PutItem (REPLAY#<key>): it writes only where no live item is, so
// of racing calls exactly one succeeds. The item carries the TTL attribute, so DynamoDB
// deletes it once it can no longer be replayed; until then the condition's expiry check
// stands in for the TTL sweep, which may lag by days.
func (s *Store) UseOnce(ctx context.Context, value string, expires, now time.Time) error {
	p := s.oncePut(oauth.Once{Key: value, Expires: expires}, now)
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: p.TableName, Item: p.Item, ConditionExpression: p.ConditionExpression,
		ExpressionAttributeNames: p.ExpressionAttributeNames, ExpressionAttributeValues: p.ExpressionAttributeValues,
	})
	if failed, _ := conditionFailed(err); failed {
		return fmt.Errorf("use once: %w", oauth.ErrUsed)
	}
	if err != nil {
		return fmt.Errorf("use once: %w", wrapAWS(err))
	}
	return nil
}

// oncePut is the conditional put of a one-time value (REPLAY#<key>), alone (UseOnce) or inside
// the transaction of the write it guards (ConsumeCode, IssueTokens): it writes only where no
// live item is.
func (s *Store) oncePut(o oauth.Once, now time.Time) *types.Put {
	item := map[string]types.AttributeValue{attrType: str(typeReplay)}
	for k, av := range key(typeReplay, o.Key) {
		item[k] = av
	}
	setExpiry(item, o.Expires)
	return &types.Put{
		TableName:                 s.table,
		Item:                      item,
		ConditionExpression:       aws.String("attribute_not_exists(#pk) OR #exp <= :now"),
		ExpressionAttributeNames:  names(attrPK, attrExp),
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": num(now.UnixNano())},
	}
}

// onceWrites appends the puts of once to a transaction's items; they start at the returned
// index.
func (s *Store) onceWrites(items []types.TransactWriteItem, once []oauth.Once, now time.Time) ([]types.TransactWriteItem, int) {
	at := len(items)
	for _, o := range once {
		items = append(items, types.TransactWriteItem{Put: s.oncePut(o, now)})
	}
	return items, at
}

// replayedOnce returns the *oauth.ReplayedError of the first value of once (its puts at index
// at of the transaction) whose condition failed in the cancellation reasons, or nil.
func replayedOnce(reasons []string, once []oauth.Once, at int) error {
	for i, o := range once {
		if j := at + i; j < len(reasons) && reasons[j] == reasonConditional {
			return &oauth.ReplayedError{Key: o.Key}
		}
	}
	return nil
}
