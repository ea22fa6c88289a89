package dynamo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/acmebank/authserver/shared/oauth"
)

// tombstoneTTL is how long a RevokeGrant tombstone blocks the grant it names from being
// written. A code lives minutes and its exchange seconds, so a day outlives every exchange in
// flight by far.
const tombstoneTTL = 24 * time.Hour

// revokeAttempts bounds RevokeGrant's optimistic retries when a refresh of the same grant
// commits between its read and its write.
const revokeAttempts = 8

// issueAttempts bounds IssueTokens' attempts when its transaction is cancelled only by a
// conflict with another transaction on one of its items.
const issueAttempts = 4

// maxTransactItems is DynamoDB's limit of items in one TransactWriteItems.
const maxTransactItems = 100

// gsiTimeFormat sorts grants by creation in the listing indexes: fixed width, so that the
// strings order like the times.
const gsiTimeFormat = "2006-01-02T15:04:05.000000000Z"

// CreateCode stores a new authorization code; a taken hash is ErrAlreadyExists.
func (s *Store) CreateCode(ctx context.Context, c oauth.Code) error {
	item, err := newItem(typeCode, c.Hash, c)
	if err != nil {
		return fmt.Errorf("create code: %w", err)
	}
	setExpiry(item, c.ExpiresAt)
	return s.putNew(ctx, "create code", item)
}

// ConsumeCode is one conditional UpdateItem: it marks the code used only if it exists, is
// unexpired, belongs to clientID and was not used, and returns it (ALL_NEW). When the condition
// fails DynamoDB returns the item as it was (ALL_OLD), which tells a used code (returned with
// oauth.ErrUsed) from an unknown, expired or foreign one (oauth.ErrNotFound), at no extra call.
func (s *Store) ConsumeCode(ctx context.Context, hash, clientID string, now time.Time, once ...oauth.Once) (oauth.Code, error) {
	if len(once) > 0 {
		return s.consumeCodeOnce(ctx, hash, clientID, now, once)
	}
	u := s.codeConsumption(hash, clientID, now)
	out, err := s.updateAlone(ctx, u, types.ReturnValueAllNew)
	if failed, old := conditionFailed(err); failed {
		return refusedCode(old, clientID, now, boolAttr(old, attrUsed))
	}
	if err != nil {
		return oauth.Code{}, fmt.Errorf("consume code: %w", wrapAWS(err))
	}
	c, err := decode[oauth.Code](out.Attributes)
	if err != nil {
		return oauth.Code{}, fmt.Errorf("consume code: %w", err)
	}
	return c, nil
}

// codeConsumption is the one write that consumes a code, alone (ConsumeCode) or in a
// transaction with one-time values (consumeCodeOnce): marked used only if it exists, is
// unexpired, is clientID's and was not used.
func (s *Store) codeConsumption(hash, clientID string, now time.Time) *types.Update {
	return &types.Update{
		TableName:                s.table,
		Key:                      key(typeCode, hash),
		UpdateExpression:         aws.String("SET #used = :true, #used_at = :now"),
		ConditionExpression:      aws.String("attribute_exists(#pk) AND #exp > :now AND #grant.#client_id = :client AND attribute_not_exists(#used)"),
		ExpressionAttributeNames: names(attrPK, attrExp, attrUsed, attrUsedAt, "grant", "client_id"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":true": boolean(true), ":now": num(now.UnixNano()), ":client": str(clientID),
		},
	}
}

// refusedCode tells why a code's consuming condition failed, from the item as it was: a used
// code is returned with oauth.ErrUsed; an unknown, expired or foreign one is oauth.ErrNotFound.
func refusedCode(old map[string]types.AttributeValue, clientID string, now time.Time, used bool) (oauth.Code, error) {
	if len(old) == 0 || !live(old, now) {
		return oauth.Code{}, fmt.Errorf("consume code: %w", oauth.ErrNotFound)
	}
	c, err := decode[oauth.Code](old)
	if err != nil {
		return oauth.Code{}, fmt.Errorf("consume code: %w", err)
	}
	if c.Grant.ClientID != clientID || !used {
		return oauth.Code{}, fmt.Errorf("consume code: %w", oauth.ErrNotFound)
	}
	return c, fmt.Errorf("consume code: %w", oauth.ErrUsed)
}

