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

// PutInitialAccessToken writes an operator's initial access token (IAT#<hash>) until it
// expires, with a TTL; a taken hash is oauth.ErrAlreadyExists.
func (s *Store) PutInitialAccessToken(ctx context.Context, t oauth.InitialAccessToken) error {
	if t.ExpiresAt.IsZero() {
		return fmt.Errorf("put initial access token: it has no expiry")
	}
	item, err := newItem(typeIAT, t.Hash, t)
	if err != nil {
		return fmt.Errorf("put initial access token: %w", err)
	}
	setExpiry(item, t.ExpiresAt)
	return s.putNew(ctx, "put initial access token", item)
}

// GetInitialAccessToken is one strongly consistent GetItem; an expired token (not yet removed
// by the TTL) is oauth.ErrNotFound.
func (s *Store) GetInitialAccessToken(ctx context.Context, hash string, now time.Time) (oauth.InitialAccessToken, error) {
	item, err := s.get(ctx, key(typeIAT, hash))
	if err != nil {
		return oauth.InitialAccessToken{}, fmt.Errorf("get initial access token: %w", err)
	}
	if len(item) == 0 || !live(item, now) {
		return oauth.InitialAccessToken{}, fmt.Errorf("get initial access token: %w", oauth.ErrNotFound)
	}
	return decode[oauth.InitialAccessToken](item)
}

// TakeInitialAccessToken is one conditional DeleteItem that returns the item it deleted: of
// racing calls only the one whose delete found the live token gets it.
func (s *Store) TakeInitialAccessToken(ctx context.Context, hash string, now time.Time) (oauth.InitialAccessToken, error) {
	out, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 s.table,
		Key:                       key(typeIAT, hash),
		ConditionExpression:       aws.String("attribute_exists(#pk) AND #exp > :now"),
		ExpressionAttributeNames:  names(attrPK, attrExp),
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": num(now.UnixNano())},
		ReturnValues:              types.ReturnValueAllOld,
	})
	if failed, _ := conditionFailed(err); failed {
		return oauth.InitialAccessToken{}, fmt.Errorf("take initial access token: %w", oauth.ErrNotFound)
	}
	if err != nil {
		return oauth.InitialAccessToken{}, fmt.Errorf("take initial access token: %w", wrapAWS(err))
	}
	return decode[oauth.InitialAccessToken](out.Attributes)
}
