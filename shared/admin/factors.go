package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// UserFactors returns a user's second factors (passkeys, the authenticator app and its
// recovery codes), for operators: never a secret, only what each factor is and when it was
// used.
func (s *Service) UserFactors(ctx context.Context, ref string) (oauth.User, oauth.UserFactors, error) {
	u, err := s.FindUser(ctx, ref)
	if err != nil {
		return oauth.User{}, oauth.UserFactors{}, err
	}
	f, err := s.Store.Factors(ctx, u.UID)
	if err != nil {
		return u, oauth.UserFactors{}, fmt.Errorf("factors of %s: %w", u.UID, err)
	}
	return u, f, nil
}

// RemoveFactor removes one of a user's factors (a lost phone, a passkey on a device given
// away); removing the authenticator app removes its recovery codes. An unknown id is
// ErrNotFound and changes nothing.
func (s *Service) RemoveFactor(ctx context.Context, ref, factorID string) (oauth.User, error) {
	u, err := s.FindUser(ctx, ref)
	if err != nil {
		return oauth.User{}, err
	}
	err = s.updateFactors(ctx, u.UID, func(f oauth.UserFactors) (oauth.UserFactors, error) {
		i := slices.IndexFunc(f.Factors, func(x oauth.Factor) bool { return x.ID == factorID })
		if i < 0 {
			return f, fmt.Errorf("user %s has no factor %q: %w", u.UID, factorID, oauth.ErrNotFound)
		}
		f.Factors = slices.Delete(f.Factors, i, i+1)
		f.RemovedAt = s.now() // the sessions it made strong are strong no more
		return f, nil
	})
	if err != nil {
		return u, err
	}
	s.audit(ctx, "factor_remove", "", u.UID)
	return u, nil
}

// ResetFactors removes every second factor of a user, after the bank has checked who they
// are by other means: the next sign-in that needs strong authentication sets a factor up
// again. The user's grants are kept; revoke them with the grants commands if the factors
// were compromised.
func (s *Service) ResetFactors(ctx context.Context, ref string) (oauth.User, int, error) {
	u, err := s.FindUser(ctx, ref)
	if err != nil {
		return oauth.User{}, 0, err
	}
	n := 0
	err = s.updateFactors(ctx, u.UID, func(f oauth.UserFactors) (oauth.UserFactors, error) {
		n = len(f.Factors)
		f.Factors = []oauth.Factor{}
		f.LastStrongAuth = time.Time{} // as if the user never signed in strongly
		f.RemovedAt = s.now()          // and no session of theirs is strong any more
		return f, nil
	})
	if err != nil {
		return u, 0, err
	}
	s.audit(ctx, "factor_reset", "", u.UID)
	return u, n, nil
}

// updateFactors retries a factor change lost to a racing sign-in.
func (s *Service) updateFactors(ctx context.Context, uid string, fn func(oauth.UserFactors) (oauth.UserFactors, error)) error {
	var err error
	for range 5 {
		if err = s.Store.UpdateFactors(ctx, uid, fn); err == nil || !errors.Is(err, oauth.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("factors of %s changed concurrently; try again: %w", uid, err)
}
