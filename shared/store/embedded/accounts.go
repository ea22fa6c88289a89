package embedded

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/acmebank/authserver/shared/oauth"
)

// errIdentityChange refuses an UpdateUser whose fn changed the uid or the username: the
// username index would go stale.
var errIdentityChange = errors.New("an update may not change the uid or the username")

// casAttempts bounds the retries of an update that keeps losing races.
const casAttempts = 10

// GetClient returns a registered client.
func (s *Store) GetClient(ctx context.Context, id string) (oauth.Client, error) {
	var c oauth.Client
	err := s.view(ctx, func(tx *bbolt.Tx) error { return mustGet(tx, bClients, id, &c) })
	return c, err
}

// CreateClient stores a new client; ErrAlreadyExists when the id is taken.
func (s *Store) CreateClient(ctx context.Context, c oauth.Client) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		if tx.Bucket(bClients).Get([]byte(c.ID)) != nil {
			return oauth.ErrAlreadyExists
		}
		return put(tx, bClients, c.ID, c)
	})
}

// UpdateClient applies fn to the stored client as a compare-and-swap: fn runs outside any
// transaction, and its result is written only if the client is still the one it was given.
func (s *Store) UpdateClient(ctx context.Context, id string, fn func(oauth.Client) (oauth.Client, error)) error {
	return s.compareAndSwap(ctx, bClients, id, func(raw []byte) (any, error) {
		var c oauth.Client
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("embedded store: decode a value of %s: %w", bClients, err)
		}
		next, err := fn(c)
		if err != nil {
			return nil, err
		}
		if next.ID != id {
			return nil, errors.New("embedded store: an update may not change the client id")
		}
		return next, nil
	})
}

// DeleteClient deletes a client; an unknown one is not an error.
func (s *Store) DeleteClient(ctx context.Context, id string) error {
	return s.update(ctx, func(tx *bbolt.Tx) error { return del(tx, bClients, id) })
}

// ListClients lists every client, ordered by id.
func (s *Store) ListClients(ctx context.Context) ([]oauth.Client, error) {
	var out []oauth.Client
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return forEach(tx, bClients, func(c *oauth.Client) { out = append(out, *c) })
	})
	return out, err
}

// GetUser returns a user by uid.
func (s *Store) GetUser(ctx context.Context, uid string) (oauth.User, error) {
	var u oauth.User
	err := s.view(ctx, func(tx *bbolt.Tx) error { return mustGet(tx, bUsers, uid, &u) })
	return u, err
}

// GetUserByUsername returns a user by username, through the username index.
func (s *Store) GetUserByUsername(ctx context.Context, username string) (oauth.User, error) {
	var u oauth.User
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		uid := tx.Bucket(bUsernames).Get([]byte(username))
		if uid == nil {
			return oauth.ErrNotFound
		}
		return mustGet(tx, bUsers, string(uid), &u)
	})
	return u, err
}

// CreateUser stores a new user; ErrAlreadyExists when the uid or the username is taken.
func (s *Store) CreateUser(ctx context.Context, u oauth.User) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		names := tx.Bucket(bUsernames)
		if tx.Bucket(bUsers).Get([]byte(u.UID)) != nil || names.Get([]byte(u.Username)) != nil {
			return oauth.ErrAlreadyExists
		}
		if err := names.Put([]byte(u.Username), []byte(u.UID)); err != nil {
			return err
		}
		return put(tx, bUsers, u.UID, u)
	})
}

// UpdateUser applies fn to the stored user as a compare-and-swap (see UpdateClient); fn may
// not change the uid or the username.
func (s *Store) UpdateUser(ctx context.Context, uid string, fn func(oauth.User) (oauth.User, error)) error {
	return s.compareAndSwap(ctx, bUsers, uid, func(raw []byte) (any, error) {
		var u oauth.User
		if err := json.Unmarshal(raw, &u); err != nil {
			return nil, fmt.Errorf("embedded store: decode a value of %s: %w", bUsers, err)
		}
		next, err := fn(u)
		if err != nil {
			return nil, err
		}
		if next.UID != u.UID || next.Username != u.Username {
			return nil, fmt.Errorf("embedded store: update user: %w", errIdentityChange)
		}
		return next, nil
	})
}

// DeleteUser deletes a user and frees the username; an unknown one is not an error.
func (s *Store) DeleteUser(ctx context.Context, uid string) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		var u oauth.User
		ok, err := get(tx, bUsers, uid, &u)
		if err != nil || !ok {
			return err
		}
		names := tx.Bucket(bUsernames)
		if string(names.Get([]byte(u.Username))) == uid {
			if err := names.Delete([]byte(u.Username)); err != nil {
				return err
			}
		}
		return del(tx, bUsers, uid)
	})
}

// ListUsers lists every user, ordered by uid.
func (s *Store) ListUsers(ctx context.Context) ([]oauth.User, error) {
	var out []oauth.User
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return forEach(tx, bUsers, func(u *oauth.User) { out = append(out, *u) })
	})
	return out, err
}

// mustGet is get with ErrNotFound when there is no value.
func mustGet(tx *bbolt.Tx, bucket []byte, key string, v any) error {
	ok, err := get(tx, bucket, key, v)
	if err == nil && !ok {
		return oauth.ErrNotFound
	}
	return err
}

// compareAndSwap reads the value under key, makes its successor with next outside any
// transaction (next may be slow or call the store), and writes it only if the stored value is
// still the one read; otherwise it tries again, up to casAttempts times, then ErrConflict.
func (s *Store) compareAndSwap(ctx context.Context, bucket []byte, key string, next func(raw []byte) (any, error)) error {
	for range casAttempts {
		var cur []byte
		err := s.view(ctx, func(tx *bbolt.Tx) error {
			v := tx.Bucket(bucket).Get([]byte(key))
			if v == nil {
				return oauth.ErrNotFound
			}
			cur = bytes.Clone(v) // bbolt's value lives only as long as its transaction
			return nil
		})
		if err != nil {
			return err
		}
		v, err := next(cur)
		if err != nil {
			return err
		}
		stale := false
		err = s.update(ctx, func(tx *bbolt.Tx) error {
			stale = false // fn may run again (see update): nothing from a run before
			switch now := tx.Bucket(bucket).Get([]byte(key)); {
			case now == nil:
				return oauth.ErrNotFound
			case !bytes.Equal(now, cur):
				stale = true
				return nil
			}
			return put(tx, bucket, key, v)
		})
		if err != nil || !stale {
			return err
		}
	}
	return oauth.ErrConflict
}
