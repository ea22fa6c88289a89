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
	item := map[string]types.AttributeValue{attrType: str(typeReplay)}
	for k, av := range key(typeReplay, value) {
		item[k] = av
	}
	setExpiry(item, expires)
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 s.table,
		Item:                      item,
		ConditionExpression:       aws.String("attribute_not_exists(#pk) OR #exp <= :now"),
		ExpressionAttributeNames:  names(attrPK, attrExp),
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": num(now.UnixNano())},
	})
	if failed, _ := conditionFailed(err); failed {
		return fmt.Errorf("use once: %w", oauth.ErrUsed)
	}
	if err != nil {
		return fmt.Errorf("use once: %w", wrapAWS(err))
	}
	return nil
}
