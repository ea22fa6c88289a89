package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/acmebank/authserver/shared/oauth"
)

// registryID names the one item that holds the whole key registry.
const registryID = "registry"

// Keys reads the key registry: one strongly consistent GetItem, so a rotation is seen at once.
// None written yet is the empty set at version 0.
func (s *Store) Keys(ctx context.Context) (oauth.KeySet, error) {
	item, err := s.get(ctx, key(typeKeys, registryID))
	if err != nil {
		return oauth.KeySet{}, fmt.Errorf("keys: %w", err)
	}
	if item == nil {
		return oauth.KeySet{}, nil
	}
	return decode[oauth.KeySet](item)
}

// UpdateKeys reads the registry, calls fn outside any lock, and writes the result with version
// read+1 in one conditional PutItem that holds only if the version is still the one read (for
// version 0: if no registry exists yet). A lost race is oauth.ErrConflict and writes nothing.
func (s *Store) UpdateKeys(ctx context.Context, fn func(oauth.KeySet) (oauth.KeySet, error)) error {
	cur, err := s.Keys(ctx)
	if err != nil {
		return fmt.Errorf("update keys: %w", err)
	}
	next, err := fn(cur)
	if err != nil {
		return fmt.Errorf("update keys: %w", err)
	}
	next.Version = cur.Version + 1
	item, err := newItem(typeKeys, registryID, next)
	if err != nil {
		return fmt.Errorf("update keys: %w", err)
	}
	in := &dynamodb.PutItemInput{
		TableName:                 s.table,
		Item:                      item,
		ConditionExpression:       aws.String("#version = :version"),
		ExpressionAttributeNames:  names(attrVersion),
		ExpressionAttributeValues: map[string]types.AttributeValue{":version": num(cur.Version)},
	}
	if cur.Version == 0 {
		in.ConditionExpression = aws.String("attribute_not_exists(#pk)")
		in.ExpressionAttributeNames, in.ExpressionAttributeValues = names(attrPK), nil
	}
	_, err = s.db.PutItem(ctx, in)
	if failed, _ := conditionFailed(err); failed {
		return fmt.Errorf("update keys: %w", oauth.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("update keys: %w", wrapAWS(err))
	}
	return nil
}
