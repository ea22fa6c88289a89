package dynamo

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/acmebank/authserver/shared/oauth"
)

// CIBA requests (oauth.BackchannelStore). One item per request, BC#<id> / BC, holding the
// request's fields (their dynamodbav names) and:
//   - exp and ttl from KeepUntil: the store forgets the request then, and every read and
//     condition treats it as gone from that instant;
//   - next_poll: NextPollAt in Unix nanoseconds, the one number a poll's condition compares and
//     its update advances by poll_ns (Interval in nanoseconds), so a poll is one UpdateItem
//     with no read (the request's next_poll_at is read back from it);
//   - decide_by: ExpiresAt in Unix nanoseconds, which a decision's condition compares;
//   - while pending and naming a customer, gsi1pk BCUSER#<uid> and gsi1sk BC#<created>#<id>,
//     removed by the decision: GSI1 then holds only pending requests, which
//     ListBackchannelRequests queries.
const (
	// gsiBackchannelUser starts the GSI1 partition of a customer's pending requests: a key of
	// its own beside the grants' USER#<uid>, so neither listing reads the other's items.
	gsiBackchannelUser = "BCUSER#"

	attrNextPoll = "next_poll"
	attrPollNs   = "poll_ns"
	attrDecideBy = "decide_by"
	// The request's own attributes its writes name (dynamodbav names of oauth.BackchannelRequest).
	attrState     = "state"
	attrGrant     = "grant"
	attrDecidedAt = "decided_at"
	attrClientID  = "client_id"
	attrNextAt    = "next_poll_at"
)

// backchannelItem is the item of a new request.
func backchannelItem(r oauth.BackchannelRequest) (map[string]types.AttributeValue, error) {
	item, err := newItem(typeBackchannel, r.ID, r)
	if err != nil {
		return nil, err
	}
	delete(item, attrNextAt) // kept as next_poll only, the number polls advance
	setExpiry(item, r.KeepUntil)
	item[attrNextPoll] = num(r.NextPollAt.UnixNano())
	item[attrPollNs] = num(int64(r.Interval) * int64(time.Second))
	item[attrDecideBy] = num(expNanos(r.ExpiresAt))
	if r.UID != "" && r.State == oauth.CIBAPending {
		item[attrGSI1PK] = str(gsiBackchannelUser + r.UID)
		item[attrGSI1SK] = str(typeBackchannel + "#" + r.CreatedAt.UTC().Format(gsiTimeFormat) + "#" + r.ID)
	}
	return item, nil
}

// decodeBackchannel reads a request from its item, NextPollAt from next_poll.
func decodeBackchannel(item map[string]types.AttributeValue) (oauth.BackchannelRequest, error) {
	r, err := decode[oauth.BackchannelRequest](item)
	if err != nil {
		return r, err
	}
	next, err := intAttr(item, attrNextPoll)
	if err != nil {
		return r, fmt.Errorf("unmarshal backchannel request: %w", err)
	}
	r.NextPollAt = time.Unix(0, next).UTC()
	return r, nil
}

// PutBackchannelRequest is one PutItem conditioned on the key being free
// (oauth.ErrAlreadyExists otherwise).
func (s *Store) PutBackchannelRequest(ctx context.Context, r oauth.BackchannelRequest) error {
	if err := r.Storable(); err != nil {
		return fmt.Errorf("put backchannel request: %w", err)
	}
	item, err := backchannelItem(r)
	if err != nil {
		return fmt.Errorf("put backchannel request: %w", err)
	}
	return s.putNew(ctx, "put backchannel request", item)
}

// GetBackchannelRequest is one strongly consistent GetItem; a request past KeepUntil is
// oauth.ErrNotFound.
func (s *Store) GetBackchannelRequest(ctx context.Context, id string, now time.Time) (oauth.BackchannelRequest, error) {
	item, err := s.get(ctx, key(typeBackchannel, id))
	if err != nil {
		return oauth.BackchannelRequest{}, fmt.Errorf("get backchannel request: %w", err)
	}
	if len(item) == 0 || !live(item, now) {
		return oauth.BackchannelRequest{}, fmt.Errorf("get backchannel request: %w", oauth.ErrNotFound)
	}
	return decodeBackchannel(item)
}

