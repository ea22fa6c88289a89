package embedded_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// cibaRequest is a pending poll request of customer u1 by client cl_1, pollable at now.
func cibaRequest(now time.Time) oauth.BackchannelRequest {
	return oauth.BackchannelRequest{ID: oauth.BackchannelRequestID(oauth.NewSecret(oauth.PrefixAuthReqID)), ClientID: "cl_1", UID: "u1",
		Mode: oauth.CIBAModePoll, Interval: 5, State: oauth.CIBAPending, CreatedAt: now, NextPollAt: now,
		ExpiresAt: now.Add(2 * time.Minute), KeepUntil: now.Add(10 * time.Minute)}
}

// TestGarbageCollect_ForgetsABackchannelRequestAtKeepUntil: a CIBA request is kept past its
// ExpiresAt (an approved one is still issued, an expired auth_req_id still told from an unknown
// one) and deleted by the sweep at its KeepUntil, like the other short-lived items.
func TestGarbageCollect_ForgetsABackchannelRequestAtKeepUntil(t *testing.T) {
	s, _ := openTemp(t, embedded.Options{NoSync: true})
	now := time.Now().UTC().Truncate(time.Second)
	r := cibaRequest(now)
	if err := s.PutBackchannelRequest(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if n, err := s.GarbageCollect(r.KeepUntil.Add(-time.Second)); err != nil || n != 0 {
		t.Fatalf("GarbageCollect past ExpiresAt, before KeepUntil: %d, %v; want nothing deleted", n, err)
	}
	if n, err := s.GarbageCollect(r.KeepUntil); err != nil || n != 1 {
		t.Fatalf("GarbageCollect at KeepUntil: %d, %v; want the request deleted", n, err)
	}
	if _, err := s.GetBackchannelRequest(context.Background(), r.ID, now); !errors.Is(err, oauth.ErrNotFound) {
		t.Errorf("GetBackchannelRequest at its creation, after the sweep: %v, want ErrNotFound (deleted, not filtered)", err)
	}
}

// TestBackchannel_RefusedCallsAndPollsOfDecidedRequestsCommitNothing: a slow_down, a poll of a
// decided request, and refused decisions and consumptions leave the file without a commit.
func TestBackchannel_RefusedCallsAndPollsOfDecidedRequestsCommitNothing(t *testing.T) {
	s, _ := openTemp(t, embedded.Options{NoSync: true})
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	pending, decided := cibaRequest(now), cibaRequest(now)
	for _, r := range []oauth.BackchannelRequest{pending, decided} {
		if err := s.PutBackchannelRequest(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.PollBackchannelRequest(ctx, pending.ID, pending.ClientID, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DecideBackchannelRequest(ctx, decided.ID, decided.UID, oauth.BackchannelDecision{}, now); err != nil {
		t.Fatal(err)
	}
	before, err := s.Commits()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"slow_down": func() error {
			_, err := s.PollBackchannelRequest(ctx, pending.ID, pending.ClientID, now)
			return expectErr(err, oauth.ErrSlowDown)
		},
		"poll of a denied request": func() error {
			_, err := s.PollBackchannelRequest(ctx, decided.ID, decided.ClientID, now)
			return err
		},
		"another client's poll": func() error {
			_, err := s.PollBackchannelRequest(ctx, pending.ID, "cl_2", now.Add(time.Minute))
			return expectErr(err, oauth.ErrNotFound)
		},
		"second decision": func() error {
			_, err := s.DecideBackchannelRequest(ctx, decided.ID, decided.UID, oauth.BackchannelDecision{}, now)
			return expectErr(err, oauth.ErrUsed)
		},
		"another customer's decision": func() error {
			_, err := s.DecideBackchannelRequest(ctx, pending.ID, "u2", oauth.BackchannelDecision{}, now)
			return expectErr(err, oauth.ErrNotFound)
		},
		"an approval without a grant": func() error {
			_, err := s.DecideBackchannelRequest(ctx, pending.ID, pending.UID, oauth.BackchannelDecision{Approve: true}, now)
			if err == nil {
				return errors.New("accepted")
			}
			return nil
		},
		"consumption of a denied request": func() error {
			_, err := s.ConsumeBackchannelRequest(ctx, decided.ID, decided.ClientID, now, oauth.Once{Key: "dpop:k:j", Expires: now.Add(time.Minute)})
			return expectErr(err, oauth.ErrNotFound)
		},
	}
	for name, call := range calls {
		if err := call(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if after, err := s.Commits(); err != nil || after != before {
		t.Errorf("commits went from %d to %d (%v), want none", before, after, err)
	}
}

// expectErr is nil when err is want, else an error saying what came instead.
func expectErr(err, want error) error {
	if errors.Is(err, want) {
		return nil
	}
	return errors.New("got " + errString(err) + ", want " + want.Error())
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}
