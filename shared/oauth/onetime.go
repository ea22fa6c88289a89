package oauth

import (
	"context"
	"errors"
	"sync"
	"time"
)

// OneTime is a one-time value a request presented (a DPoP proof's jti, a client assertion's
// jti), checked but not yet recorded. A request records its one-time values only once
// everything else about it has been checked, so a refused request writes nothing: a made-up
// token sent with a valid self-made proof costs a read, never a write. A token request
// records them in the write that spends its code or refresh token (onces, replayRefusal);
// other requests with Service.Record. The zero OneTime is no value and records nothing.
type OneTime struct {
	key     string
	expires time.Time
	// reused is the refusal when the value was already used.
	reused *Error
}

// IsZero reports whether o is no value.
func (o OneTime) IsZero() bool { return o.key == "" }

// Record records the one-time values of a request that has passed every other check, each with
// one conditional write; two or more are written at once, so a request waits for one round
// trip. A value already used gives its refusal (invalid_dpop_proof, invalid_client); of racing
// requests presenting the same value exactly one succeeds (ReplayStore.UseOnce).
func (s *Service) Record(ctx context.Context, values ...OneTime) error {
	live := make([]OneTime, 0, len(values))
	for _, v := range values {
		if !v.IsZero() {
			live = append(live, v)
		}
	}
	switch len(live) {
	case 0:
		return nil
	case 1:
		return s.record(ctx, live[0])
	}
	errs := make([]error, len(live))
	var wg sync.WaitGroup
	for i, v := range live {
		wg.Go(func() { errs[i] = s.record(ctx, v) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) record(ctx context.Context, v OneTime) error {
	err := s.Replay.UseOnce(ctx, v.key, v.expires, s.now())
	if errors.Is(err, ErrUsed) {
		return v.reused
	}
	if err != nil {
		return AsError(err)
	}
	return nil
}

// onces returns the store's form of values (the non-zero ones), for a store to record in the
// write that spends the request's code or refresh token (GrantStore.ConsumeCode, Issue.Once).
func onces(values []OneTime) []Once {
	var out []Once // nil when there is none
	for _, v := range values {
		if v.IsZero() {
			continue
		}
		if out == nil {
			out = make([]Once, 0, len(values)) // one allocation for a FAPI request's proof and assertion
		}
		out = append(out, Once{Key: v.key, Expires: v.expires})
	}
	return out
}

// replayRefusal returns the refusal of the value err reports as used before (a
// *ReplayedError from a store's write), or nil: invalid_dpop_proof or invalid_client, as
// Record answers.
func replayRefusal(values []OneTime, err error) error {
	var r *ReplayedError
	if !errors.As(err, &r) {
		return nil
	}
	for _, v := range values {
		if !v.IsZero() && v.key == r.Key {
			return v.reused
		}
	}
	return AsError(err)
}
