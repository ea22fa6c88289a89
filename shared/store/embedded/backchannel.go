package embedded

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/bbolt"

	"github.com/acmebank/authserver/shared/oauth"
)

// storedBackchannel is a CIBA request as stored: the request, and beside it its store expiry
// under expires_at, the field GarbageCollect reads, which is the request's KeepUntil (its own
// ExpiresAt, the auth_req_id's expiry, comes earlier: an approved request is still taken, and
// an unknown id told from an expired one, until KeepUntil).
type storedBackchannel struct {
	Request   oauth.BackchannelRequest `json:"request"`
	ExpiresAt time.Time                `json:"expires_at"`
}

// PutBackchannelRequest stores a new CIBA request until its KeepUntil; an ID already stored
// (live or not yet collected) is oauth.ErrAlreadyExists (oauth.BackchannelStore).
func (s *Store) PutBackchannelRequest(ctx context.Context, r oauth.BackchannelRequest) error {
	if err := r.Storable(); err != nil {
		return fmt.Errorf("put backchannel request: %w", err)
	}
	return s.update(ctx, func(tx *bbolt.Tx) error {
		if tx.Bucket(bBackchannel).Get([]byte(r.ID)) != nil {
			return fmt.Errorf("put backchannel request: %w", oauth.ErrAlreadyExists)
		}
		return put(tx, bBackchannel, r.ID, storedBackchannel{Request: r, ExpiresAt: r.KeepUntil})
	})
}

// GetBackchannelRequest reads a request stored and not past its KeepUntil.
func (s *Store) GetBackchannelRequest(ctx context.Context, id string, now time.Time) (oauth.BackchannelRequest, error) {
	var b storedBackchannel
	if err := s.view(ctx, func(tx *bbolt.Tx) error { return getLive(tx, bBackchannel, id, &b, &b.ExpiresAt, now) }); err != nil {
		return oauth.BackchannelRequest{}, err
	}
	return b.Request, nil
}

// PollBackchannelRequest is a poll in one write transaction (oauth.BackchannelStore): bbolt
// runs one at a time, so of racing polls of a pending request the first moves NextPollAt and
// the others find it in the future (ErrSlowDown). A refusal writes nothing; a poll of a
// decided request writes nothing either.
func (s *Store) PollBackchannelRequest(ctx context.Context, id, clientID string, now time.Time) (oauth.BackchannelRequest, error) {
	var before oauth.BackchannelRequest
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		before = oauth.BackchannelRequest{} // fn may run again (see update): nothing from a run before
		b, err := liveBackchannel(tx, id, now)
		if err != nil {
			return err
		}
		if b.Request.ClientID != clientID {
			return oauth.ErrNotFound
		}
		before = b.Request
		switch {
		case b.Request.State != oauth.CIBAPending:
			return errUnchanged // nothing to write: no commit either
		case now.Before(b.Request.NextPollAt):
			return oauth.ErrSlowDown
		}
		b.Request.NextPollAt = now.Add(time.Duration(b.Request.Interval) * time.Second)
		return put(tx, bBackchannel, id, b)
	})
	switch {
	case errors.Is(err, errUnchanged):
		return before, nil
	case errors.Is(err, oauth.ErrSlowDown):
		return before, fmt.Errorf("poll backchannel request: %w", err)
	case err != nil:
		return oauth.BackchannelRequest{}, fmt.Errorf("poll backchannel request: %w", err)
	}
	return before, nil
}

