package dynamo

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/acmebank/authserver/shared/oauth"
)

// GetUser reads a user by uid.
func (s *Store) GetUser(ctx context.Context, uid string) (oauth.User, error) {
	item, err := s.get(ctx, key(typeUser, uid))
	if err != nil {
		return oauth.User{}, fmt.Errorf("get user: %w", err)
	}
	if item == nil {
		return oauth.User{}, fmt.Errorf("get user: %w", oauth.ErrNotFound)
	}
	return decode[oauth.User](item)
}

// GetUserByUsername reads the username item, which holds the uid, then the user: two
// GetItems, no Scan and no eventually consistent index on the login path.
func (s *Store) GetUserByUsername(ctx context.Context, username string) (oauth.User, error) {
	item, err := s.get(ctx, key(typeUsername, username))
	if err != nil {
		return oauth.User{}, fmt.Errorf("get user by username: %w", err)
	}
	if item == nil {
		return oauth.User{}, fmt.Errorf("get user by username: %w", oauth.ErrNotFound)
	}
	uid, ok := item[attrUID].(*types.AttributeValueMemberS)
	if !ok {
		return oauth.User{}, fmt.Errorf("get user by username: username item without uid")
	}
	return s.GetUser(ctx, uid.Value)
}

// CreateUser writes the user and its username item in one TransactWriteItems, each on the
// condition that its key is free: a taken uid or username is oauth.ErrAlreadyExists and
// writes nothing.
func (s *Store) CreateUser(ctx context.Context, u oauth.User) error {
	item, err := userItem(u, 1)
	if err != nil {
		return fmt.Errorf("create user: %w", err)
	}
	name := key(typeUsername, u.Username)
	name[attrType], name[attrUID] = str(typeUsername), str(u.UID)
	free := aws.String("attribute_not_exists(#pk)")
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: s.table, Item: item, ConditionExpression: free, ExpressionAttributeNames: names(attrPK)}},
		{Put: &types.Put{TableName: s.table, Item: name, ConditionExpression: free, ExpressionAttributeNames: names(attrPK)}},
	}})
	if slices.Contains(cancelReasons(err), reasonConditional) {
		return fmt.Errorf("create user: %w", oauth.ErrAlreadyExists)
	}
	if err != nil {
		return fmt.Errorf("create user: %w", wrapAWS(err))
	}
	return nil
}

// UpdateUser reads the user, applies fn and writes the result if the user's version is still
// the one read, retrying on a lost race. fn may not change the uid or the username: the
// username item would go stale.
func (s *Store) UpdateUser(ctx context.Context, uid string, fn func(oauth.User) (oauth.User, error)) error {
	for range updateAttempts {
		item, err := s.get(ctx, key(typeUser, uid))
		if err != nil {
			return fmt.Errorf("update user %s: %w", uid, err)
		}
		if item == nil {
			return fmt.Errorf("update user %s: %w", uid, oauth.ErrNotFound)
		}
		old, err := decode[oauth.User](item)
		if err != nil {
			return fmt.Errorf("update user %s: %w", uid, err)
		}
		version, err := intAttr(item, attrVersion)
		if err != nil {
			return fmt.Errorf("update user %s: %w", uid, err)
		}
		u, err := fn(old)
		if err != nil {
			return fmt.Errorf("update user %s: %w", uid, err)
		}
		if u.UID != old.UID || u.Username != old.Username {
			return fmt.Errorf("update user %s: the uid and the username cannot change", uid)
		}
		next, err := userItem(u, version+1)
		if err != nil {
			return fmt.Errorf("update user %s: %w", uid, err)
		}
		won, err := s.putVersioned(ctx, next, version)
		if err != nil {
			return fmt.Errorf("update user %s: %w", uid, err)
		}
		if won {
			return nil
		}
	}
	return fmt.Errorf("update user %s: %w", uid, oauth.ErrConflict)
}

// DeleteUser deletes the user and its username item in one TransactWriteItems; an unknown
// user is oauth.ErrNotFound.
func (s *Store) DeleteUser(ctx context.Context, uid string) error {
	for range updateAttempts {
		u, err := s.GetUser(ctx, uid)
		if err != nil {
			return fmt.Errorf("delete user: %w", err)
		}
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Delete: &types.Delete{
				TableName: s.table, Key: key(typeUser, uid),
				ConditionExpression: aws.String("attribute_exists(#pk)"), ExpressionAttributeNames: names(attrPK),
			}},
			{Delete: &types.Delete{
				TableName: s.table, Key: key(typeUsername, u.Username),
				ConditionExpression:       aws.String("attribute_not_exists(#pk) OR #uid = :uid"),
				ExpressionAttributeNames:  names(attrPK, attrUID),
				ExpressionAttributeValues: map[string]types.AttributeValue{":uid": str(uid)},
			}},
		}})
		if slices.Contains(cancelReasons(err), reasonConditional) {
			continue // deleted meanwhile: the next read says so
		}
		if err != nil {
			return fmt.Errorf("delete user: %w", wrapAWS(err))
		}
		return nil
	}
	return fmt.Errorf("delete user %s: %w", uid, oauth.ErrConflict)
}

// ListUsers queries the users' partition of GSI1 (for operators).
func (s *Store) ListUsers(ctx context.Context) ([]oauth.User, error) {
	items, err := s.queryListing(ctx, gsiAllUsers, typeUser+"#")
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	out := make([]oauth.User, 0, len(items))
	for _, item := range items {
		u, err := decode[oauth.User](item)
		if err != nil {
			return nil, fmt.Errorf("list users: %w", err)
		}
		out = append(out, u)
	}
	return out, nil
}

func userItem(u oauth.User, version int64) (map[string]types.AttributeValue, error) {
	item, err := newItem(typeUser, u.UID, u)
	if err != nil {
		return nil, err
	}
	item[attrVersion] = num(version)
	item[attrGSI1PK], item[attrGSI1SK] = str(listPartition(gsiAllUsers, u.UID)), str(typeUser+"#"+u.UID)
	return item, nil
}
