package regional_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/regional"
)

// backchannelAt is a pending CIBA request whose auth_req_id (and so its ID) carries home.
func backchannelAt(home string, now time.Time) oauth.BackchannelRequest {
	id := oauth.BackchannelRequestID(oauth.PrefixAuthReqID + home + "." + oauth.NewSecret(""))
	return oauth.BackchannelRequest{ID: id, ClientID: "cl_1", UID: "u1", Mode: oauth.CIBAModePoll, Interval: 5,
		State: oauth.CIBAPending, CreatedAt: now, NextPollAt: now, ExpiresAt: now.Add(time.Minute), KeepUntil: now.Add(time.Hour)}
}

// putBoth stores r in each of stores.
func putBoth(t *testing.T, r oauth.BackchannelRequest, stores ...oauth.Store) {
	t.Helper()
	for _, s := range stores {
		if err := s.PutBackchannelRequest(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
}

// approve is the device's approval of r.
func approve(r oauth.BackchannelRequest, now time.Time) oauth.BackchannelDecision {
	return oauth.BackchannelDecision{Approve: true, Grant: &oauth.Grant{ID: oauth.NewID(oauth.PrefixGrant), ClientID: r.ClientID, UID: r.UID,
		AMR: []string{"pwd", "otp", oauth.AMRMFA}, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}}
}

// stateIn is r's state in store s ("" when s does not have it).
func stateIn(t *testing.T, s oauth.Store, id string, now time.Time) string {
	t.Helper()
	got, err := s.GetBackchannelRequest(context.Background(), id, now)
	if errors.Is(err, oauth.ErrNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return got.State
}

func init() {
	reachesHome["PutBackchannelRequest"] = func(t *testing.T, w twoRegions, ctx context.Context) {
		r := backchannelAt(peer, w.now)
		if err := w.st.PutBackchannelRequest(ctx, r); err != nil {
			t.Fatal(err)
		}
		if stateIn(t, w.remote, r.ID, w.now) != oauth.CIBAPending {
			t.Error("peer's replica: want the request stored there")
		}
		if stateIn(t, w.local, r.ID, w.now) != "" {
			t.Error("local replica: want no request")
		}
	}
	reachesHome["GetBackchannelRequest"] = func(t *testing.T, w twoRegions, ctx context.Context) {
		r := backchannelAt(peer, w.now)
		putBoth(t, r, w.remote)
		if _, err := w.st.GetBackchannelRequest(ctx, r.ID, w.now); err != nil {
			t.Errorf("a request only the peer's replica has: %v, want it read there", err)
		}
	}
	reachesHome["PollBackchannelRequest"] = func(t *testing.T, w twoRegions, ctx context.Context) {
		r := backchannelAt(peer, w.now)
		putBoth(t, r, w.local, w.remote)
		if _, err := w.st.PollBackchannelRequest(ctx, r.ID, r.ClientID, w.now); err != nil {
			t.Fatal(err)
		}
		if _, err := w.remote.PollBackchannelRequest(context.Background(), r.ID, r.ClientID, w.now); !errors.Is(err, oauth.ErrSlowDown) {
			t.Errorf("peer's replica: %v, want its NextPollAt moved there (slow_down)", err)
		}
		if _, err := w.local.PollBackchannelRequest(context.Background(), r.ID, r.ClientID, w.now); err != nil {
			t.Errorf("local replica: %v, want the request untouched", err)
		}
	}
	reachesHome["DecideBackchannelRequest"] = func(t *testing.T, w twoRegions, ctx context.Context) {
		r := backchannelAt(peer, w.now)
		putBoth(t, r, w.local, w.remote)
		if _, err := w.st.DecideBackchannelRequest(ctx, r.ID, r.UID, approve(r, w.now), w.now); err != nil {
			t.Fatal(err)
		}
		if got := stateIn(t, w.remote, r.ID, w.now); got != oauth.CIBAApproved {
			t.Errorf("peer's replica: %q, want the request approved there", got)
		}
		if got := stateIn(t, w.local, r.ID, w.now); got != oauth.CIBAPending {
			t.Errorf("local replica: %q, want the request pending", got)
		}
	}
	reachesHome["ConsumeBackchannelRequest"] = func(t *testing.T, w twoRegions, ctx context.Context) {
		r := backchannelAt(peer, w.now)
		putBoth(t, r, w.local, w.remote)
		for _, s := range []oauth.Store{w.local, w.remote} {
			if _, err := s.DecideBackchannelRequest(context.Background(), r.ID, r.UID, approve(r, w.now), w.now); err != nil {
				t.Fatal(err)
			}
		}
		jti := oauth.Once{Key: oauth.NewID("dpop:"), Expires: w.now.Add(time.Minute)}
		if _, err := w.st.ConsumeBackchannelRequest(ctx, r.ID, r.ClientID, w.now, jti); err != nil {
			t.Fatal(err)
		}
		if got := stateIn(t, w.remote, r.ID, w.now); got != oauth.CIBAIssued {
			t.Errorf("peer's replica: %q, want the request issued there", got)
		}
		if err := w.remote.UseOnce(context.Background(), jti.Key, jti.Expires, w.now); !errors.Is(err, oauth.ErrUsed) {
			t.Errorf("peer's replica: %v, want the one-time value recorded there", err)
		}
		if got := stateIn(t, w.local, r.ID, w.now); got != oauth.CIBAApproved {
			t.Errorf("local replica: %q, want the request still approved", got)
		}
	}
}

// TestStore_ABackchannelRequestIsServedAtTheHomeItsIDNames: a device's decision or a poll
// that reaches region here with no home in its context (the device's callback knows only the
// request's reference) is decided at the home the request's ID names, and 50 racing
// decisions, half through each region's store, have exactly one winner.
func TestStore_ABackchannelRequestIsServedAtTheHomeItsIDNames(t *testing.T) {
	w := newTwoRegions(t)
	there, err := regional.New(peer, w.remote, map[string]oauth.Store{here: w.local})
	if err != nil {
		t.Fatal(err)
	}
	r := backchannelAt(peer, w.now)
	if err := w.st.PutBackchannelRequest(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if stateIn(t, w.local, r.ID, w.now) != "" || stateIn(t, w.remote, r.ID, w.now) != oauth.CIBAPending {
		t.Fatal("the request was not stored at the home its ID names alone")
	}
	const racers = 50
	errs := make(chan error, racers)
	start := make(chan struct{})
	for i := range racers {
		st := w.st
		if i%2 == 1 {
			st = there
		}
		go func() {
			<-start
			_, err := st.DecideBackchannelRequest(context.Background(), r.ID, r.UID, approve(r, w.now), w.now)
			errs <- err
		}()
	}
	close(start)
	wins := 0
	for range racers {
		switch err := <-errs; {
		case err == nil:
			wins++
		case !errors.Is(err, oauth.ErrUsed):
			t.Errorf("a losing decision: %v, want ErrUsed", err)
		}
	}
	if wins != 1 {
		t.Errorf("%d of %d racing decisions through both regions won, want 1", wins, racers)
	}
	list, err := w.st.ListBackchannelRequests(context.Background(), r.UID, w.now)
	if err != nil || len(list) != 0 {
		t.Errorf("local listing: %d requests, %v; want none (the request lives at its home)", len(list), err)
	}
}
