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

// attrConsumedAt is the payment grant's consumption mark (oauth.GrantRecord.ConsumedAt),
// which ConsumeGrant sets once.
const attrConsumedAt = "consumed_at"

// attrLastUsed is the grant's last refresh (oauth.GrantRecord.LastUsedAt), set by a refresh's
// update of the grant item, RFC 3339 like consumed_at; the first issuance's put has none, so a
// grant's item (and its index entries) is as large as before until it is refreshed.
const attrLastUsed = "last_used"

// ConsumeGrant is one conditional UpdateItem of the grant's item: consumed_at is set only if
// the grant exists, is unexpired, not revoked and has no consumed_at. On a failed condition
// DynamoDB returns the item as it was (ALL_OLD), which tells a consumed grant (oauth.ErrUsed)
// from a revoked, expired or unknown one (oauth.ErrRevoked) at no extra call. With one-time
// values it is one TransactWriteItems: the same update and a conditional put per value.
func (s *Store) ConsumeGrant(ctx context.Context, grantID string, now time.Time, once ...oauth.Once) error {
	u := s.grantConsumption(grantID, now)
	if len(once) == 0 {
		_, err := s.updateAlone(ctx, u, types.ReturnValueNone)
		if failed, old := conditionFailed(err); failed {
			return refusedGrant(old, now)
		}
		if err != nil {
			return fmt.Errorf("consume grant: %w", wrapAWS(err))
		}
		return nil
	}
	items, onceAt := s.onceWrites(nil, once, now)
	grantAt := len(items)
	u.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	items = append(items, types.TransactWriteItem{Update: u})
	err := s.transactJudged(ctx, items)
	if err == nil {
		return nil
	}
	reasons := cancelReasons(err)
	if r := replayedOnce(reasons, once, onceAt); r != nil {
		return fmt.Errorf("consume grant: %w", r)
	}
	if grantAt < len(reasons) && reasons[grantAt] == reasonConditional {
		return refusedGrant(cancelledItem(err, grantAt), now)
	}
	return fmt.Errorf("consume grant: %w", wrapAWS(err))
}

// grantConsumption is the one write that consumes a payment grant.
func (s *Store) grantConsumption(grantID string, now time.Time) *types.Update {
	return &types.Update{
		TableName:                s.table,
		Key:                      key(typeGrant, grantID),
		UpdateExpression:         aws.String("SET #consumed_at = :at"),
		ConditionExpression:      aws.String("attribute_exists(#pk) AND #exp > :now AND (attribute_not_exists(#revoked) OR #revoked = :false) AND attribute_not_exists(#consumed_at)"),
		ExpressionAttributeNames: names(attrPK, attrExp, attrRevoked, attrConsumedAt),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":at": timeAttr(now), ":now": num(now.UnixNano()), ":false": boolean(false),
		},
	}
}

// refusedGrant tells why a grant's consuming condition failed, from the item as it was: a
// live, unrevoked grant with consumed_at was consumed (oauth.ErrUsed); anything else is
// oauth.ErrRevoked (no item: the grant is unknown).
func refusedGrant(old map[string]types.AttributeValue, now time.Time) error {
	if len(old) == 0 || !live(old, now) || boolAttr(old, attrRevoked) {
		return fmt.Errorf("consume grant: %w", oauth.ErrRevoked)
	}
	if _, ok := old[attrConsumedAt]; ok {
		return fmt.Errorf("consume grant: %w", oauth.ErrUsed)
	}
	return fmt.Errorf("consume grant: %w", oauth.ErrRevoked)
}

// updateAlone sends u, the one write of an operation that may also be an item of a
// transaction with one-time values (codeConsumption, backchannelConsumption, ...), as one
// UpdateItem returning the item as rv says and, on a failed condition, as it was (ALL_OLD),
// which tells the refusals apart.
func (s *Store) updateAlone(ctx context.Context, u *types.Update, rv types.ReturnValue) (*dynamodb.UpdateItemOutput, error) {
	return s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression,
		ConditionExpression: u.ConditionExpression, ExpressionAttributeNames: u.ExpressionAttributeNames,
		ExpressionAttributeValues:           u.ExpressionAttributeValues,
		ReturnValues:                        rv,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
}