// consumeCodeOnce consumes a code together with the request's one-time values: one
// TransactWriteItems (the code's conditional update and a conditional put per value), so the
// values are recorded only with the code's consumption and a replayed value consumes nothing.
// A transaction returns no item, so the code is read by a strongly consistent GetItem sent at
// the same time: its content never changes once created (only its used mark does), and the
// transaction's condition decides. One round trip, two requests. The update asks for the
// item as it was on a failed condition, which tells a used code from an unknown one.
func (s *Store) consumeCodeOnce(ctx context.Context, hash, clientID string, now time.Time, once []oauth.Once) (oauth.Code, error) {
	items, onceAt := s.onceWrites(nil, once, now)
	codeAt := len(items)
	u := s.codeConsumption(hash, clientID, now)
	u.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	items = append(items, types.TransactWriteItem{Update: u})
	var read map[string]types.AttributeValue
	var readErr error
	var wg sync.WaitGroup
	wg.Go(func() { read, readErr = s.get(ctx, key(typeCode, hash)) })
	err := s.transactJudged(ctx, items)
	wg.Wait()
	if err != nil {
		reasons := cancelReasons(err)
		if r := replayedOnce(reasons, once, onceAt); r != nil {
			return oauth.Code{}, fmt.Errorf("consume code: %w", r)
		}
		if codeAt < len(reasons) && reasons[codeAt] == reasonConditional {
			if old := cancelledItem(err, codeAt); len(old) > 0 {
				return refusedCode(old, clientID, now, boolAttr(old, attrUsed))
			}
			// No item returned: the read sent with the transaction tells; the condition
			// failed on a live code of this client, so it was used.
			return refusedCode(read, clientID, now, true)
		}
		return oauth.Code{}, fmt.Errorf("consume code: %w", wrapAWS(err))
	}
	if readErr != nil {
		return oauth.Code{}, fmt.Errorf("consume code: read: %w", readErr)
	}
	if len(read) == 0 {
		return oauth.Code{}, fmt.Errorf("consume code: consumed but not read: %w", oauth.ErrTransient)
	}
	c, err := decode[oauth.Code](read)
	if err != nil {
		return oauth.Code{}, fmt.Errorf("consume code: %w", err)
	}
	return c, nil
}

