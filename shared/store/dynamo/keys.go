package dynamo

import (
	"context"
	"errors"
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

// pairwiseSaltID names the one item that holds the pairwise-subject salt (KEYS#pairwise-salt).
const pairwiseSaltID = "pairwise-salt"

// pairwiseSalt is the pairwise-subject salt as the KEYS item holds it; Version is 1 once
// stored, so the write that stores it is putSuccessor's create-if-absent.
type pairwiseSalt struct {
	Salt    []byte `dynamodbav:"salt"`
	Version int64  `dynamodbav:"version"`
}

// PairwiseSalt reads the salt: one strongly consistent GetItem. When none is stored it writes
// fresh with one PutItem conditioned on the item not existing; a lost race reads the winner's
// salt (oauth.PairwiseSaltStore).
func (s *Store) PairwiseSalt(ctx context.Context, fresh []byte) ([]byte, error) {
	for range 2 {
		cur, err := readWhole[pairwiseSalt](ctx, s, pairwiseSaltID)
		if err != nil {
			return nil, fmt.Errorf("pairwise salt: %w", err)
		}
		if cur.Version > 0 {
			return cur.Salt, nil
		}
		if len(fresh) != oauth.PairwiseSaltLen {
			return nil, oauth.ErrInvalidSalt
		}
		item, err := newItem(typeKeys, pairwiseSaltID, pairwiseSalt{Salt: fresh, Version: 1})
		if err != nil {
			return nil, fmt.Errorf("pairwise salt: %w", err)
		}
		err = s.putSuccessor(ctx, item, 0)
		if err == nil {
			return fresh, nil
		}
		if !errors.Is(err, oauth.ErrConflict) {
			return nil, fmt.Errorf("store pairwise salt: %w", err)
		}
	}
	return nil, fmt.Errorf("pairwise salt: %w", oauth.ErrConflict)
}