// PollBackchannelRequest is one conditional UpdateItem: next_poll moves by the request's
// interval only if the request is live, the client's, pending and next_poll is not after now,
// and the item as it was comes back (ALL_OLD). On a failed condition DynamoDB returns the item
// as it was (ALL_OLD again), which tells slow_down from a decided request (returned as it is:
// nothing was written) and from an unknown, forgotten or another client's one, at no extra
// call. Of racing polls at one instant, the first to be applied moves next_poll past now and
// fails every other's condition.
func (s *Store) PollBackchannelRequest(ctx context.Context, id, clientID string, now time.Time) (oauth.BackchannelRequest, error) {
	nowNs := num(now.UnixNano())
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                s.table,
		Key:                      key(typeBackchannel, id),
		UpdateExpression:         aws.String("SET #next_poll = :now + #poll_ns"),
		ConditionExpression:      aws.String("attribute_exists(#pk) AND #exp > :now AND #client_id = :client AND #state = :pending AND #next_poll <= :now"),
		ExpressionAttributeNames: names(attrPK, attrExp, attrClientID, attrState, attrNextPoll, attrPollNs),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now": nowNs, ":client": str(clientID), ":pending": str(oauth.CIBAPending),
		},
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if failed, old := conditionFailed(err); failed {
		if len(old) == 0 || !live(old, now) || !attrIs(old, attrClientID, clientID) {
			return oauth.BackchannelRequest{}, fmt.Errorf("poll backchannel request: %w", oauth.ErrNotFound)
		}
		r, err := decodeBackchannel(old)
		if err != nil {
			return oauth.BackchannelRequest{}, fmt.Errorf("poll backchannel request: %w", err)
		}
		if r.State != oauth.CIBAPending {
			return r, nil
		}
		return r, fmt.Errorf("poll backchannel request: %w", oauth.ErrSlowDown)
	}
	if err != nil {
		return oauth.BackchannelRequest{}, fmt.Errorf("poll backchannel request: %w", wrapAWS(err))
	}
	r, err := decodeBackchannel(out.Attributes)
	if err != nil {
		return oauth.BackchannelRequest{}, fmt.Errorf("poll backchannel request: %w", err)
	}
	return r, nil
}

// DecideBackchannelRequest is one conditional UpdateItem: the state, the grant and decided_at
// are set, and the request leaves the customer's listing (GSI1), only if it is live, the
// customer's, pending and before decide_by (ExpiresAt); the request as decided comes back
// (ALL_NEW). On a failed condition the item as it was (ALL_OLD) tells a decided request
// (oauth.ErrUsed) from an unknown, expired or another customer's one (oauth.ErrNotFound).
// With one-time values (BackchannelDecision.Once) it is decideBackchannelOnce.
func (s *Store) DecideBackchannelRequest(ctx context.Context, id, uid string, d oauth.BackchannelDecision, now time.Time) (oauth.BackchannelRequest, error) {
	if d.Approve != (d.Grant != nil) {
		return oauth.BackchannelRequest{}, fmt.Errorf("decide backchannel request: an approval needs its grant and a denial has none")
	}
	if uid == "" {
		return oauth.BackchannelRequest{}, fmt.Errorf("decide backchannel request: %w", oauth.ErrNotFound)
	}
	u, err := s.backchannelDecision(id, uid, d, now)
	if err != nil {
		return oauth.BackchannelRequest{}, err
	}
	if len(d.Once) > 0 {
		return s.decideBackchannelOnce(ctx, id, uid, d, u, now)
	}
	out, err := s.updateAlone(ctx, u, types.ReturnValueAllNew)
	if failed, old := conditionFailed(err); failed {
		return oauth.BackchannelRequest{}, refusedDecision(old, uid, now)
	}
	if err != nil {
		return oauth.BackchannelRequest{}, fmt.Errorf("decide backchannel request: %w", wrapAWS(err))
	}
	r, err := decodeBackchannel(out.Attributes)
	if err != nil {
		return oauth.BackchannelRequest{}, fmt.Errorf("decide backchannel request: %w", err)
	}
	return r, nil
}