// IssueTokens is one TransactWriteItems: the grant (a put that no item may precede for the
// first issuance, so a tombstone blocks it; an update conditioned on a live, unexpired grant for
// a refresh, which also bumps the grant's version so a concurrent RevokeGrant re-reads the
// token list), the access and refresh token puts, for a refresh the spend of its refresh token
// (successorWrites), and the deletes of the retired tokens.
func (s *Store) IssueTokens(ctx context.Context, in oauth.Issue, now time.Time) error {
	if in.FromCode && in.Rewrite != nil {
		return s.rewriteGrant(ctx, in, now)
	}
	g := in.Grant
	tokens := uniq(in.Tokens)
	var grantWrite types.TransactWriteItem
	if in.FromCode {
		item, err := grantItem(g, tokens, 1)
		if err != nil {
			return fmt.Errorf("issue tokens: %w", err)
		}
		grantWrite.Put = &types.Put{
			TableName:                s.table,
			Item:                     item,
			ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
			ExpressionAttributeNames: names(attrPK),
		}
	} else {
		grantWrite.Update = &types.Update{
			TableName:                s.table,
			Key:                      key(typeGrant, g.ID),
			UpdateExpression:         aws.String("SET #tokens = :tokens, #version = #version + :one, #last_used = :used"),
			ConditionExpression:      aws.String("attribute_exists(#pk) AND #exp > :now AND (attribute_not_exists(#revoked) OR #revoked = :false)"),
			ExpressionAttributeNames: names(attrPK, attrExp, attrRevoked, attrTokens, attrVersion, attrLastUsed),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":tokens": strList(tokens), ":one": num(1), ":now": num(now.UnixNano()), ":false": boolean(false),
				":used": timeAttr(now),
			},
		}
	}
	items, err := s.newTokenPuts([]types.TransactWriteItem{grantWrite}, in)
	if err != nil {
		return fmt.Errorf("issue tokens: %w", err)
	}
	spentAt, successorAt := -1, -1
	var successors []string
	switch {
	case !in.FromCode && in.Keep != nil:
		// A refresh that keeps its token: the token's update fails like a spend that lost.
		spentAt = len(items)
		items = append(items, s.keepWrite(in, now))
	case !in.FromCode:
		spentAt = len(items)
		items, successors, err = s.successorWrites(items, in, now)
		if err != nil {
			return fmt.Errorf("issue tokens for grant %s: %w", g.ID, err)
		}
		if len(successors) == 2 {
			successorAt = spentAt + 2 // after the spent token's update and the access delete
		}
	}
	for _, h := range uniq(in.Retire) {
		if !slices.Contains(successors, h) {
			items = append(items, types.TransactWriteItem{Delete: &types.Delete{TableName: s.table, Key: key(typeToken, h)}})
		}
	}
	// The request's one-time values last: recorded with the issuance or not at all.
	items, onceAt := s.onceWrites(items, in.Once, now)
	if len(items) > maxTransactItems {
		return fmt.Errorf("issue tokens: %d writes exceed one transaction", len(items))
	}
	var reasons []string
	for range issueAttempts {
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if err == nil {
			return nil
		}
		reasons = cancelReasons(err)
		// Cancelled only because another transaction held one of the items (racing refreshes
		// of one token, a revocation): nothing was written and the conditions have not been
		// judged, so send it again; the next attempt commits or fails a condition. A retry has
		// its own answer to a conflict (lostRetry).
		if in.Retry != nil || !slices.Contains(reasons, reasonConflict) || slices.Contains(reasons, reasonConditional) {
			break
		}
	}
	failed := func(i int) bool { return i >= 0 && i < len(reasons) && reasons[i] == reasonConditional }
	if r := replayedOnce(reasons, in.Once, onceAt); r != nil {
		return fmt.Errorf("issue tokens for grant %s: %w", g.ID, r)
	}
	switch {
	case len(reasons) > 0 && reasons[0] == reasonConditional:
		return fmt.Errorf("issue tokens for grant %s: %w", g.ID, oauth.ErrRevoked)
	case in.Retry != nil && (failed(spentAt) || slices.Contains(reasons, reasonConflict)):
		return fmt.Errorf("issue tokens for grant %s: retry: %w", g.ID, s.lostRetry(ctx, in.Retry.Token.Hash, now, err))
	case failed(spentAt):
		return fmt.Errorf("issue tokens for grant %s: refresh token spent or gone since read: %w", g.ID, oauth.ErrConflict)
	case failed(successorAt):
		return fmt.Errorf("issue tokens for grant %s: retry: successor spent: %w", g.ID, oauth.ErrUsed)
	case slices.Contains(reasons, reasonConditional):
		return fmt.Errorf("issue tokens for grant %s: token: %w", g.ID, oauth.ErrAlreadyExists)
	}
	return fmt.Errorf("issue tokens for grant %s: %w", g.ID, wrapAWS(err))
}

