package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/acmebank/authserver/shared/oauth"
)

// updateAttempts bounds the optimistic retries of UpdateClient and UpdateUser.
const updateAttempts = 8

// GetClient reads a client by id.
func (s *Store) GetClient(ctx context.Context, id string) (oauth.Client, error) {
	item, err := s.get(ctx, key(typeClient, id))
	if err != nil {
		return oauth.Client{}, fmt.Errorf("get client: %w", err)
	}
	if item == nil {
		return oauth.Client{}, fmt.Errorf("get client: %w", oauth.ErrNotFound)
	}
	return decode[oauth.Client](item)
}

// CreateClient writes a new client; a taken id is oauth.ErrAlreadyExists.
func (s *Store) CreateClient(ctx context.Context, c oauth.Client) error {
	item, err := clientItem(c, 1)
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	return s.putNew(ctx, "create client", item)
}

// UpdateClient reads the client, applies fn and writes the result only if the client's version
// is still the one read; on a lost race it reads again and re-applies fn, so no update that
// returned nil is ever lost.
func (s *Store) UpdateClient(ctx context.Context, id string, fn func(oauth.Client) (oauth.Client, error)) error {
	for range updateAttempts {
		item, err := s.get(ctx, key(typeClient, id))
		if err != nil {
			return fmt.Errorf("update client %s: %w", id, err)
		}
		if item == nil {
			return fmt.Errorf("update client %s: %w", id, oauth.ErrNotFound)
		}
		old, err := decode[oauth.Client](item)
		if err != nil {
			return fmt.Errorf("update client %s: %w", id, err)
		}
		version, err := intAttr(item, attrVersion)
		if err != nil {
			return fmt.Errorf("update client %s: %w", id, err)
		}
		c, err := fn(old)
		if err != nil {
			return fmt.Errorf("update client %s: %w", id, err)
		}
		if c.ID != id {
			return fmt.Errorf("update client %s: the client id cannot change", id)
		}
		next, err := clientItem(c, version+1)
		if err != nil {
			return fmt.Errorf("update client %s: %w", id, err)
		}
		won, err := s.putVersioned(ctx, next, version)
		if err != nil {
			return fmt.Errorf("update client %s: %w", id, err)
		}
		if won {
			return nil
		}
	}
	return fmt.Errorf("update client %s: %w", id, oauth.ErrConflict)
}

// DeleteClient deletes a client; an unknown one is oauth.ErrNotFound.
func (s *Store) DeleteClient(ctx context.Context, id string) error {
	return s.delExisting(ctx, "delete client", key(typeClient, id))
}

// ListClients queries the clients' partition of GSI1 (for operators).
func (s *Store) ListClients(ctx context.Context) ([]oauth.Client, error) {
	items, err := s.queryListing(ctx, gsiAllClients, typeClient+"#")
	if err != nil {
		return nil, fmt.Errorf("list clients: %w", err)
	}
	out := make([]oauth.Client, 0, len(items))
	for _, item := range items {
		c, err := decode[oauth.Client](item)
		if err != nil {
			return nil, fmt.Errorf("list clients: %w", err)
		}
		out = append(out, c)
	}
	return out, nil
}

func clientItem(c oauth.Client, version int64) (map[string]types.AttributeValue, error) {
	item, err := newItem(typeClient, c.ID, c)
	if err != nil {
		return nil, err
	}
	item[attrVersion] = num(version)
	item[attrGSI1PK], item[attrGSI1SK] = str(listPartition(gsiAllClients, c.ID)), str(typeClient+"#"+c.ID)
	return item, nil
}

// putVersioned replaces an item if its version is still version (an item written without one
// counts as version 0). It reports false when another write won.
func (s *Store) putVersioned(ctx context.Context, item map[string]types.AttributeValue, version int64) (bool, error) {
	cond := "#version = :version"
	if version == 0 {
		cond = "attribute_exists(#pk) AND attribute_not_exists(#version)"
	}
	in := &dynamodb.PutItemInput{
		TableName:                s.table,
		Item:                     item,
		ConditionExpression:      aws.String(cond),
		ExpressionAttributeNames: names(attrPK, attrVersion),
	}
	if version != 0 {
		in.ExpressionAttributeNames = names(attrVersion)
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":version": num(version)}
	}
	_, err := s.db.PutItem(ctx, in)
	if failed, _ := conditionFailed(err); failed {
		return false, nil
	}
	if err != nil {
		return false, wrapAWS(err)
	}
	return true, nil
}

// delExisting deletes an item that must exist; an absent one is oauth.ErrNotFound.
func (s *Store) delExisting(ctx context.Context, what string, k map[string]types.AttributeValue) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                s.table,
		Key:                      k,
		ConditionExpression:      aws.String("attribute_exists(#pk)"),
		ExpressionAttributeNames: names(attrPK),
	})
	if failed, _ := conditionFailed(err); failed {
		return fmt.Errorf("%s: %w", what, oauth.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, wrapAWS(err))
	}
	return nil
}
