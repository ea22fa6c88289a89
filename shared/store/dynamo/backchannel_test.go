package dynamo_test

import (
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/acmebank/authserver/shared/oauth"
)

// testBackchannel is a pending poll request of a fresh customer, created at at.
func testBackchannel(at time.Time) oauth.BackchannelRequest {
	return oauth.BackchannelRequest{
		ID: oauth.BackchannelRequestID(oauth.NewSecret(oauth.PrefixAuthReqID)), ClientID: oauth.NewID(oauth.PrefixClientID),
		UID: oauth.NewID("u_"), Scopes: oauth.Scopes{oauth.ScopeOpenID}, BindingMessage: "7B2Q", Mode: oauth.CIBAModePoll,
		Interval: 5, CreatedAt: at, ExpiresAt: at.Add(2 * time.Minute), KeepUntil: at.Add(10*time.Minute + 250*time.Millisecond),
		NextPollAt: at, State: oauth.CIBAPending,
	}
}

// testApproval is a strong approval of r.
func testApproval(r oauth.BackchannelRequest, at time.Time) oauth.BackchannelDecision {
	g := testGrant(at)
	g.UID, g.ClientID, g.AMR = r.UID, r.ClientID, []string{"pwd", "otp", oauth.AMRMFA}
	return oauth.BackchannelDecision{Approve: true, Grant: &g}
}

// TestItems_BackchannelRequestIsKeptUntilKeepUntilAndListedWhilePending reads a CIBA
// request's item raw (docs/storage.md): BC#<id> / BC, the TTL from KeepUntil (rounded up to
// the second), never the auth_req_id of a poll client, and the customer's GSI1 entry
// (BCUSER#<uid>) while it is pending only; a request that named nobody has none.
func TestItems_BackchannelRequestIsKeptUntilKeepUntilAndListedWhilePending(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	at := now()
	r := testBackchannel(at)
	mustNil(t, f.store.PutBackchannelRequest(ctx, r))
	nobody := testBackchannel(at)
	nobody.UID = ""
	mustNil(t, f.store.PutBackchannelRequest(ctx, nobody))

	item := rawItem(t, f, "BC#"+r.ID, "BC")
	if item == nil {
		t.Fatalf("no item at BC#%s", r.ID)
	}
	wantS := func(item map[string]types.AttributeValue, attr, want string) {
		t.Helper()
		got, _ := item[attr].(*types.AttributeValueMemberS)
		switch {
		case want == "" && got != nil:
			t.Errorf("%s = %q, want none", attr, got.Value)
		case want != "" && (got == nil || got.Value != want):
			t.Errorf("%s = %v, want %q", attr, item[attr], want)
		}
	}
	if ttl, _ := item["ttl"].(*types.AttributeValueMemberN); ttl == nil || ttl.Value != strconv.FormatInt(r.KeepUntil.Unix()+1, 10) {
		t.Errorf("ttl = %v, want KeepUntil rounded up, %d", item["ttl"], r.KeepUntil.Unix()+1)
	}
	wantS(item, "type", "BC")
	wantS(item, "gsi1pk", "BCUSER#"+r.UID)
	wantS(item, "auth_req_id", "")
	wantS(rawItem(t, f, "BC#"+nobody.ID, "BC"), "gsi1pk", "")

	_, err := f.store.DecideBackchannelRequest(ctx, r.ID, r.UID, testApproval(r, at), at)
	mustNil(t, err)
	item = rawItem(t, f, "BC#"+r.ID, "BC")
	wantS(item, "gsi1pk", "")
	wantS(item, "gsi1sk", "")
	wantS(item, "state", oauth.CIBAApproved)
}