// grantItem is the item of grant g with its live tokens at version: the record, its expiry
// and the listing indexes' keys (by user and by client, in the order of creation).
func grantItem(g oauth.Grant, tokens []string, version int64) (map[string]types.AttributeValue, error) {
	item, err := newItem(typeGrant, g.ID, oauth.GrantRecord{Grant: g, Tokens: tokens})
	if err != nil {
		return nil, err
	}
	setExpiry(item, g.ExpiresAt)
	item[attrVersion] = num(version)
	created := g.CreatedAt.UTC().Format(gsiTimeFormat) + "#" + g.ID
	// A grant without a user (client_credentials) is listed by its client only: all of them
	// under one "user#" key would be one hot partition, and no user's list may show them.
	if g.UID != "" {
		item[attrGSI1PK], item[attrGSI1SK] = str(typeUser+"#"+g.UID), str(typeGrant+"#"+created)
	}
	item[attrGSI2PK], item[attrGSI2SK] = str(typeClient+"#"+g.ClientID), str(typeGrant+"#"+created)
	return item, nil
}

// rewriteGrant is the issuance of a merge's or a replace's code (oauth.Issue.Rewrite): one
// GetItem of the grant, then one TransactWriteItems that puts the new grant conditioned on the
// version read (so a refresh or a revocation committed in between makes it read again, and
// the tokens it deletes are always the grant's current ones), deletes every token the grant
// lists and puts the new tokens. The revision, the client, the user and the grant's state are
// judged on the item read; the version condition makes that judgement hold at the write.
func (s *Store) rewriteGrant(ctx context.Context, in oauth.Issue, now time.Time) error {
	g := in.Grant
	for range revokeAttempts {
		item, err := s.get(ctx, key(typeGrant, g.ID))
		if err != nil {
			return fmt.Errorf("rewrite grant %s: %w", g.ID, err)
		}
		if item == nil || !live(item, now) || boolAttr(item, attrRevoked) {
			return fmt.Errorf("rewrite grant %s: %w", g.ID, oauth.ErrRevoked)
		}
		old, err := decodeGrant(item)
		if err != nil {
			return fmt.Errorf("rewrite grant %s: %w", g.ID, err)
		}
		if old.Grant.ClientID != g.ClientID || old.Grant.UID != g.UID {
			return fmt.Errorf("rewrite grant %s: another client's or user's: %w", g.ID, oauth.ErrRevoked)
		}
		if old.Grant.Revision != in.Rewrite.Revision {
			return fmt.Errorf("rewrite grant %s: revision %d, not %d: %w", g.ID, old.Grant.Revision, in.Rewrite.Revision, oauth.ErrConflict)
		}
		version, err := intAttr(item, attrVersion)
		if err != nil {
			return fmt.Errorf("rewrite grant %s: %w", g.ID, err)
		}
		next, err := grantItem(g, uniq(in.Tokens), version+1)
		if err != nil {
			return fmt.Errorf("rewrite grant %s: %w", g.ID, err)
		}
		items := []types.TransactWriteItem{{Put: &types.Put{
			TableName:                 s.table,
			Item:                      next,
			ConditionExpression:       aws.String("#version = :version"),
			ExpressionAttributeNames:  names(attrVersion),
			ExpressionAttributeValues: map[string]types.AttributeValue{":version": num(version)},
		}}}
		for _, h := range uniq(old.Tokens) {
			items = append(items, types.TransactWriteItem{Delete: &types.Delete{TableName: s.table, Key: key(typeToken, h)}})
		}
		items, err = s.newTokenPuts(items, in)
		if err != nil {
			return fmt.Errorf("rewrite grant %s: %w", g.ID, err)
		}
		items, onceAt := s.onceWrites(items, in.Once, now)
		if len(items) > maxTransactItems {
			return fmt.Errorf("rewrite grant %s: %d writes exceed one transaction", g.ID, len(items))
		}
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if err == nil {
			return nil
		}
		reasons := cancelReasons(err)
		if r := replayedOnce(reasons, in.Once, onceAt); r != nil {
			return fmt.Errorf("rewrite grant %s: %w", g.ID, r)
		}
		if len(reasons) > 0 && (reasons[0] == reasonConditional || slices.Contains(reasons, reasonConflict)) {
			continue // the grant changed since the read (a refresh, a revocation, another rewrite): judge it again
		}
		if slices.Contains(reasons, reasonConditional) {
			return fmt.Errorf("rewrite grant %s: token: %w", g.ID, oauth.ErrAlreadyExists)
		}
		return fmt.Errorf("rewrite grant %s: %w", g.ID, wrapAWS(err))
	}
	return fmt.Errorf("rewrite grant %s: %w: %w", g.ID, oauth.ErrTransient, oauth.ErrConflict)
}

