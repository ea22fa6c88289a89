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

// failureAttempts bounds CountFailure's alternation between bumping a live counter and
// starting a new one when other logins race on the same key.
const failureAttempts = 8

// PutAuthRequest stores a pending authorization request until it expires.
func (s *Store) PutAuthRequest(ctx context.Context, r oauth.AuthRequest) error {
	item, err := newItem(typeAuthReq, r.ID, r)
	if err != nil {
		return fmt.Errorf("put auth request: %w", err)
	}
	setExpiry(item, r.ExpiresAt)
	return s.put(ctx, "put auth request", item)
}

// GetAuthRequest reads a pending request; an expired one is oauth.ErrNotFound.
func (s *Store) GetAuthRequest(ctx context.Context, id string, now time.Time) (oauth.AuthRequest, error) {
	return getLive[oauth.AuthRequest](ctx, s, "get auth request", key(typeAuthReq, id), now)
}

// TakeAuthRequest is one conditional DeleteItem that returns the item it deleted: of racing
// calls only the one whose delete found the live item gets it.
func (s *Store) TakeAuthRequest(ctx context.Context, id string, now time.Time) (oauth.AuthRequest, error) {
	return takeLive[oauth.AuthRequest](ctx, s, "take auth request", key(typeAuthReq, id), now)
}

// PutSession stores a session until it expires.
func (s *Store) PutSession(ctx context.Context, sess oauth.Session) error {
	item, err := newItem(typeSession, sess.Hash, sess)
	if err != nil {
		return fmt.Errorf("put session: %w", err)
	}
	setExpiry(item, sess.ExpiresAt)
	return s.put(ctx, "put session", item)
}

// GetSession reads a session by the hash of its cookie; an expired one is oauth.ErrNotFound.
func (s *Store) GetSession(ctx context.Context, hash string, now time.Time) (oauth.Session, error) {
	return getLive[oauth.Session](ctx, s, "get session", key(typeSession, hash), now)
}

// DeleteSession ends a session; an unknown one is not an error.
func (s *Store) DeleteSession(ctx context.Context, hash string) error {
	return s.del(ctx, "delete session", key(typeSession, hash))
}

// TakeSession is one DeleteItem conditioned on the session's item existing: a failed condition
// (another call took it, or there was none) is oauth.ErrNotFound.
func (s *Store) TakeSession(ctx context.Context, hash string) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: s.table, Key: key(typeSession, hash),
		ConditionExpression:      aws.String("attribute_exists(#pk)"),
		ExpressionAttributeNames: names(attrPK),
	})
	if failed, _ := conditionFailed(err); failed {
		return fmt.Errorf("take session: %w", oauth.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("take session: %w", wrapAWS(err))
	}
	return nil
}

// CountFailure adds one to a live counter with a conditional UpdateItem (ADD is atomic, so
// racing failures all count). When there is no live counter it starts one at 1 with a
// conditional PutItem that only replaces an absent or expired counter; if another failure
// started one first, it counts on that one.
func (s *Store) CountFailure(ctx context.Context, counter string, window time.Duration, now time.Time) (int, error) {
	k := key(typeFailures, counter)
	nowNs := num(now.UnixNano())
	for range failureAttempts {
		out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 s.table,
			Key:                       k,
			UpdateExpression:          aws.String("ADD #count :one"),
			ConditionExpression:       aws.String("attribute_exists(#pk) AND #exp > :now"),
			ExpressionAttributeNames:  names(attrPK, attrExp, attrCount),
			ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1), ":now": nowNs},
			ReturnValues:              types.ReturnValueUpdatedNew,
		})
		if err == nil {
			n, err := intAttr(out.Attributes, attrCount)
			if err != nil {
				return 0, fmt.Errorf("count failure: %w", err)
			}
			return int(n), nil
		}
		if failed, _ := conditionFailed(err); !failed {
			return 0, fmt.Errorf("count failure: %w", wrapAWS(err))
		}
		item := key(typeFailures, counter)
		item[attrType], item[attrCount] = str(typeFailures), num(1)
		setExpiry(item, now.Add(window))
		_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                 s.table,
			Item:                      item,
			ConditionExpression:       aws.String("attribute_not_exists(#pk) OR #exp <= :now"),
			ExpressionAttributeNames:  names(attrPK, attrExp),
			ExpressionAttributeValues: map[string]types.AttributeValue{":now": nowNs},
		})
		if err == nil {
			return 1, nil
		}
		if failed, _ := conditionFailed(err); !failed {
			return 0, fmt.Errorf("count failure: %w", wrapAWS(err))
		}
	}
	return 0, fmt.Errorf("count failure: %w: %w", oauth.ErrTransient, oauth.ErrConflict)
}

// Failures reads key's counter; none or an expired one is zero.
func (s *Store) Failures(ctx context.Context, counter string, now time.Time) (int, error) {
	item, err := s.get(ctx, key(typeFailures, counter))
	if err != nil {
		return 0, fmt.Errorf("failures: %w", err)
	}
	if item == nil || !live(item, now) {
		return 0, nil
	}
	n, err := intAttr(item, attrCount)
	if err != nil {
		return 0, fmt.Errorf("failures: %w", err)
	}
	return int(n), nil
}

// ResetFailures forgets key's counter.
func (s *Store) ResetFailures(ctx context.Context, counter string) error {
	return s.del(ctx, "reset failures", key(typeFailures, counter))
}

// getLive reads the item at k with one strongly consistent GetItem and decodes it; none, or
// one past its expiry (not yet removed by the TTL), is oauth.ErrNotFound.
func getLive[T any](ctx context.Context, s *Store, what string, k map[string]types.AttributeValue, now time.Time) (T, error) {
	var zero T
	item, err := s.get(ctx, k)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", what, err)
	}
	if len(item) == 0 || !live(item, now) {
		return zero, fmt.Errorf("%s: %w", what, oauth.ErrNotFound)
	}
	return decode[T](item)
}

// takeLive deletes the live item at k and returns it: one DeleteItem conditioned on the item
// existing and not being past its expiry, returning what it deleted, so of racing calls only
// the one whose delete found it gets it; the others, and a call on none or an expired one
// (which it leaves), get oauth.ErrNotFound.
func takeLive[T any](ctx context.Context, s *Store, what string, k map[string]types.AttributeValue, now time.Time) (T, error) {
	var zero T
	out, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 s.table,
		Key:                       k,
		ConditionExpression:       aws.String("attribute_exists(#pk) AND #exp > :now"),
		ExpressionAttributeNames:  names(attrPK, attrExp),
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": num(now.UnixNano())},
		ReturnValues:              types.ReturnValueAllOld,
	})
	if failed, _ := conditionFailed(err); failed {
		return zero, fmt.Errorf("%s: %w", what, oauth.ErrNotFound)
	}
	if err != nil {
		return zero, fmt.Errorf("%s: %w", what, wrapAWS(err))
	}
	return decode[T](out.Attributes)
}
