package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/acmebank/authserver/shared/oauth"
)

// errIdentityChange refuses an UpdateUser whose fn changed the uid or the username: the
// username index would go stale.
var errIdentityChange = errors.New("an update may not change the uid or the username")

// GetClient returns a registered client.
func (s *Store) GetClient(ctx context.Context, id string) (oauth.Client, error) {
	var c oauth.Client
	if err := s.getPlain(ctx, bClients, id, &c); err != nil {
		return oauth.Client{}, notFoundOr("get client", err)
	}
	return c, nil
}

// CreateClient registers a client; a taken id is ErrAlreadyExists.
func (s *Store) CreateClient(ctx context.Context, c oauth.Client) error {
	val, err := encode(c, time.Time{}, 0)
	if err != nil {
		return fmt.Errorf("bolt: create client: %w", err)
	}
	var result error
	err = s.write(ctx, func(tx *bbolt.Tx) error {
		result = nil
		b := tx.Bucket(bClients)
		if b.Get([]byte(c.ID)) != nil {
			result = oauth.ErrAlreadyExists
			return nil
		}
		return put(tx, bClients, 0, []byte(c.ID), val)
	})
	if err != nil {
		return fmt.Errorf("bolt: create client: %w", err)
	}
	return result
}

// UpdateClient applies fn to the stored client by compare-and-swap: fn runs outside any
// transaction (so it may take its time, or even read the store), and its result is written only
// if the client is unchanged since it was read; otherwise fn runs again on the new value, up to
// casAttempts times, then ErrConflict.
func (s *Store) UpdateClient(ctx context.Context, id string, fn func(oauth.Client) (oauth.Client, error)) error {
	err := s.compareAndSwap(ctx, bClients, []byte(id), func(body []byte) ([]byte, error) {
		var c oauth.Client
		if err := decode(body, &c); err != nil {
			return nil, err
		}
		next, err := fn(c)
		if err != nil {
			return nil, err
		}
		if next.ID != id {
			return nil, errors.New("an update may not change the client id")
		}
		return encode(next, time.Time{}, 0)
	})
	if err != nil {
		return notFoundOr("update client", err)
	}
	return nil
}

// DeleteClient removes a client; an unknown one is not an error.
func (s *Store) DeleteClient(ctx context.Context, id string) error {
	err := s.write(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bClients).Delete([]byte(id))
	})
	if err != nil {
		return fmt.Errorf("bolt: delete client: %w", err)
	}
	return nil
}