// backchannelDecision is the one write that records a decision, alone or in a transaction
// with one-time values.
func (s *Store) backchannelDecision(id, uid string, d oauth.BackchannelDecision, now time.Time) (*types.Update, error) {
	values := map[string]types.AttributeValue{
		":now": num(now.UnixNano()), ":uid": str(uid), ":pending": str(oauth.CIBAPending),
		":state": str(oauth.CIBADenied), ":at": timeAttr(now),
	}
	update := "SET #state = :state, #decided_at = :at REMOVE #gsi1pk, #gsi1sk"
	attrs := names(attrPK, attrExp, attrUID, attrState, attrDecideBy, attrDecidedAt, attrGSI1PK, attrGSI1SK)
	if d.Approve {
		g, err := attributevalue.Marshal(d.Grant)
		if err != nil {
			return nil, fmt.Errorf("decide backchannel request: marshal grant: %w", err)
		}
		values[":state"], values[":grant"] = str(oauth.CIBAApproved), g
		update = "SET #state = :state, #decided_at = :at, #grant = :grant REMOVE #gsi1pk, #gsi1sk"
		attrs["#"+attrGrant] = attrGrant
	}
	return &types.Update{
		TableName:                 s.table,
		Key:                       key(typeBackchannel, id),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String("attribute_exists(#pk) AND #exp > :now AND #uid = :uid AND #state = :pending AND #decide_by > :now"),
		ExpressionAttributeNames:  attrs,
		ExpressionAttributeValues: values,
	}, nil
}

// refusedDecision tells why a decision's condition failed, from the item as it was: a live
// request of uid no longer pending was decided before (oauth.ErrUsed); anything else is
// oauth.ErrNotFound.
func refusedDecision(old map[string]types.AttributeValue, uid string, now time.Time) error {
	if len(old) > 0 && live(old, now) && attrIs(old, attrUID, uid) && !attrIs(old, attrState, oauth.CIBAPending) {
		return fmt.Errorf("decide backchannel request: %w", oauth.ErrUsed)
	}
	return fmt.Errorf("decide backchannel request: %w", oauth.ErrNotFound)
}

// decideBackchannelOnce records a decision together with the decision's one-time values as
// consumeBackchannelOnce consumes: one TransactWriteItems (the conditional put of each value
// and the decision's conditional update), so a value used before decides nothing and a
// refused decision records no value, with a strongly consistent GetItem of the request sent
// at the same time (a transaction returns no item). The request's content other than its
// decision does not change, so the read, with the decision applied, is the request as decided.
func (s *Store) decideBackchannelOnce(ctx context.Context, id, uid string, d oauth.BackchannelDecision, u *types.Update, now time.Time) (oauth.BackchannelRequest, error) {
	w := s.writeWithOnces(ctx, id, u, d.Once, now)
	if w.err != nil {
		if r := replayedOnce(w.reasons, d.Once, w.onceAt); r != nil {
			return oauth.BackchannelRequest{}, fmt.Errorf("decide backchannel request: %w", r)
		}
		if w.conditionFailed() {
			return oauth.BackchannelRequest{}, refusedDecision(w.old, uid, now)
		}
		return oauth.BackchannelRequest{}, fmt.Errorf("decide backchannel request: %w", wrapAWS(w.err))
	}
	r, err := s.readAfter(ctx, id, "decide", w, func(read map[string]types.AttributeValue) bool { return len(read) == 0 })
	if err != nil {
		return oauth.BackchannelRequest{}, err
	}
	r.State, r.Grant, r.DecidedAt = oauth.CIBADenied, nil, now
	if d.Approve {
		r.State, r.Grant = oauth.CIBAApproved, d.Grant
	}
	return r, nil
}

// ConsumeBackchannelRequest is one conditional UpdateItem that sets the state issued only if
// the request is live, the client's and approved, returning it (ALL_NEW); the item as it was
// on a failed condition (ALL_OLD) tells an issued request (returned with oauth.ErrUsed) from
// the others (oauth.ErrNotFound). With one-time values it is consumeBackchannelOnce.
func (s *Store) ConsumeBackchannelRequest(ctx context.Context, id, clientID string, now time.Time, once ...oauth.Once) (oauth.BackchannelRequest, error) {
	if len(once) > 0 {
		return s.consumeBackchannelOnce(ctx, id, clientID, now, once)
	}
	u := s.backchannelConsumption(id, clientID, now)
	out, err := s.updateAlone(ctx, u, types.ReturnValueAllNew)
	if failed, old := conditionFailed(err); failed {
		return refusedBackchannel(old, clientID, now, false)
	}
	if err != nil {
		return oauth.BackchannelRequest{}, fmt.Errorf("consume backchannel request: %w", wrapAWS(err))
	}
	r, err := decodeBackchannel(out.Attributes)
	if err != nil {
		return oauth.BackchannelRequest{}, fmt.Errorf("consume backchannel request: %w", err)
	}
	return r, nil
}

