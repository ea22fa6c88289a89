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
	p, err := s.readClient(ctx, id)
	if err != nil {
		return oauth.Client{}, err
	}
	return cloneClient(*p), nil
}

func (s *Store) readClient(ctx context.Context, id string) (*oauth.Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.log.usable(); err != nil {
		return nil, err
	}
	p, ok := s.clients[id]
	if !ok {
		return nil, oauth.ErrNotFound
	}
	return p, nil
}

// CreateClient stores a new client; ErrAlreadyExists when the id is taken.
func (s *Store) CreateClient(ctx context.Context, c oauth.Client) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	body, err := appendJSON(nil, kindClient, c.ID, &c)
	if err != nil {
		return fmt.Errorf("embedded store: create client: %w", err)
	}
	c = cloneClient(c)
	s.mu.Lock()
	if err := s.log.usable(); err != nil {
		s.mu.Unlock()
		return err
	}
	if _, ok := s.clients[c.ID]; ok {
		s.mu.Unlock()
		return oauth.ErrAlreadyExists
	}
	s.clients[c.ID] = &c
	b := s.log.append(body)
	s.mu.Unlock()
	return s.log.commit(b)
}

// UpdateClient applies fn to the stored client as a compare-and-swap: fn runs without the lock,
// and its result is written only if the client is still the one it was given.
func (s *Store) UpdateClient(ctx context.Context, id string, fn func(oauth.Client) (oauth.Client, error)) error {
	for range casAttempts {
		cur, err := s.readClient(ctx, id)
		if err != nil {
			return err
		}
		next, err := fn(cloneClient(*cur))
		if err != nil {
			return err
		}
		if next.ID != id {
			return errors.New("embedded store: an update may not change the client id")
		}
		body, err := appendJSON(nil, kindClient, id, &next)
		if err != nil {
			return fmt.Errorf("embedded store: update client: %w", err)
		}
		next = cloneClient(next)
		s.mu.Lock()
		if err := s.log.usable(); err != nil {
			s.mu.Unlock()
			return err
		}
		switch now, ok := s.clients[id]; {
		case !ok:
			s.mu.Unlock()
			return oauth.ErrNotFound
		case now != cur:
			s.mu.Unlock()
			continue
		}
		s.clients[id] = &next
		b := s.log.append(body)
		s.mu.Unlock()
		return s.log.commit(b)
	}
	return oauth.ErrConflict
}

// DeleteClient deletes a client; an unknown one is not an error.
func (s *Store) DeleteClient(ctx context.Context, id string) error {
	return s.deleteItem(ctx, kindClient, id)
}

// ListClients lists every client, ordered by id.
func (s *Store) ListClients(ctx context.Context) ([]oauth.Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	if err := s.log.usable(); err != nil {
		s.mu.RUnlock()
		return nil, err
	}
	out := make([]oauth.Client, 0, len(s.clients))
	for _, c := range s.clients {
		out = append(out, cloneClient(*c))
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b oauth.Client) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// GetUser returns a user by uid.
func (s *Store) GetUser(ctx context.Context, uid string) (oauth.User, error) {
	p, err := s.readUser(ctx, uid, "")
	if err != nil {
		return oauth.User{}, err
	}
	return *p, nil
}

// GetUserByUsername returns a user by username.
func (s *Store) GetUserByUsername(ctx context.Context, username string) (oauth.User, error) {
	p, err := s.readUser(ctx, "", username)
	if err != nil {
		return oauth.User{}, err
	}
	return *p, nil
}

// readUser returns the stored user of uid, or of username when uid is empty.
func (s *Store) readUser(ctx context.Context, uid, username string) (*oauth.User, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.log.usable(); err != nil {
		return nil, err
	}
	if uid == "" {
		var ok bool
		if uid, ok = s.names[username]; !ok {
			return nil, oauth.ErrNotFound
		}
	}
	p, ok := s.users[uid]
	if !ok {
		return nil, oauth.ErrNotFound
	}
	return p, nil
}

// CreateUser stores a new user; ErrAlreadyExists when the uid or the username is taken.
func (s *Store) CreateUser(ctx context.Context, u oauth.User) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	body, err := appendJSON(nil, kindUser, u.UID, &u)
	if err != nil {
		return fmt.Errorf("embedded store: create user: %w", err)
	}
	s.mu.Lock()
	if err := s.log.usable(); err != nil {
		s.mu.Unlock()
		return err
	}
	_, uidTaken := s.users[u.UID]
	_, nameTaken := s.names[u.Username]
	if uidTaken || nameTaken {
		s.mu.Unlock()
		return oauth.ErrAlreadyExists
	}
	s.setUser(&u)
	b := s.log.append(body)
	s.mu.Unlock()
	return s.log.commit(b)
}

// UpdateUser applies fn to the stored user as a compare-and-swap (see UpdateClient); fn may
// not change the uid or the username.
func (s *Store) UpdateUser(ctx context.Context, uid string, fn func(oauth.User) (oauth.User, error)) error {
	for range casAttempts {
		cur, err := s.readUser(ctx, uid, "")
		if err != nil {
			return err
		}
		next, err := fn(*cur)
		if err != nil {
			return err
		}
		if next.UID != cur.UID || next.Username != cur.Username {
			return fmt.Errorf("embedded store: update user: %w", errIdentityChange)
		}
		body, err := appendJSON(nil, kindUser, uid, &next)
		if err != nil {
			return fmt.Errorf("embedded store: update user: %w", err)
		}
		s.mu.Lock()
		if err := s.log.usable(); err != nil {
			s.mu.Unlock()
			return err
		}
		switch now, ok := s.users[uid]; {
		case !ok:
			s.mu.Unlock()
			return oauth.ErrNotFound
		case now != cur:
			s.mu.Unlock()
			continue
		}
		s.setUser(&next)
		b := s.log.append(body)
		s.mu.Unlock()
		return s.log.commit(b)
	}
	return oauth.ErrConflict
}

// DeleteUser deletes a user and frees the username; an unknown one is not an error.
func (s *Store) DeleteUser(ctx context.Context, uid string) error {
	return s.deleteItem(ctx, kindUser, uid)
}

// ListUsers lists every user, ordered by uid.
func (s *Store) ListUsers(ctx context.Context) ([]oauth.User, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	if err := s.log.usable(); err != nil {
		s.mu.RUnlock()
		return nil, err
	}
	out := make([]oauth.User, 0, len(s.users))
	for _, u := range s.users {
		out = append(out, *u)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b oauth.User) int { return strings.Compare(a.UID, b.UID) })
	return out, nil
}

// deleteItem deletes the item of kind under key, logging it only when there was one.
func (s *Store) deleteItem(ctx context.Context, kind byte, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var small [128]byte
	s.mu.Lock()
	if err := s.log.usable(); err != nil {
		s.mu.Unlock()
		return err
	}
	var found bool
	switch kind {
	case kindClient:
		_, found = s.clients[key]
		delete(s.clients, key)
	case kindUser:
		_, found = s.users[key]
		s.deleteUser(key)
	case kindToken:
		_, found = s.tokens[key]
		delete(s.tokens, key)
	case kindRequest:
		_, found = s.requests[key]
		delete(s.requests, key)
	case kindSession:
		_, found = s.sessions[key]
		delete(s.sessions, key)
	case kindFailure:
		_, found = s.failures[key]
		delete(s.failures, key)
	}
	if !found {
		s.mu.Unlock()
		return nil
	}
	b := s.log.append(appendEntry(small[:0], kind, opDelete, key, nil))
	s.mu.Unlock()
	return s.log.commit(b)
}