// keepWrite is the update of the refresh token a non-rotating refresh keeps (oauth.Issue.Keep):
// its Live list becomes Keep.Live if the token is unexpired, the grant's client's, unspent, and
// its list is still Keep.Read (absent when empty: Token.Live is omitted then).
func (s *Store) keepWrite(in oauth.Issue, now time.Time) types.TransactWriteItem {
	k := in.Keep
	vals := map[string]types.AttributeValue{
		":live": strList(k.Live), ":false": boolean(false), ":now": num(now.UnixNano()), ":refresh": str(oauth.KindRefresh),
		":grant": str(in.Grant.ID), ":client": str(in.Grant.ClientID),
	}
	same := "attribute_not_exists(#live)"
	if len(k.Read) > 0 {
		same, vals[":read"] = "#live = :read", strList(k.Read)
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName:                 s.table,
		Key:                       key(typeToken, k.Hash),
		UpdateExpression:          aws.String("SET #live = :live"),
		ConditionExpression:       aws.String("attribute_exists(#pk) AND #exp > :now AND #kind = :refresh AND #grant.#id = :grant AND #grant.#client_id = :client AND (attribute_not_exists(#spent) OR #spent = :false) AND " + same),
		ExpressionAttributeNames:  names(attrPK, attrExp, attrSpent, attrLive, "kind", "grant", "id", "client_id"),
		ExpressionAttributeValues: vals,
	}}
}

// successorWrites appends to a refresh's transaction the update that spends its refresh token
// (oauth.Issue.Spent: unexpired, the grant's client's, unspent) and records the new pair as its
// successors. For a retry the update is
// conditioned on the token as the caller read it (spent at the same instant, the same
// successors, not retried), and the successors are deleted, the refresh token only while
// unspent; it returns those successors. The window is checked here, before any request:
// SpentAt never changes once set, and the transaction's condition confirms it.
func (s *Store) successorWrites(items []types.TransactWriteItem, in oauth.Issue, now time.Time) ([]types.TransactWriteItem, []string, error) {
	hash, r := in.Spent, in.Retry
	if r != nil {
		hash = r.Token.Hash
	}
	if hash == "" {
		return items, nil, nil
	}
	next := strList([]string{in.Access.Hash, in.Refresh.Hash})
	if r == nil {
		// The spend itself, inside the issuance's transaction: it commits with the new pair or
		// not at all, so nothing can leave the token spent without its successors.
		return append(items, types.TransactWriteItem{Update: &types.Update{
			TableName:                s.table,
			Key:                      key(typeToken, hash),
			UpdateExpression:         aws.String("SET #spent = :true, #spent_at = :at, #successors = :next"),
			ConditionExpression:      aws.String("attribute_exists(#pk) AND #exp > :now AND #kind = :refresh AND #grant.#id = :grant AND #grant.#client_id = :client AND (attribute_not_exists(#spent) OR #spent = :false)"),
			ExpressionAttributeNames: names(attrPK, attrExp, attrSpent, attrSpentAt, attrSuccessors, "kind", "grant", "id", "client_id"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":next": next, ":true": boolean(true), ":false": boolean(false), ":at": timeAttr(now),
				":now": num(now.UnixNano()), ":refresh": str(oauth.KindRefresh),
				":grant": str(in.Grant.ID), ":client": str(in.Grant.ClientID),
			},
		}}), nil, nil
	}
	if now.After(r.Token.SpentAt.Add(r.Window)) {
		return nil, nil, fmt.Errorf("retry after the window: %w", oauth.ErrUsed)
	}
	old := r.Token.Successors
	if len(old) != 2 {
		return nil, nil, fmt.Errorf("retry of a spend still in flight: %w", oauth.ErrConflict)
	}
	items = append(items,
		types.TransactWriteItem{Update: &types.Update{
			TableName:                s.table,
			Key:                      key(typeToken, hash),
			UpdateExpression:         aws.String("SET #successors = :next, #retried = :true"),
			ConditionExpression:      aws.String("attribute_exists(#pk) AND #exp > :now AND #spent = :true AND #spent_at = :at AND #successors = :old AND (attribute_not_exists(#retried) OR #retried = :false)"),
			ExpressionAttributeNames: names(attrPK, attrExp, attrSpent, attrSpentAt, attrSuccessors, attrRetried),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":next": next, ":old": strList(old), ":true": boolean(true), ":false": boolean(false),
				":at": timeAttr(r.Token.SpentAt), ":now": num(now.UnixNano()),
			},
		}},
		types.TransactWriteItem{Delete: &types.Delete{TableName: s.table, Key: key(typeToken, old[0])}},
		types.TransactWriteItem{Delete: &types.Delete{
			TableName:                 s.table,
			Key:                       key(typeToken, old[1]),
			ConditionExpression:       aws.String("attribute_exists(#pk) AND #exp > :now AND (attribute_not_exists(#spent) OR #spent = :false)"),
			ExpressionAttributeNames:  names(attrPK, attrExp, attrSpent),
			ExpressionAttributeValues: map[string]types.AttributeValue{":now": num(now.UnixNano()), ":false": boolean(false)},
		}},
	)
	return items, old, nil
}

