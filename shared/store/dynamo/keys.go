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
	set, err := readWhole[oauth.KeySet](ctx, s, registryID)
	if err != nil {
		return oauth.KeySet{}, fmt.Errorf("keys: %w", err)
	}
	return set, nil
}

// UpdateKeys reads the registry, calls fn outside any lock, and writes the result with version
// read+1 in one conditional PutItem that holds only if the version is still the one read (for
// version 0: if no registry exists yet). A lost race is oauth.ErrConflict and writes nothing.
func (s *Store) UpdateKeys(ctx context.Context, fn func(oauth.KeySet) (oauth.KeySet, error)) error {
	if err := updateWhole(ctx, s, registryID, func(k *oauth.KeySet) *int64 { return &k.Version }, fn); err != nil {
		return fmt.Errorf("update keys: %w", err)
	}
	return nil
}

// readWhole reads the KEYS item id whole: one strongly consistent GetItem; the zero T when none
// was written.
func readWhole[T any](ctx context.Context, s *Store, id string) (T, error) {
	var zero T
	item, err := s.get(ctx, key(typeKeys, id))
	if err != nil || item == nil {
		return zero, err
	}
	return decode[T](item)
}

// updateWhole is the one optimistic update of a versioned KEYS item (the key registry, the
// DPoP nonce keys): it reads the item, calls fn outside any lock, and writes the result with
// version read+1 (putSuccessor). A lost race is oauth.ErrConflict and writes nothing.
func updateWhole[T any](ctx context.Context, s *Store, id string, version func(*T) *int64, fn func(T) (T, error)) error {
	cur, err := readWhole[T](ctx, s, id)
	if err != nil {
		return err
	}
	next, err := fn(cur)
	if err != nil {
		return err
	}
	*version(&next) = *version(&cur) + 1
	item, err := newItem(typeKeys, id, next)
	if err != nil {
		return err
	}
	return s.putSuccessor(ctx, item, *version(&cur))
}

// putSuccessor writes item, the next version of a record read whole (the key registry, a
// user's factors), only if the stored one still has version (for version 0: if none exists
// yet): one conditional PutItem. A lost race is oauth.ErrConflict and writes nothing. (Clients
// and users, which may predate their version attribute, use putVersioned.)
func (s *Store) putSuccessor(ctx context.Context, item map[string]types.AttributeValue, version int64) error {
	in := &dynamodb.PutItemInput{
		TableName:                 s.table,
		Item:                      item,
		ConditionExpression:       aws.String("#version = :version"),
		ExpressionAttributeNames:  names(attrVersion),
		ExpressionAttributeValues: map[string]types.AttributeValue{":version": num(version)},
	}
	if version == 0 {
		in.ConditionExpression = aws.String("attribute_not_exists(#pk)")
		in.ExpressionAttributeNames, in.ExpressionAttributeValues = names(attrPK), nil
	}
	_, err := s.db.PutItem(ctx, in)
	if failed, _ := conditionFailed(err); failed {
		return oauth.ErrConflict
	}
	if err != nil {
		return wrapAWS(err)
	}
	return nil
}

// nonceKeysID names the one item that holds the DPoP nonce keys (KEYS#dpop-nonce): in a
// multi-region deployment the global table replicates it, so both regions read the same keys.
const nonceKeysID = "dpop-nonce"

// NonceKeys reads the DPoP nonce keys: one strongly consistent GetItem. None written yet is
// the empty set at version 0.
func (s *Store) NonceKeys(ctx context.Context) (oauth.NonceKeySet, error) {
	set, err := readWhole[oauth.NonceKeySet](ctx, s, nonceKeysID)
	if err != nil {
		return oauth.NonceKeySet{}, fmt.Errorf("nonce keys: %w", err)
	}
	return set, nil
}

// UpdateNonceKeys reads the nonce keys, calls fn outside any lock, and writes the result with
// version read+1 in one conditional PutItem (updateWhole). A lost race is oauth.ErrConflict
// and writes nothing.
func (s *Store) UpdateNonceKeys(ctx context.Context, fn func(oauth.NonceKeySet) (oauth.NonceKeySet, error)) error {
	if err := updateWhole(ctx, s, nonceKeysID, func(k *oauth.NonceKeySet) *int64 { return &k.Version }, fn); err != nil {
		return fmt.Errorf("update nonce keys: %w", err)
	}
	return nil
}