// DecideBackchannelRequest records the device's decision in one write transaction
// (oauth.BackchannelStore): of racing decisions the first finds the request pending, the
// others decided (ErrUsed). A refused decision writes nothing.
func (s *Store) DecideBackchannelRequest(ctx context.Context, id, uid string, d oauth.BackchannelDecision, now time.Time) (oauth.BackchannelRequest, error) {
	if err := checkDecision(d); err != nil {
		return oauth.BackchannelRequest{}, err
	}
	if err := requireOnceExpiry(d.Once); err != nil {
		return oauth.BackchannelRequest{}, err
	}
	var after oauth.BackchannelRequest
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		after = oauth.BackchannelRequest{} // fn may run again (see update): nothing from a run before
		if err := recordOnces(tx, d.Once, now); err != nil {
			return err
		}
		b, err := liveBackchannel(tx, id, now)
		if err != nil {
			return err
		}
		switch {
		case uid == "" || b.Request.UID != uid:
			return oauth.ErrNotFound
		case b.Request.State != oauth.CIBAPending:
			return oauth.ErrUsed
		case !live(b.Request.ExpiresAt, now):
			return oauth.ErrNotFound
		}
		b.Request.State, b.Request.Grant, b.Request.DecidedAt = oauth.CIBADenied, nil, now
		if d.Approve {
			b.Request.State, b.Request.Grant = oauth.CIBAApproved, d.Grant
		}
		after = b.Request
		return put(tx, bBackchannel, id, b)
	})
	if err != nil {
		return oauth.BackchannelRequest{}, fmt.Errorf("decide backchannel request: %w", err)
	}
	return after, nil
}

// checkDecision refuses, before any write, an approval that carries no grant (the poll that
// takes it would have nothing to issue) and a denial that carries one.
func checkDecision(d oauth.BackchannelDecision) error {
	if d.Approve != (d.Grant != nil) {
		return errors.New("decide backchannel request: an approval needs its grant and a denial has none")
	}
	return nil
}

// ConsumeBackchannelRequest turns an approved request into issued in one write transaction
// that records the once values first (oauth.BackchannelStore): of racing calls the first
// finds it approved, the others issued (ErrUsed, with the request). A refusal writes nothing.
func (s *Store) ConsumeBackchannelRequest(ctx context.Context, id, clientID string, now time.Time, once ...oauth.Once) (oauth.BackchannelRequest, error) {
	if err := requireOnceExpiry(once); err != nil {
		return oauth.BackchannelRequest{}, err
	}
	var got oauth.BackchannelRequest
	used := false
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		got, used = oauth.BackchannelRequest{}, false // fn may run again (see update)
		if err := recordOnces(tx, once, now); err != nil {
			return err
		}
		b, err := liveBackchannel(tx, id, now)
		if err != nil {
			return err
		}
		switch {
		case b.Request.ClientID != clientID:
			return oauth.ErrNotFound
		case b.Request.State == oauth.CIBAIssued:
			got, used = b.Request, true
			return oauth.ErrUsed
		case b.Request.State != oauth.CIBAApproved:
			return oauth.ErrNotFound
		}
		b.Request.State = oauth.CIBAIssued
		got = b.Request
		return put(tx, bBackchannel, id, b)
	})
	switch {
	case err == nil:
		return got, nil
	case used:
		return got, fmt.Errorf("consume backchannel request: %w", err)
	}
	return oauth.BackchannelRequest{}, fmt.Errorf("consume backchannel request: %w", err)
}

// ListBackchannelRequests lists a customer's pending, unexpired requests, oldest first. It
// reads every stored request: it serves the local bank app page, where requests are few.
func (s *Store) ListBackchannelRequests(ctx context.Context, uid string, now time.Time) ([]oauth.BackchannelRequest, error) {
	if uid == "" {
		return nil, nil
	}
	var out []oauth.BackchannelRequest
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return forEach(tx, bBackchannel, func(b *storedBackchannel) {
			r := b.Request
			if r.UID == uid && r.State == oauth.CIBAPending && live(r.ExpiresAt, now) && live(b.ExpiresAt, now) {
				out = append(out, r)
			}
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list backchannel requests: %w", err)
	}
	slices.SortFunc(out, func(a, b oauth.BackchannelRequest) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// errUnchanged ends a write transaction that has nothing to write, rolled back instead of
// committed, so a poll of a decided request leaves the file as it was.
var errUnchanged = errors.New("embedded store: nothing to write")

// liveBackchannel reads the request id inside tx: oauth.ErrNotFound when none is stored or it
// is past its KeepUntil.
func liveBackchannel(tx *bbolt.Tx, id string, now time.Time) (storedBackchannel, error) {
	var b storedBackchannel
	err := getLive(tx, bBackchannel, id, &b, &b.ExpiresAt, now)
	return b, err
}