// lostRetry tells why a retry's condition on the spent token failed, by reading the token
// and the refresh token that now succeeds it (two GetItems, on this failure path only): gone,
// oauth.ErrRevoked; another retry won and its refresh token is unspent, oauth.ErrConflict;
// that refresh token spent or gone, oauth.ErrUsed. When the transaction lost to a concurrent
// one and no retry has won yet, it is the transient failure cause.
func (s *Store) lostRetry(ctx context.Context, hash string, now time.Time, cause error) error {
	t, err := s.GetToken(ctx, hash, now)
	if errors.Is(err, oauth.ErrNotFound) {
		return oauth.ErrRevoked
	}
	if err != nil {
		return err
	}
	if !t.Retried || len(t.Successors) != 2 {
		if slices.Contains(cancelReasons(cause), reasonConflict) {
			return wrapAWS(cause)
		}
		return oauth.ErrConflict
	}
	next, err := s.GetToken(ctx, t.Successors[1], now)
	switch {
	case errors.Is(err, oauth.ErrNotFound):
		return oauth.ErrUsed
	case err != nil:
		return err
	case next.Spent:
		return oauth.ErrUsed
	}
	return oauth.ErrConflict
}

// GetToken is one strongly consistent GetItem, so a token revoked a moment ago is already
// gone.
func (s *Store) GetToken(ctx context.Context, hash string, now time.Time) (oauth.Token, error) {
	item, err := s.get(ctx, key(typeToken, hash))
	if err != nil {
		return oauth.Token{}, fmt.Errorf("get token: %w", err)
	}
	if item == nil || !live(item, now) {
		return oauth.Token{}, fmt.Errorf("get token: %w", oauth.ErrNotFound)
	}
	t, err := decode[oauth.Token](item)
	if err != nil {
		return oauth.Token{}, fmt.Errorf("get token: %w", err)
	}
	return t, nil
}

// RevokeToken deletes one token; an unknown one is not an error.
func (s *Store) RevokeToken(ctx context.Context, hash string) error {
	if _, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: s.table, Key: key(typeToken, hash)}); err != nil {
		return fmt.Errorf("revoke token: %w", wrapAWS(err))
	}
	return nil
}