// TestRoundTrips_BackchannelOperationsAreOneRequestEach counts the requests of each CIBA
// store operation (docs/storage.md): one each, refusals included, and the issuance with the
// poll's one-time values one transaction with its read beside it.
func TestRoundTrips_BackchannelOperationsAreOneRequestEach(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	put := func(t *testing.T) oauth.BackchannelRequest {
		r := testBackchannel(now())
		mustNil(t, f.store.PutBackchannelRequest(ctx, r))
		return r
	}
	approved := func(t *testing.T) oauth.BackchannelRequest {
		r := put(t)
		_, err := f.store.DecideBackchannelRequest(ctx, r.ID, r.UID, testApproval(r, now()), now())
		mustNil(t, err)
		return r
	}
	tests := []struct {
		name  string
		setup func(t *testing.T) func() error
		want  map[string]int
	}{
		{"Put", func(t *testing.T) func() error {
			r := testBackchannel(now())
			return func() error { return f.store.PutBackchannelRequest(ctx, r) }
		}, map[string]int{"PutItem": 1}},
		{"Get", func(t *testing.T) func() error {
			r := put(t)
			return func() error { _, err := f.store.GetBackchannelRequest(ctx, r.ID, now()); return err }
		}, map[string]int{"GetItem": 1}},
		{"Poll", func(t *testing.T) func() error {
			r := put(t)
			return func() error { _, err := f.store.PollBackchannelRequest(ctx, r.ID, r.ClientID, now()); return err }
		}, map[string]int{"UpdateItem": 1}},
		{"PollTooSoonTellsSlowDownInOneCall", func(t *testing.T) func() error {
			r := put(t)
			_, err := f.store.PollBackchannelRequest(ctx, r.ID, r.ClientID, now())
			mustNil(t, err)
			return func() error {
				_, err := f.store.PollBackchannelRequest(ctx, r.ID, r.ClientID, now())
				return expect(err, oauth.ErrSlowDown)
			}
		}, map[string]int{"UpdateItem": 1}},
		{"PollOfAnApprovedRequestReturnsItInOneCall", func(t *testing.T) func() error {
			r := approved(t)
			return func() error { _, err := f.store.PollBackchannelRequest(ctx, r.ID, r.ClientID, now()); return err }
		}, map[string]int{"UpdateItem": 1}},
		{"Decide", func(t *testing.T) func() error {
			r := put(t)
			return func() error {
				_, err := f.store.DecideBackchannelRequest(ctx, r.ID, r.UID, testApproval(r, now()), now())
				return err
			}
		}, map[string]int{"UpdateItem": 1}},
		{"DecideAgainTellsUsedInOneCall", func(t *testing.T) func() error {
			r := approved(t)
			return func() error {
				_, err := f.store.DecideBackchannelRequest(ctx, r.ID, r.UID, oauth.BackchannelDecision{}, now())
				return expect(err, oauth.ErrUsed)
			}
		}, map[string]int{"UpdateItem": 1}},
		{"Consume", func(t *testing.T) func() error {
			r := approved(t)
			return func() error { _, err := f.store.ConsumeBackchannelRequest(ctx, r.ID, r.ClientID, now()); return err }
		}, map[string]int{"UpdateItem": 1}},
		{"ConsumeWithOneTimeValues", func(t *testing.T) func() error {
			r := approved(t)
			once := []oauth.Once{testOnce("assertion:"), testOnce("dpop:")}
			return func() error {
				_, err := f.store.ConsumeBackchannelRequest(ctx, r.ID, r.ClientID, now(), once...)
				return err
			}
		}, map[string]int{"GetItem": 1, "TransactWriteItems": 1}},
		{"List", func(t *testing.T) func() error {
			r := put(t)
			return func() error {
				got, err := f.store.ListBackchannelRequests(ctx, r.UID, now())
				if err == nil && len(got) != 1 {
					t.Errorf("listed %d requests, want 1", len(got))
				}
				return err
			}
		}, map[string]int{"Query": 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			op := tc.setup(t)
			f.counter.Reset()
			if err := op(); err != nil {
				t.Fatalf("operation: %v", err)
			}
			if got := f.counter.Calls(); !maps.Equal(got, tc.want) {
				t.Errorf("AWS requests = %v, want %v", got, tc.want)
			}
		})
	}
}
