package multiregion_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/regional"
)

// TestSimulation_HomeRoutedBackchannelRequestIsDecidedAndPolledOnce: a CIBA request issued in
// region a and replicated to region b is decided by 50 racing device answers, half reaching
// each region, and polled by 50 racing polls at one instant, half in each region: through the
// regional stores exactly one decision wins and exactly one poll moves NextPollAt, because every
// call on the request is served at the home its ID names, whatever region it reached.
func TestSimulation_HomeRoutedBackchannelRequestIsDecidedAndPolledOnce(t *testing.T) {
	w := newWorld(t, false, replicationDelay)
	ra, err := regional.New(w.a.name, w.storeA, map[string]oauth.Store{w.b.name: w.storeB})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := regional.New(w.b.name, w.storeB, map[string]oauth.Store{w.a.name: w.storeA})
	if err != nil {
		t.Fatal(err)
	}
	ra.PeerTimeout, rb.PeerTimeout = time.Minute, time.Minute // replication, not deadlines, is tested here
	now := time.Now().UTC()
	newRequest := func() oauth.BackchannelRequest {
		id := oauth.BackchannelRequestID(oauth.NewSecret(oauth.PrefixAuthReqID + w.a.name + "."))
		return oauth.BackchannelRequest{ID: id, ClientID: w.client.ID, UID: "u-1001", Scopes: oauth.Scopes{"openid"},
			Mode: oauth.CIBAModePoll, Interval: 5, State: oauth.CIBAPending, CreatedAt: now, NextPollAt: now,
			ExpiresAt: now.Add(2 * time.Minute), KeepUntil: now.Add(10 * time.Minute)}
	}
	decided, polled := newRequest(), newRequest()
	before := w.rep.copied(w.b.name)
	for _, r := range []oauth.BackchannelRequest{decided, polled} {
		if err := w.storeA.PutBackchannelRequest(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	w.waitReplicated(t, w.b.name, before+2)

	const racers = 50
	race := func(call func(st oauth.Store) error) (wins int, losses []error) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range racers {
			st := oauth.Store(ra)
			if i%2 == 1 {
				st = rb
			}
			wg.Go(func() {
				<-start
				err := call(st)
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					wins++
				} else {
					losses = append(losses, err)
				}
			})
		}
		close(start)
		wg.Wait()
		return wins, losses
	}
	g := oauth.Grant{ID: oauth.NewID(oauth.PrefixGrant), ClientID: w.client.ID, UID: "u-1001", AMR: []string{"pwd", "otp", oauth.AMRMFA},
		AuthTime: now, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	wins, losses := race(func(st oauth.Store) error {
		_, err := st.DecideBackchannelRequest(context.Background(), decided.ID, "u-1001", oauth.BackchannelDecision{Approve: true, Grant: &g}, now)
		return err
	})
	if wins != 1 {
		t.Errorf("%d of %d racing decisions through both regions won, want 1", wins, racers)
	}
	for _, err := range losses {
		if !errors.Is(err, oauth.ErrUsed) {
			t.Errorf("a losing decision: %v, want ErrUsed", err)
		}
	}
	wins, losses = race(func(st oauth.Store) error {
		_, err := st.PollBackchannelRequest(context.Background(), polled.ID, w.client.ID, now)
		return err
	})
	if wins != 1 {
		t.Errorf("%d of %d racing polls through both regions moved NextPollAt, want 1", wins, racers)
	}
	for _, err := range losses {
		if !errors.Is(err, oauth.ErrSlowDown) {
			t.Errorf("a losing poll: %v, want ErrSlowDown", err)
		}
	}
}