// RevokeGrant reads the grant (one GetItem), then in one TransactWriteItems marks it revoked
// and deletes every token it lists, conditioned on the version it read: a refresh that commits
// in between changes the version and the revocation reads again. A grant not written yet gets
// a tombstone instead, which blocks the IssueTokens of an exchange in flight. Two calls when
// nothing races; an already revoked grant takes one.
func (s *Store) RevokeGrant(ctx context.Context, grantID string, now time.Time) error {
	for range revokeAttempts {
		item, err := s.get(ctx, key(typeGrant, grantID))
		if err != nil {
			return fmt.Errorf("revoke grant %s: %w", grantID, err)
		}
		if item == nil {
			done, err := s.putTombstone(ctx, grantID, now)
			if err != nil || done {
				return err
			}
			continue // the grant was written meanwhile: revoke it
		}
		if boolAttr(item, attrRevoked) {
			return nil
		}
		rec, err := decode[oauth.GrantRecord](item)
		if err != nil {
			return fmt.Errorf("revoke grant %s: %w", grantID, err)
		}
		version, err := intAttr(item, attrVersion)
		if err != nil {
			return fmt.Errorf("revoke grant %s: %w", grantID, err)
		}
		tokens := uniq(rec.Tokens)
		items := []types.TransactWriteItem{{Update: &types.Update{
			TableName:                 s.table,
			Key:                       key(typeGrant, grantID),
			UpdateExpression:          aws.String("SET #revoked = :true, #version = :next REMOVE #tokens"),
			ConditionExpression:       aws.String("#version = :version"),
			ExpressionAttributeNames:  names(attrRevoked, attrVersion, attrTokens),
			ExpressionAttributeValues: map[string]types.AttributeValue{":true": boolean(true), ":version": num(version), ":next": num(version + 1)},
		}}}
		first := min(len(tokens), maxTransactItems-1)
		for _, h := range tokens[:first] {
			items = append(items, types.TransactWriteItem{Delete: &types.Delete{TableName: s.table, Key: key(typeToken, h)}})
		}
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		reasons := cancelReasons(err)
		if len(reasons) > 0 && (reasons[0] == reasonConditional || slices.Contains(reasons, reasonConflict)) {
			continue // a refresh or another revocation won the race: read again
		}
		if err != nil {
			return fmt.Errorf("revoke grant %s: %w", grantID, wrapAWS(err))
		}
		// More tokens than one transaction holds: the grant is revoked, so no refresh can
		// add any; delete the rest after it. The domain keeps a handful per grant.
		for rest := tokens[first:]; len(rest) > 0; {
			n := min(len(rest), maxTransactItems)
			var dels []types.TransactWriteItem
			for _, h := range rest[:n] {
				dels = append(dels, types.TransactWriteItem{Delete: &types.Delete{TableName: s.table, Key: key(typeToken, h)}})
			}
			if _, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: dels}); err != nil {
				return fmt.Errorf("revoke grant %s: delete tokens: %w", grantID, wrapAWS(err))
			}
			rest = rest[n:]
		}
		return nil
	}
	return fmt.Errorf("revoke grant %s: %w: %w", grantID, oauth.ErrTransient, oauth.ErrConflict)
}

// putTombstone writes a revoked grant record where none exists yet. It reports false when a
// grant appeared meanwhile.
func (s *Store) putTombstone(ctx context.Context, grantID string, now time.Time) (bool, error) {
	item, err := newItem(typeGrant, grantID, oauth.GrantRecord{Grant: oauth.Grant{ID: grantID}, Revoked: true})
	if err != nil {
		return false, fmt.Errorf("revoke grant %s: %w", grantID, err)
	}
	setExpiry(item, now.Add(tombstoneTTL))
	item[attrVersion] = num(1)
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                s.table,
		Item:                     item,
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: names(attrPK),
	})
	if failed, _ := conditionFailed(err); failed {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("revoke grant %s: tombstone: %w", grantID, wrapAWS(err))
	}
	return true, nil
}