// backchannelConsumption is the one write that issues an approved request, alone or in a
// transaction with one-time values.
func (s *Store) backchannelConsumption(id, clientID string, now time.Time) *types.Update {
	return &types.Update{
		TableName:                s.table,
		Key:                      key(typeBackchannel, id),
		UpdateExpression:         aws.String("SET #state = :issued"),
		ConditionExpression:      aws.String("attribute_exists(#pk) AND #exp > :now AND #client_id = :client AND #state = :approved"),
		ExpressionAttributeNames: names(attrPK, attrExp, attrClientID, attrState),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now": num(now.UnixNano()), ":client": str(clientID),
			":approved": str(oauth.CIBAApproved), ":issued": str(oauth.CIBAIssued),
		},
	}
}

// refusedBackchannel tells why a consumption's condition failed, from the item as it was: an
// issued request of clientID is returned with oauth.ErrUsed; an unknown, forgotten, another
// client's, pending or denied one is oauth.ErrNotFound. approvedIsUsed is for an item read
// beside a transaction, before it: approved then, and refused by the condition, it was issued
// by a racing consumption since.
func refusedBackchannel(old map[string]types.AttributeValue, clientID string, now time.Time, approvedIsUsed bool) (oauth.BackchannelRequest, error) {
	notFound := fmt.Errorf("consume backchannel request: %w", oauth.ErrNotFound)
	if len(old) == 0 || !live(old, now) || !attrIs(old, attrClientID, clientID) {
		return oauth.BackchannelRequest{}, notFound
	}
	if !attrIs(old, attrState, oauth.CIBAIssued) && !(approvedIsUsed && attrIs(old, attrState, oauth.CIBAApproved)) {
		return oauth.BackchannelRequest{}, notFound
	}
	r, err := decodeBackchannel(old)
	if err != nil {
		return oauth.BackchannelRequest{}, fmt.Errorf("consume backchannel request: %w", err)
	}
	r.State = oauth.CIBAIssued
	return r, fmt.Errorf("consume backchannel request: %w", oauth.ErrUsed)
}

// consumeBackchannelOnce issues an approved request together with the poll's one-time values
// as ConsumeCode does (consumeCodeOnce): one TransactWriteItems, the conditional put of each
// value and the request's conditional update, and, sent at the same time, a strongly
// consistent GetItem of the request, since a transaction returns no item. The request's
// content no longer changes once approved (the poll that consumes it read it approved), so
// the read is the request; the transaction's conditions decide.
func (s *Store) consumeBackchannelOnce(ctx context.Context, id, clientID string, now time.Time, once []oauth.Once) (oauth.BackchannelRequest, error) {
	w := s.writeWithOnces(ctx, id, s.backchannelConsumption(id, clientID, now), once, now)
	if w.err != nil {
		if r := replayedOnce(w.reasons, once, w.onceAt); r != nil {
			return oauth.BackchannelRequest{}, fmt.Errorf("consume backchannel request: %w", r)
		}
		if w.conditionFailed() {
			if len(w.old) > 0 {
				return refusedBackchannel(w.old, clientID, now, false)
			}
			return refusedBackchannel(w.read, clientID, now, true)
		}
		return oauth.BackchannelRequest{}, fmt.Errorf("consume backchannel request: %w", wrapAWS(w.err))
	}
	// Read before the decision committed (no poll reaches here so early, but the grant must
	// come back): read again, after the transaction.
	r, err := s.readAfter(ctx, id, "consume", w, func(read map[string]types.AttributeValue) bool {
		return len(read) == 0 || !attrIs(read, attrState, oauth.CIBAApproved) && !attrIs(read, attrState, oauth.CIBAIssued)
	})
	if err != nil {
		return oauth.BackchannelRequest{}, err
	}
	r.State = oauth.CIBAIssued
	return r, nil
}

