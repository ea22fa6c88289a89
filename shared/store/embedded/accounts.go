package embedded

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/acmebank/authserver/shared/oauth"
)

// Clients and users are replaced whole on every change (never changed in place), so an update
// can tell whether the item it read is still the stored one by comparing pointers.

var errIdentityChange = errors.New("an update may not change the uid or the username")

// casAttempts bounds the retries of an update that keeps losing races.
const casAttempts = 10

// GetClient returns a registered client.
func (s *Store) GetClient(ctx context.Context, id string) (oauth.Client, error) {
	p, err := lookup(ctx, s, s.clients, id)
	if err != nil {
		return oauth.Client{}, err
	}
	return cloneClient(*p), nil
}

// CreateClient stores a new client; ErrAlreadyExists when the id is taken.
func (s *Store) CreateClient(ctx context.Context, c oauth.Client) error {
	body, err := appendJSON(nil, kindClient, c.ID, &c)
	if err != nil {
		return fmt.Errorf("embedded store: create client: %w", err)
	}
	c = cloneClient(c)
	return s.change(ctx, func() ([]byte, error) {
		if _, ok := s.clients[c.ID]; ok {
			return nil, oauth.ErrAlreadyExists
		}
		s.clients[c.ID] = &c
		return body, nil
	})
}

// UpdateClient applies fn to the stored client as a compare-and-swap: fn runs without the lock,
// and its result is written only if the client is still the one it was given.
func (s *Store) UpdateClient(ctx context.Context, id string, fn func(oauth.Client) (oauth.Client, error)) error {
	return compareAndSwap(ctx, s, s.clients, id, func(cur *oauth.Client) (*oauth.Client, []byte, error) {
		next, err := fn(cloneClient(*cur))
		if err != nil {
			return nil, nil, err
		}
		if next.ID != id {
			return nil, nil, errors.New("embedded store: an update may not change the client id")
		}
		body, err := appendJSON(nil, kindClient, id, &next)
		if err != nil {
			return nil, nil, fmt.Errorf("embedded store: update client: %w", err)
		}
		next = cloneClient(next)
		return &next, body, nil
	}, func(c *oauth.Client) { s.clients[id] = c })
}

// compareAndSwap reads the item under key, makes its successor with update (without the lock:
// update may be slow or call the store), and stores it with set and its frame only if the item
// is still the one read; otherwise it tries again, up to casAttempts times.
func compareAndSwap[T any](ctx context.Context, s *Store, items map[string]*T, key string,
	update func(cur *T) (next *T, body []byte, err error), set func(*T)) error {
	for range casAttempts {
		cur, err := lookup(ctx, s, items, key)
		if err != nil {
			return err
		}
		next, body, err := update(cur)
		if err != nil {
			return err
		}
		err = s.change(ctx, func() ([]byte, error) {
			switch now, ok := items[key]; {
			case !ok:
				return nil, oauth.ErrNotFound
			case now != cur:
				return nil, errStale
			}
			set(next)
			return body, nil
		})
		if !errors.Is(err, errStale) {
			return err
		}
	}
	return oauth.ErrConflict
}

// DeleteClient deletes a client; an unknown one is not an error.
func (s *Store) DeleteClient(ctx context.Context, id string) error {
	return s.deleteItem(ctx, kindClient, id)
}

// ListClients lists every client, ordered by id.
func (s *Store) ListClients(ctx context.Context) ([]oauth.Client, error) {
	var out []oauth.Client
	err := s.view(ctx, func() error {
		out = make([]oauth.Client, 0, len(s.clients))
		for _, c := range s.clients {
			out = append(out, cloneClient(*c))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b oauth.Client) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// GetUser returns a user by uid.
func (s *Store) GetUser(ctx context.Context, uid string) (oauth.User, error) {
	p, err := lookup(ctx, s, s.users, uid)
	if err != nil {
		return oauth.User{}, err
	}
	return *p, nil
}

// GetUserByUsername returns a user by username.
func (s *Store) GetUserByUsername(ctx context.Context, username string) (oauth.User, error) {
	var u oauth.User
	err := s.view(ctx, func() error {
		uid, ok := s.names[username]
		if !ok {
			return oauth.ErrNotFound
		}
		u = *s.users[uid]
		return nil
	})
	return u, err
}

// CreateUser stores a new user; ErrAlreadyExists when the uid or the username is taken.
func (s *Store) CreateUser(ctx context.Context, u oauth.User) error {
	body, err := appendJSON(nil, kindUser, u.UID, &u)
	if err != nil {
		return fmt.Errorf("embedded store: create user: %w", err)
	}
	return s.change(ctx, func() ([]byte, error) {
		_, uidTaken := s.users[u.UID]
		_, nameTaken := s.names[u.Username]
		if uidTaken || nameTaken {
			return nil, oauth.ErrAlreadyExists
		}
		s.setUser(&u)
		return body, nil
	})
}

// UpdateUser applies fn to the stored user as a compare-and-swap (see UpdateClient); fn may
// not change the uid or the username.
func (s *Store) UpdateUser(ctx context.Context, uid string, fn func(oauth.User) (oauth.User, error)) error {
	return compareAndSwap(ctx, s, s.users, uid, func(cur *oauth.User) (*oauth.User, []byte, error) {
		next, err := fn(*cur)
		if err != nil {
			return nil, nil, err
		}
		if next.UID != cur.UID || next.Username != cur.Username {
			return nil, nil, fmt.Errorf("embedded store: update user: %w", errIdentityChange)
		}
		body, err := appendJSON(nil, kindUser, uid, &next)
		if err != nil {
			return nil, nil, fmt.Errorf("embedded store: update user: %w", err)
		}
		return &next, body, nil
	}, s.setUser)
}

// DeleteUser deletes a user and frees the username; an unknown one is not an error.
func (s *Store) DeleteUser(ctx context.Context, uid string) error {
	return s.deleteItem(ctx, kindUser, uid)
}

// ListUsers lists every user, ordered by uid.
func (s *Store) ListUsers(ctx context.Context) ([]oauth.User, error) {
	var out []oauth.User
	err := s.view(ctx, func() error {
		out = make([]oauth.User, 0, len(s.users))
		for _, u := range s.users {
			out = append(out, *u)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b oauth.User) int { return strings.Compare(a.UID, b.UID) })
	return out, nil
}

// deleteItem deletes the item of kind under key, logging it only when there was one.
func (s *Store) deleteItem(ctx context.Context, kind byte, key string) error {
	var small [128]byte
	return s.change(ctx, func() ([]byte, error) {
		if found, err := s.remove(kind, key); !found || err != nil {
			return nil, err
		}
		return appendEntry(small[:0], kind, opDelete, key, nil), nil
	})
}