// GetGrant returns a grant record, revoked ones and tombstones too (with Revoked set); one
// past its end is ErrNotFound.
func (s *Store) GetGrant(ctx context.Context, id string, now time.Time) (oauth.GrantRecord, error) {
	item, err := s.get(ctx, key(typeGrant, id))
	if err != nil {
		return oauth.GrantRecord{}, fmt.Errorf("get grant: %w", err)
	}
	if item == nil || !live(item, now) {
		return oauth.GrantRecord{}, fmt.Errorf("get grant: %w", oauth.ErrNotFound)
	}
	return decodeGrant(item)
}

func decodeGrant(item map[string]types.AttributeValue) (oauth.GrantRecord, error) {
	rec, err := decode[oauth.GrantRecord](item)
	if err != nil {
		return oauth.GrantRecord{}, fmt.Errorf("grant: %w", err)
	}
	rec.Revoked = boolAttr(item, attrRevoked)
	if at, ok := item[attrConsumedAt].(*types.AttributeValueMemberS); ok {
		if rec.ConsumedAt, err = time.Parse(time.RFC3339Nano, at.Value); err != nil {
			return oauth.GrantRecord{}, fmt.Errorf("grant: %s: %w", attrConsumedAt, err)
		}
	}
	if at, ok := item[attrLastUsed].(*types.AttributeValueMemberS); ok {
		if rec.LastUsedAt, err = time.Parse(time.RFC3339Nano, at.Value); err != nil {
			return oauth.GrantRecord{}, fmt.Errorf("grant: %s: %w", attrLastUsed, err)
		}
	}
	return rec, nil
}

// ListGrants queries the user's (GSI1) or the client's (GSI2) grants and keeps the live ones.
// It is for operators: the indexes are eventually consistent, and no request path calls it.
func (s *Store) ListGrants(ctx context.Context, f oauth.GrantFilter, now time.Time) ([]oauth.GrantRecord, error) {
	var index, pkAttr, pk string
	switch {
	case f.UID != "" && f.ClientID == "":
		index, pkAttr, pk = IndexGSI1, attrGSI1PK, typeUser+"#"+f.UID
	case f.ClientID != "" && f.UID == "":
		index, pkAttr, pk = IndexGSI2, attrGSI2PK, typeClient+"#"+f.ClientID
	default:
		return nil, errors.New("list grants: set exactly one of UID and ClientID")
	}
	items, err := s.queryIndex(ctx, index, pkAttr, pk, typeGrant+"#")
	if err != nil {
		return nil, fmt.Errorf("list grants: %w", err)
	}
	var out []oauth.GrantRecord
	for _, item := range items {
		if !live(item, now) || boolAttr(item, attrRevoked) {
			continue
		}
		rec, err := decodeGrant(item)
		if err != nil {
			return nil, fmt.Errorf("list grants: %w", err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// uniq drops repeated hashes: one transaction may touch an item only once.
func uniq(ss []string) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// transactJudged sends a transaction until its conditions are judged: one cancelled only by a
// racing transaction on one of its items (another request with the same value, or the same
// code) wrote nothing, so it is sent again, at most issueAttempts times in all.
func (s *Store) transactJudged(ctx context.Context, items []types.TransactWriteItem) error {
	var err error
	for range issueAttempts {
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		reasons := cancelReasons(err)
		if err == nil || !slices.Contains(reasons, reasonConflict) || slices.Contains(reasons, reasonConditional) {
			break
		}
	}
	return err
}

// newTokenPuts appends to items the puts of in's new access and refresh tokens (either may be
// absent), each conditioned on no item having its key: a token hash is never written twice.
func (s *Store) newTokenPuts(items []types.TransactWriteItem, in oauth.Issue) ([]types.TransactWriteItem, error) {
	for _, t := range []oauth.Token{in.Access, in.Refresh} {
		if t.Hash == "" {
			continue
		}
		item, err := newItem(typeToken, t.Hash, t)
		if err != nil {
			return nil, err
		}
		setExpiry(item, t.ExpiresAt)
		items = append(items, types.TransactWriteItem{Put: &types.Put{
			TableName:                s.table,
			Item:                     item,
			ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
			ExpressionAttributeNames: names(attrPK),
		}})
	}
	return items, nil
}