// onceWrite is a request's conditional update written in one TransactWriteItems with a
// conditional put per one-time value, and the request as read beside it.
type onceWrite struct {
	err     error
	reasons []string
	onceAt  int
	reqAt   int
	// old is the request as it was when the update's condition failed, if DynamoDB said.
	old map[string]types.AttributeValue
	// read and readErr are the strongly consistent GetItem of the request sent at the same
	// time as the transaction, which returns no item.
	read    map[string]types.AttributeValue
	readErr error
}

// conditionFailed reports whether the transaction was cancelled by the update's condition.
func (w *onceWrite) conditionFailed() bool {
	return w.reqAt < len(w.reasons) && w.reasons[w.reqAt] == reasonConditional
}

// writeWithOnces sends the update u of the request id with the values in one
// TransactWriteItems (so the values are recorded only with the update, and a value used
// before updates nothing), and a GetItem of the request beside it: one round trip.
func (s *Store) writeWithOnces(ctx context.Context, id string, u *types.Update, once []oauth.Once, now time.Time) onceWrite {
	items, onceAt := s.onceWrites(nil, once, now)
	w := onceWrite{onceAt: onceAt, reqAt: len(items)}
	u.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	items = append(items, types.TransactWriteItem{Update: u})
	var wg sync.WaitGroup
	wg.Go(func() { w.read, w.readErr = s.get(ctx, key(typeBackchannel, id)) })
	w.err = s.transactJudged(ctx, items)
	wg.Wait()
	if w.err != nil {
		w.reasons = cancelReasons(w.err)
		if w.conditionFailed() {
			w.old = cancelledItem(w.err, w.reqAt)
		}
	}
	return w
}

// readAfter decodes the request read beside a transaction that committed, reading it again
// when stale says the read came before the write it needs. The request's content other than
// its state and decision does not change, so the caller sets those as the write did.
func (s *Store) readAfter(ctx context.Context, id, op string, w onceWrite, stale func(map[string]types.AttributeValue) bool) (oauth.BackchannelRequest, error) {
	read, readErr := w.read, w.readErr
	if readErr == nil && stale(read) {
		read, readErr = s.get(ctx, key(typeBackchannel, id))
	}
	if readErr != nil {
		return oauth.BackchannelRequest{}, fmt.Errorf("%s backchannel request: read: %w", op, readErr)
	}
	if len(read) == 0 {
		return oauth.BackchannelRequest{}, fmt.Errorf("%s backchannel request: written but not read: %w", op, oauth.ErrTransient)
	}
	r, err := decodeBackchannel(read)
	if err != nil {
		return oauth.BackchannelRequest{}, fmt.Errorf("%s backchannel request: %w", op, err)
	}
	return r, nil
}

// ListBackchannelRequests is one Query of the customer's GSI1 partition, which holds only
// pending requests (a decision removes the request's index keys); it keeps those still live
// and before their ExpiresAt. The index is eventually consistent: a request decided a moment
// ago may still be listed, and its decision is refused then (ErrUsed).
func (s *Store) ListBackchannelRequests(ctx context.Context, uid string, now time.Time) ([]oauth.BackchannelRequest, error) {
	if uid == "" {
		return nil, nil
	}
	items, err := s.queryIndex(ctx, IndexGSI1, attrGSI1PK, gsiBackchannelUser+uid, typeBackchannel+"#")
	if err != nil {
		return nil, fmt.Errorf("list backchannel requests: %w", err)
	}
	var out []oauth.BackchannelRequest
	for _, item := range items {
		by, err := intAttr(item, attrDecideBy)
		if err != nil {
			return nil, fmt.Errorf("list backchannel requests: %w", err)
		}
		if !live(item, now) || now.UnixNano() >= by || !attrIs(item, attrState, oauth.CIBAPending) || !attrIs(item, attrUID, uid) {
			continue
		}
		r, err := decodeBackchannel(item)
		if err != nil {
			return nil, fmt.Errorf("list backchannel requests: %w", err)
		}
		out = append(out, r)
	}
	return out, nil
}

// attrIs reports whether the S attribute name of item is want.
func attrIs(item map[string]types.AttributeValue, name, want string) bool {
	v, ok := item[name].(*types.AttributeValueMemberS)
	return ok && v.Value == want
}