// ListClients returns every client, ordered by id.
func (s *Store) ListClients(ctx context.Context) ([]oauth.Client, error) {
	var out []oauth.Client
	err := s.read(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bClients).ForEach(func(k, v []byte) error {
			r, err := split(v)
			if err != nil {
				return err
			}
			var c oauth.Client
			if err := decode(r.body, &c); err != nil {
				return err
			}
			out = append(out, c)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("bolt: list clients: %w", err)
	}
	return out, nil
}

// GetUser returns a user by uid.
func (s *Store) GetUser(ctx context.Context, uid string) (oauth.User, error) {
	var u oauth.User
	if err := s.getPlain(ctx, bUsers, uid, &u); err != nil {
		return oauth.User{}, notFoundOr("get user", err)
	}
	return u, nil
}

// GetUserByUsername returns a user through the username index, in one read transaction.
func (s *Store) GetUserByUsername(ctx context.Context, username string) (oauth.User, error) {
	var u oauth.User
	err := s.read(ctx, func(tx *bbolt.Tx) error {
		uid := tx.Bucket(bUsernames).Get([]byte(username))
		if uid == nil {
			return oauth.ErrNotFound
		}
		r, ok, err := getRaw(tx.Bucket(bUsers), uid)
		if err != nil {
			return err
		}
		if !ok {
			return oauth.ErrNotFound
		}
		return decode(r.body, &u)
	})
	if err != nil {
		return oauth.User{}, notFoundOr("get user by username", err)
	}
	return u, nil
}

// CreateUser adds a user; a taken uid or username is ErrAlreadyExists.
func (s *Store) CreateUser(ctx context.Context, u oauth.User) error {
	val, err := encode(u, time.Time{}, 0)
	if err != nil {
		return fmt.Errorf("bolt: create user: %w", err)
	}
	var result error
	err = s.write(ctx, func(tx *bbolt.Tx) error {
		result = nil
		names := tx.Bucket(bUsernames)
		if tx.Bucket(bUsers).Get([]byte(u.UID)) != nil || names.Get([]byte(u.Username)) != nil {
			result = oauth.ErrAlreadyExists
			return nil
		}
		if err := names.Put([]byte(u.Username), []byte(u.UID)); err != nil {
			return fmt.Errorf("index username: %w", err)
		}
		return put(tx, bUsers, 0, []byte(u.UID), val)
	})
	if err != nil {
		return fmt.Errorf("bolt: create user: %w", err)
	}
	return result
}

// UpdateUser applies fn to the stored user by compare-and-swap, as UpdateClient does; fn may
// not change the uid or the username.
func (s *Store) UpdateUser(ctx context.Context, uid string, fn func(oauth.User) (oauth.User, error)) error {
	err := s.compareAndSwap(ctx, bUsers, []byte(uid), func(body []byte) ([]byte, error) {
		var u oauth.User
		if err := decode(body, &u); err != nil {
			return nil, err
		}
		next, err := fn(u)
		if err != nil {
			return nil, err
		}
		if next.UID != u.UID || next.Username != u.Username {
			return nil, errIdentityChange
		}
		return encode(next, time.Time{}, 0)
	})
	if err != nil {
		return notFoundOr("update user", err)
	}
	return nil
}

// casAttempts bounds the retries of a compare-and-swap that keeps losing its race.
const casAttempts = 10

// compareAndSwap reads the value under key, computes its replacement with update outside any
// transaction, and writes it only if the stored value is still the one read. ErrNotFound when
// there is no value; ErrConflict after casAttempts lost races.
func (s *Store) compareAndSwap(ctx context.Context, bucket, key []byte, update func(body []byte) ([]byte, error)) error {
	for range casAttempts {
		pre, err := s.readCopy(ctx, bucket, key)
		if err != nil {
			return err
		}
		if pre.val == nil {
			return oauth.ErrNotFound
		}
		val, err := update(pre.val[headerLen:])
		if err != nil {
			return err
		}
		var result error
		err = s.write(ctx, func(tx *bbolt.Tx) error {
			result = nil
			b := tx.Bucket(bucket)
			cur := b.Get(key)
			switch {
			case cur == nil:
				result = oauth.ErrNotFound
				return nil
			case !bytes.Equal(cur, pre.val):
				result = oauth.ErrConflict
				return nil
			}
			return put(tx, bucket, 0, key, val)
		})
		if err != nil {
			return err
		}
		if !errors.Is(result, oauth.ErrConflict) {
			return result
		}
	}
	return oauth.ErrConflict
}

// DeleteUser removes a user and frees the username; an unknown uid is not an error.
func (s *Store) DeleteUser(ctx context.Context, uid string) error {
	err := s.write(ctx, func(tx *bbolt.Tx) error {
		users := tx.Bucket(bUsers)
		r, ok, err := getRaw(users, []byte(uid))
		if err != nil || !ok {
			return err
		}
		var u oauth.User
		if err := decode(r.body, &u); err != nil {
			return err
		}
		names := tx.Bucket(bUsernames)
		if string(names.Get([]byte(u.Username))) == uid {
			if err := names.Delete([]byte(u.Username)); err != nil {
				return fmt.Errorf("unindex username: %w", err)
			}
		}
		return users.Delete([]byte(uid))
	})
	if err != nil {
		return fmt.Errorf("bolt: delete user: %w", err)
	}
	return nil
}

// ListUsers returns every user, ordered by uid.
func (s *Store) ListUsers(ctx context.Context) ([]oauth.User, error) {
	var out []oauth.User
	err := s.read(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bUsers).ForEach(func(k, v []byte) error {
			r, err := split(v)
			if err != nil {
				return err
			}
			var u oauth.User
			if err := decode(r.body, &u); err != nil {
				return err
			}
			out = append(out, u)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("bolt: list users: %w", err)
	}
	return out, nil
}

// getPlain reads an item that never expires.
func (s *Store) getPlain(ctx context.Context, bucket []byte, key string, v any) error {
	return s.read(ctx, func(tx *bbolt.Tx) error {
		r, ok, err := getRaw(tx.Bucket(bucket), []byte(key))
		if err != nil {
			return err
		}
		if !ok {
			return oauth.ErrNotFound
		}
		return decode(r.body, v)
	})
}
