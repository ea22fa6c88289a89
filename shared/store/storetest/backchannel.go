package storetest

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/oauth"
)

// Durations of the CIBA fixtures: an auth_req_id lives two minutes, its request is kept ten,
// and a client may poll every five seconds.
const (
	cibaTTL      = 2 * time.Minute
	cibaKeep     = 10 * time.Minute
	cibaInterval = 5
)

// newBackchannelRequest returns a pending poll-mode request of customer uid by client
// clientID, created at now, first pollable at now, with every field set.
func newBackchannelRequest(uid, clientID string, now time.Time) oauth.BackchannelRequest {
	return oauth.BackchannelRequest{
		ID:                   oauth.BackchannelRequestID(oauth.NewSecret(oauth.PrefixAuthReqID)),
		ClientID:             clientID,
		UID:                  uid,
		Scopes:               oauth.Scopes{oauth.ScopeOpenID, oauth.ScopeTransfersWriteDotted},
		AuthorizationDetails: json.RawMessage(`[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"12.30"},"creditorName":"Café Zoë"}]`),
		BindingMessage:       "W4SCT 7B2Q",
		ACRValues:            []string{oauth.ACRStrong},
		Mode:                 oauth.CIBAModePoll,
		Interval:             cibaInterval,
		CreatedAt:            now.Add(millis),
		ExpiresAt:            now.Add(cibaTTL),
		KeepUntil:            now.Add(cibaKeep),
		NextPollAt:           now,
		State:                oauth.CIBAPending,
	}
}

// anyBackchannelRequest is a pending request of a random customer by a random client.
func anyBackchannelRequest(now time.Time) oauth.BackchannelRequest {
	return newBackchannelRequest(id("u_"), id(oauth.PrefixClientID), now)
}

// pingRequest is a ping-mode request, which keeps its auth_req_id and notification token.
func pingRequest(now time.Time) oauth.BackchannelRequest {
	authReqID := oauth.NewSecret(oauth.PrefixAuthReqID)
	r := anyBackchannelRequest(now)
	r.ID, r.AuthReqID = oauth.BackchannelRequestID(authReqID), authReqID
	r.Mode, r.NotificationToken = oauth.CIBAModePing, "8d67dc78-7faa-4d41-aabd-67707b374255"
	return r
}

// approval is the device's approval of r: a strong grant of r's customer to r's client.
func approval(r oauth.BackchannelRequest, now time.Time) oauth.BackchannelDecision {
	g := newGrant(r.UID, r.ClientID, now)
	g.AMR = []string{"pwd", "otp", oauth.AMRMFA}
	g.PaymentEvidence = &oauth.PaymentEvidence{Factor: oauth.PaymentFactorTOTP, DetailsHash: []byte{0xde, 0xad, 0xbe, 0xef}, Nonce: []byte("n-1"), At: now.Add(millis)}
	return oauth.BackchannelDecision{Approve: true, Grant: &g}
}

// denial is the device's denial.
var denial = oauth.BackchannelDecision{}

// putBackchannel stores r, failing the test on an error.
func putBackchannel(t *testing.T, s oauth.Store, r oauth.BackchannelRequest) {
	t.Helper()
	mustNil(t, s.PutBackchannelRequest(t.Context(), r), "PutBackchannelRequest")
}

// approved stores r and approves it at now, returning the request as decided.
func approved(t *testing.T, s oauth.Store, r oauth.BackchannelRequest, now time.Time) oauth.BackchannelRequest {
	t.Helper()
	putBackchannel(t, s, r)
	got, err := s.DecideBackchannelRequest(t.Context(), r.ID, r.UID, approval(r, now), now)
	mustNil(t, err, "DecideBackchannelRequest")
	return got
}

// wantStored checks that the request id is stored exactly as want: what a refused call must
// leave.
func wantStored(t *testing.T, s oauth.Store, want oauth.BackchannelRequest, now time.Time, what string) {
	t.Helper()
	got, err := s.GetBackchannelRequest(t.Context(), want.ID, now)
	mustNil(t, err, what+": GetBackchannelRequest")
	wantEqual(t, got, want, what+": the request as stored")
}

// backchannelTests prove oauth.BackchannelStore: each rule of its doc comment, that each
// refusal writes nothing, and one winner among 50 racers wherever a value is single-use.
var backchannelTests = []test{
	{"PutThenGetReturnsEveryField", func(t *testing.T, s oauth.Store) {
		now := start()
		for _, r := range []oauth.BackchannelRequest{anyBackchannelRequest(now), pingRequest(now)} {
			putBackchannel(t, s, r)
			wantStored(t, s, r, now, r.Mode+" request")
		}
	}},
	{"PutOfATakenIDIsAlreadyExistsAndKeepsTheFirst", func(t *testing.T, s oauth.Store) {
		now := start()
		r := anyBackchannelRequest(now)
		putBackchannel(t, s, r)
		other := anyBackchannelRequest(now)
		other.ID = r.ID
		wantErr(t, s.PutBackchannelRequest(t.Context(), other), oauth.ErrAlreadyExists, "second PutBackchannelRequest")
		wantStored(t, s, r, now, "after a refused put")
	}},
	{"PutOfAnUnstorableRequestIsRefusedAndWritesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		for what, spoil := range map[string]func(r *oauth.BackchannelRequest){
			"no interval":                func(r *oauth.BackchannelRequest) { r.Interval = 0 },
			"no client":                  func(r *oauth.BackchannelRequest) { r.ClientID = "" },
			"no expiry":                  func(r *oauth.BackchannelRequest) { r.ExpiresAt = time.Time{} },
			"no KeepUntil":               func(r *oauth.BackchannelRequest) { r.KeepUntil = time.Time{} },
			"KeepUntil before ExpiresAt": func(r *oauth.BackchannelRequest) { r.KeepUntil = r.ExpiresAt.Add(-time.Second) },
		} {
			r := anyBackchannelRequest(now)
			spoil(&r)
			wantErr(t, s.PutBackchannelRequest(t.Context(), r), oauth.ErrBackchannelUnstorable, what)
			_, err := s.GetBackchannelRequest(t.Context(), r.ID, now)
			wantErr(t, err, oauth.ErrNotFound, what+": GetBackchannelRequest")
		}
	}},
	{"GetOfAnUnknownOrForgottenRequestIsNotFound", func(t *testing.T, s oauth.Store) {
		now := start()
		r := anyBackchannelRequest(now)
		putBackchannel(t, s, r)
		_, err := s.GetBackchannelRequest(t.Context(), oauth.BackchannelRequestID(oauth.NewSecret(oauth.PrefixAuthReqID)), now)
		wantErr(t, err, oauth.ErrNotFound, "unknown id")
		_, err = s.GetBackchannelRequest(t.Context(), r.ID, r.ExpiresAt)
		mustNil(t, err, "past ExpiresAt, before KeepUntil (still told from an unknown id)")
		_, err = s.GetBackchannelRequest(t.Context(), r.ID, r.KeepUntil)
		wantErr(t, err, oauth.ErrNotFound, "at KeepUntil")
	}},
	{"PollMovesNextPollAtByTheIntervalAndReturnsTheRequestAsItWas", func(t *testing.T, s oauth.Store) {
		now := start()
		r := anyBackchannelRequest(now)
		putBackchannel(t, s, r)
		at := now.Add(time.Second)
		got, err := s.PollBackchannelRequest(t.Context(), r.ID, r.ClientID, at)
		mustNil(t, err, "PollBackchannelRequest")
		wantEqual(t, got, r, "the request before the poll")
		moved := r
		moved.NextPollAt = at.Add(cibaInterval * time.Second)
		wantStored(t, s, moved, now, "after the poll")
		got, err = s.PollBackchannelRequest(t.Context(), r.ID, r.ClientID, moved.NextPollAt)
		mustNil(t, err, "poll at NextPollAt")
		wantEqual(t, got.NextPollAt, moved.NextPollAt, "NextPollAt before the second poll")
	}},
	{"PollBeforeNextPollAtIsSlowDownAndWritesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		r := anyBackchannelRequest(now)
		putBackchannel(t, s, r)
		_, err := s.PollBackchannelRequest(t.Context(), r.ID, r.ClientID, now)
		mustNil(t, err, "first poll")
		moved, err := s.GetBackchannelRequest(t.Context(), r.ID, now)
		mustNil(t, err, "GetBackchannelRequest")
		for _, at := range []time.Time{now, now.Add(time.Second), moved.NextPollAt.Add(-time.Millisecond)} {
			got, err := s.PollBackchannelRequest(t.Context(), r.ID, r.ClientID, at)
			wantErr(t, err, oauth.ErrSlowDown, "poll sooner than the interval")
			wantEqual(t, got.ID, r.ID, "the request a slow_down returns")
			wantStored(t, s, moved, now, "after a slow_down")
		}
	}},
	{"PollOfAnUnknownForgottenOrAnotherClientsRequestIsNotFoundAndWritesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		r := anyBackchannelRequest(now)
		putBackchannel(t, s, r)
		_, err := s.PollBackchannelRequest(t.Context(), oauth.BackchannelRequestID(oauth.NewSecret(oauth.PrefixAuthReqID)), r.ClientID, now)
		wantErr(t, err, oauth.ErrNotFound, "unknown id")
		_, err = s.PollBackchannelRequest(t.Context(), r.ID, id(oauth.PrefixClientID), now)
		wantErr(t, err, oauth.ErrNotFound, "another client's request")
		_, err = s.PollBackchannelRequest(t.Context(), r.ID, r.ClientID, r.KeepUntil)
		wantErr(t, err, oauth.ErrNotFound, "at KeepUntil")
		wantStored(t, s, r, now, "after refused polls")
	}},
	{"PollPastExpiresAtStillReturnsThePendingRequest", func(t *testing.T, s oauth.Store) {
		now := start()
		r := anyBackchannelRequest(now)
		putBackchannel(t, s, r)
		got, err := s.PollBackchannelRequest(t.Context(), r.ID, r.ClientID, r.ExpiresAt)
		mustNil(t, err, "poll at ExpiresAt (the caller answers expired_token)")
		wantEqual(t, got.State, oauth.CIBAPending, "state")
		wantEqual(t, got.ExpiresAt, r.ExpiresAt, "ExpiresAt")
	}},
	{"PollOfADecidedRequestReturnsItAsItIsAndWritesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		yes := approved(t, s, anyBackchannelRequest(now), now)
		no := anyBackchannelRequest(now)
		putBackchannel(t, s, no)
		no, err := s.DecideBackchannelRequest(t.Context(), no.ID, no.UID, denial, now)
		mustNil(t, err, "deny")
		for _, r := range []oauth.BackchannelRequest{yes, no} {
			for range 3 { // at one instant: a decided request is never slow_down
				got, err := s.PollBackchannelRequest(t.Context(), r.ID, r.ClientID, now)
				mustNil(t, err, "poll of a "+r.State+" request")
				wantEqual(t, got, r, "the "+r.State+" request")
			}
			wantStored(t, s, r, now, "after polls of a "+r.State+" request")
		}
		issued, err := s.ConsumeBackchannelRequest(t.Context(), yes.ID, yes.ClientID, now)
		mustNil(t, err, "ConsumeBackchannelRequest")
		got, err := s.PollBackchannelRequest(t.Context(), yes.ID, yes.ClientID, now)
		mustNil(t, err, "poll of an issued request")
		wantEqual(t, got, issued, "the issued request")
	}},
	{"DecideApprovesOnceAndASecondDecisionIsUsed", func(t *testing.T, s oauth.Store) {
		now := start()
		r := anyBackchannelRequest(now)
		putBackchannel(t, s, r)
		d := approval(r, now)
		at := now.Add(3*time.Second + millis)
		got, err := s.DecideBackchannelRequest(t.Context(), r.ID, r.UID, d, at)
		mustNil(t, err, "approve")
		want := r
		want.State, want.Grant, want.DecidedAt = oauth.CIBAApproved, d.Grant, at
		wantEqual(t, got, want, "the request as decided")
		wantStored(t, s, want, now, "after the approval")
		for _, again := range []oauth.BackchannelDecision{denial, d} {
			_, err = s.DecideBackchannelRequest(t.Context(), r.ID, r.UID, again, at)
			wantErr(t, err, oauth.ErrUsed, "a second decision")
		}
		wantStored(t, s, want, now, "after refused second decisions")
	}},
	{"DecideDenialRecordsNoGrant", func(t *testing.T, s oauth.Store) {
		now := start()
		r := anyBackchannelRequest(now)
		putBackchannel(t, s, r)
		got, err := s.DecideBackchannelRequest(t.Context(), r.ID, r.UID, denial, now)
		mustNil(t, err, "deny")
		want := r
		want.State, want.DecidedAt = oauth.CIBADenied, now
		wantEqual(t, got, want, "the request as denied")
		wantStored(t, s, want, now, "after the denial")
		_, err = s.DecideBackchannelRequest(t.Context(), r.ID, r.UID, approval(r, now), now)
		wantErr(t, err, oauth.ErrUsed, "an approval after the denial")
		wantStored(t, s, want, now, "after a refused approval")
	}},
	{"DecideOfAnUnknownExpiredOrAnotherCustomersRequestIsNotFoundAndWritesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		r := anyBackchannelRequest(now)
		putBackchannel(t, s, r)
		nobody := anyBackchannelRequest(now)
		nobody.UID = "" // the hint named no customer
		putBackchannel(t, s, nobody)
		d := approval(r, now)
		for _, c := range []struct {
			what, id, uid string
			at            time.Time
		}{
			{"unknown id", oauth.BackchannelRequestID(oauth.NewSecret(oauth.PrefixAuthReqID)), r.UID, now},
			{"another customer's", r.ID, id("u_"), now},
			{"no customer", r.ID, "", now},
			{"a request that named nobody", nobody.ID, "", now},
			{"at ExpiresAt", r.ID, r.UID, r.ExpiresAt},
			{"at KeepUntil", r.ID, r.UID, r.KeepUntil},
		} {
			for _, dec := range []oauth.BackchannelDecision{d, denial} {
				_, err := s.DecideBackchannelRequest(t.Context(), c.id, c.uid, dec, c.at)
				wantErr(t, err, oauth.ErrNotFound, "decision of "+c.what)
			}
		}
		wantStored(t, s, r, now, "after refused decisions")
		wantStored(t, s, nobody, now, "the request that named nobody, after refused decisions")
		_, err := s.DecideBackchannelRequest(t.Context(), r.ID, r.UID, d, r.ExpiresAt.Add(-time.Second))
		mustNil(t, err, "the customer's decision a second before ExpiresAt")
	}},
	{"ConsumeIssuesOnceAndASecondIsUsedWithTheRequest", func(t *testing.T, s oauth.Store) {
		now := start()
		r := approved(t, s, anyBackchannelRequest(now), now)
		got, err := s.ConsumeBackchannelRequest(t.Context(), r.ID, r.ClientID, now)
		mustNil(t, err, "ConsumeBackchannelRequest")
		want := r
		want.State = oauth.CIBAIssued
		wantEqual(t, got, want, "the issued request")
		wantStored(t, s, want, now, "after the issuance")
		got, err = s.ConsumeBackchannelRequest(t.Context(), r.ID, r.ClientID, now)
		wantErr(t, err, oauth.ErrUsed, "a second ConsumeBackchannelRequest")
		if got.Grant == nil || got.Grant.ID != r.Grant.ID {
			t.Errorf("a second consumption returned grant %+v, want the issued grant %s (the caller revokes it)", got.Grant, r.Grant.ID)
		}
		wantStored(t, s, want, now, "after a second consumption")
	}},
	{"ConsumeOfAnUnknownPendingDeniedOrAnotherClientsRequestIsNotFoundAndWritesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		pending := anyBackchannelRequest(now)
		putBackchannel(t, s, pending)
		denied := anyBackchannelRequest(now)
		putBackchannel(t, s, denied)
		denied, err := s.DecideBackchannelRequest(t.Context(), denied.ID, denied.UID, denial, now)
		mustNil(t, err, "deny")
		yes := approved(t, s, anyBackchannelRequest(now), now)
		for _, c := range []struct{ what, id, client string }{
			{"unknown id", oauth.BackchannelRequestID(oauth.NewSecret(oauth.PrefixAuthReqID)), yes.ClientID},
			{"pending", pending.ID, pending.ClientID},
			{"denied", denied.ID, denied.ClientID},
			{"another client's", yes.ID, id(oauth.PrefixClientID)},
		} {
			got, err := s.ConsumeBackchannelRequest(t.Context(), c.id, c.client, now)
			wantErr(t, err, oauth.ErrNotFound, "consumption of "+c.what)
			if got.Grant != nil {
				t.Errorf("consumption of %s returned a grant", c.what)
			}
		}
		wantStored(t, s, pending, now, "pending request")
		wantStored(t, s, denied, now, "denied request")
		wantStored(t, s, yes, now, "approved request")
		_, err = s.ConsumeBackchannelRequest(t.Context(), yes.ID, id(oauth.PrefixClientID), now)
		wantErr(t, err, oauth.ErrNotFound, "another client's")
		_, err = s.ConsumeBackchannelRequest(t.Context(), yes.ID, yes.ClientID, now)
		mustNil(t, err, "its own client's")
		_, err = s.ConsumeBackchannelRequest(t.Context(), yes.ID, id(oauth.PrefixClientID), now)
		wantErr(t, err, oauth.ErrNotFound, "another client's, once issued (never ErrUsed)")
	}},
	{"PastExpiresAtADecisionIsRefusedButAnApprovalIsIssuedUntilKeepUntil", func(t *testing.T, s oauth.Store) {
		now := start()
		r := approved(t, s, anyBackchannelRequest(now), now)
		late := anyBackchannelRequest(now)
		putBackchannel(t, s, late)
		_, err := s.DecideBackchannelRequest(t.Context(), late.ID, late.UID, approval(late, now), late.ExpiresAt)
		wantErr(t, err, oauth.ErrNotFound, "decision at ExpiresAt")
		wantStored(t, s, late, now, "after a late decision")
		_, err = s.ConsumeBackchannelRequest(t.Context(), r.ID, r.ClientID, r.KeepUntil)
		wantErr(t, err, oauth.ErrNotFound, "consumption at KeepUntil")
		got, err := s.ConsumeBackchannelRequest(t.Context(), r.ID, r.ClientID, r.KeepUntil.Add(-time.Second))
		mustNil(t, err, "consumption past ExpiresAt, before KeepUntil")
		wantEqual(t, got.State, oauth.CIBAIssued, "state")
	}},
	{"ConsumeRecordsItsOnceValuesWithTheIssuance", func(t *testing.T, s oauth.Store) {
		now := start()
		r := approved(t, s, anyBackchannelRequest(now), now)
		a, d := once("assertion:", now), once("dpop:", now)
		_, err := s.ConsumeBackchannelRequest(t.Context(), r.ID, r.ClientID, now, a, d)
		mustNil(t, err, "ConsumeBackchannelRequest with values")
		wantErr(t, s.UseOnce(t.Context(), a.Key, a.Expires, now), oauth.ErrUsed, "UseOnce of the assertion's value")
		wantErr(t, s.UseOnce(t.Context(), d.Key, d.Expires, now), oauth.ErrUsed, "UseOnce of the proof's value")
		got, err := s.ConsumeBackchannelRequest(t.Context(), r.ID, r.ClientID, now, a)
		wantReplayed(t, err, a.Key, "the same poll again (the value is checked first)")
		if got.Grant != nil {
			t.Errorf("a replayed value returned the grant")
		}
	}},
	{"ConsumeWithAReplayedValueConsumesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		r := approved(t, s, anyBackchannelRequest(now), now)
		used, fresh := once("dpop:", now), once("assertion:", now)
		mustNil(t, s.UseOnce(t.Context(), used.Key, used.Expires, now), "UseOnce")
		_, err := s.ConsumeBackchannelRequest(t.Context(), r.ID, r.ClientID, now, fresh, used)
		wantReplayed(t, err, used.Key, "ConsumeBackchannelRequest with a replayed value")
		wantStored(t, s, r, now, "after a replayed value")
		mustNil(t, s.UseOnce(t.Context(), fresh.Key, fresh.Expires, now), "UseOnce of the value sent beside it (not recorded)")
		_, err = s.ConsumeBackchannelRequest(t.Context(), r.ID, r.ClientID, now)
		mustNil(t, err, "ConsumeBackchannelRequest afterwards (still approved)")
	}},
	{"RefusedConsumeRecordsNoValue", func(t *testing.T, s oauth.Store) {
		now := start()
		pending := anyBackchannelRequest(now)
		putBackchannel(t, s, pending)
		r := approved(t, s, anyBackchannelRequest(now), now)
		v := once("dpop:", now)
		_, err := s.ConsumeBackchannelRequest(t.Context(), pending.ID, pending.ClientID, now, v)
		wantErr(t, err, oauth.ErrNotFound, "a pending request")
		_, err = s.ConsumeBackchannelRequest(t.Context(), r.ID, id(oauth.PrefixClientID), now, v)
		wantErr(t, err, oauth.ErrNotFound, "another client's")
		_, err = s.ConsumeBackchannelRequest(t.Context(), r.ID, r.ClientID, now)
		mustNil(t, err, "ConsumeBackchannelRequest")
		_, err = s.ConsumeBackchannelRequest(t.Context(), r.ID, r.ClientID, now, v)
		wantErr(t, err, oauth.ErrUsed, "an issued request with a fresh value")
		mustNil(t, s.UseOnce(t.Context(), v.Key, v.Expires, now), "UseOnce of the value (never recorded)")
	}},
	{"DecideRecordsItsOnceValuesWithTheDecision", func(t *testing.T, s oauth.Store) {
		now := start()
		r := anyBackchannelRequest(now)
		putBackchannel(t, s, r)
		v := once("ciba-decision:", now)
		d := approval(r, now)
		d.Once = []oauth.Once{v}
		got, err := s.DecideBackchannelRequest(t.Context(), r.ID, r.UID, d, now)
		mustNil(t, err, "DecideBackchannelRequest with a one-time value")
		wantEqual(t, got.State, oauth.CIBAApproved, "the state it returns")
		if got.Grant == nil || got.Grant.ID != d.Grant.ID || got.ClientID != r.ClientID {
			t.Fatalf("DecideBackchannelRequest returned %+v, want the request as approved", got)
		}
		wantErr(t, s.UseOnce(t.Context(), v.Key, v.Expires, now), oauth.ErrUsed, "UseOnce of the value the decision recorded")
	}},
	{"DecideWithAReplayedValueDecidesNothing", func(t *testing.T, s oauth.Store) {
		now := start()
		r := anyBackchannelRequest(now)
		putBackchannel(t, s, r)
		used, fresh := once("ciba-decision:", now), once("ciba-decision:", now)
		mustNil(t, s.UseOnce(t.Context(), used.Key, used.Expires, now), "UseOnce")
		d := denial
		d.Once = []oauth.Once{fresh, used}
		_, err := s.DecideBackchannelRequest(t.Context(), r.ID, r.UID, d, now)
		wantReplayed(t, err, used.Key, "DecideBackchannelRequest with a replayed value")
		wantStored(t, s, r, now, "after a replayed value")
		mustNil(t, s.UseOnce(t.Context(), fresh.Key, fresh.Expires, now), "UseOnce of the value sent beside it (not recorded)")
	}},
	{"RefusedDecisionRecordsNoValue", func(t *testing.T, s oauth.Store) {
		now := start()
		r := anyBackchannelRequest(now)
		putBackchannel(t, s, r)
		v := once("ciba-decision:", now)
		d := denial
		d.Once = []oauth.Once{v}
		_, err := s.DecideBackchannelRequest(t.Context(), r.ID, id("u_"), d, now)
		wantErr(t, err, oauth.ErrNotFound, "another customer's decision")
		_, err = s.DecideBackchannelRequest(t.Context(), r.ID, r.UID, denial, now)
		mustNil(t, err, "DecideBackchannelRequest")
		_, err = s.DecideBackchannelRequest(t.Context(), r.ID, r.UID, d, now)
		wantErr(t, err, oauth.ErrUsed, "a decided request with a fresh value")
		mustNil(t, s.UseOnce(t.Context(), v.Key, v.Expires, now), "UseOnce of the value (never recorded)")
	}},
	{"FiftyRacingDecisionsWithDistinctValuesRecordOnlyTheWinners", func(t *testing.T, s oauth.Store) {
		now := start()
		r := anyBackchannelRequest(now)
		putBackchannel(t, s, r)
		values := make([]oauth.Once, racers)
		for i := range values {
			values[i] = once("ciba-decision:", now)
		}
		errs := race(racers, func(i int) error {
			d := denial
			d.Once = []oauth.Once{values[i]}
			_, err := s.DecideBackchannelRequest(t.Context(), r.ID, r.UID, d, now)
			return err
		})
		wantOneWinner(t, errs, oauth.ErrUsed, "DecideBackchannelRequest")
		for i, v := range values {
			err := s.UseOnce(t.Context(), v.Key, v.Expires, now)
			if errs[i] == nil {
				wantErr(t, err, oauth.ErrUsed, "the winner's value")
			} else {
				mustNil(t, err, "a loser's value (never recorded)")
			}
		}
	}},
	{"ListReturnsOnlyTheCustomersPendingUnexpiredRequests", func(t *testing.T, s oauth.Store) {
		now := start()
		uid := id("u_")
		client := id(oauth.PrefixClientID)
		first := newBackchannelRequest(uid, client, now)
		second := newBackchannelRequest(uid, id(oauth.PrefixClientID), now.Add(time.Second))
		expired := newBackchannelRequest(uid, client, now.Add(-cibaTTL))
		decided := newBackchannelRequest(uid, client, now)
		denied := newBackchannelRequest(uid, client, now)
		others := newBackchannelRequest(id("u_"), client, now)
		nobody := newBackchannelRequest("", client, now)
		for _, r := range []oauth.BackchannelRequest{second, first, expired, decided, denied, others, nobody} {
			putBackchannel(t, s, r)
		}
		_, err := s.DecideBackchannelRequest(t.Context(), decided.ID, uid, approval(decided, now), now)
		mustNil(t, err, "approve")
		_, err = s.DecideBackchannelRequest(t.Context(), denied.ID, uid, denial, now)
		mustNil(t, err, "deny")
		got, err := s.ListBackchannelRequests(t.Context(), uid, now)
		mustNil(t, err, "ListBackchannelRequests")
		wantEqual(t, ids(got), []string{first.ID, second.ID}, "listed requests, oldest first")
		if len(got) == 2 {
			wantEqual(t, got[0], first, "listed request")
		}
		got, err = s.ListBackchannelRequests(t.Context(), uid, first.ExpiresAt)
		mustNil(t, err, "ListBackchannelRequests at the first's ExpiresAt")
		wantEqual(t, ids(got), []string{second.ID}, "listed requests once the first expired")
		got, err = s.ListBackchannelRequests(t.Context(), "", now)
		mustNil(t, err, "ListBackchannelRequests of no customer")
		wantEqual(t, len(got), 0, "requests listed for no customer")
	}},
	{"FiftyRacingDecisionsHaveOneWinner", func(t *testing.T, s oauth.Store) {
		now := start()
		r := anyBackchannelRequest(now)
		putBackchannel(t, s, r)
		errs := race(racers, func(i int) error {
			d := denial
			if i%2 == 0 {
				d = approval(r, now)
			}
			_, err := s.DecideBackchannelRequest(t.Context(), r.ID, r.UID, d, now)
			return err
		})
		wantOneWinner(t, errs, oauth.ErrUsed, "DecideBackchannelRequest")
		winner := slices.IndexFunc(errs, func(err error) bool { return err == nil })
		got, err := s.GetBackchannelRequest(t.Context(), r.ID, now)
		mustNil(t, err, "GetBackchannelRequest")
		want := oauth.CIBADenied
		if winner%2 == 0 {
			want = oauth.CIBAApproved
		}
		wantEqual(t, got.State, want, "the state the winner decided")
	}},
	{"FiftyRacingPollsAtOneInstantMoveNextPollAtOnce", func(t *testing.T, s oauth.Store) {
		now := start()
		r := anyBackchannelRequest(now)
		putBackchannel(t, s, r)
		errs := race(racers, func(int) error {
			_, err := s.PollBackchannelRequest(t.Context(), r.ID, r.ClientID, now)
			return err
		})
		wantOneWinner(t, errs, oauth.ErrSlowDown, "PollBackchannelRequest")
		got, err := s.GetBackchannelRequest(t.Context(), r.ID, now)
		mustNil(t, err, "GetBackchannelRequest")
		wantEqual(t, got.NextPollAt, now.Add(cibaInterval*time.Second), "NextPollAt")
	}},
	{"FiftyRacingConsumesHaveOneWinner", func(t *testing.T, s oauth.Store) {
		now := start()
		r := approved(t, s, anyBackchannelRequest(now), now)
		got := make([]oauth.BackchannelRequest, racers)
		errs := race(racers, func(i int) (err error) {
			got[i], err = s.ConsumeBackchannelRequest(t.Context(), r.ID, r.ClientID, now)
			return err
		})
		wantOneWinner(t, errs, oauth.ErrUsed, "ConsumeBackchannelRequest")
		for i := range got {
			if got[i].Grant == nil || got[i].Grant.ID != r.Grant.ID {
				t.Errorf("racer %d got grant %+v, want the request's grant %s", i, got[i].Grant, r.Grant.ID)
			}
		}
	}},
	{"FiftyConsumesReusingOneValueOverFiftyRequestsIssueOne", func(t *testing.T, s oauth.Store) {
		now := start()
		reqs := make([]oauth.BackchannelRequest, racers)
		for i := range reqs {
			reqs[i] = approved(t, s, anyBackchannelRequest(now), now)
		}
		v := once("dpop:", now)
		errs := race(racers, func(i int) error {
			_, err := s.ConsumeBackchannelRequest(t.Context(), reqs[i].ID, reqs[i].ClientID, now, v)
			return err
		})
		wantOneWinner(t, errs, oauth.ErrReplayed, "ConsumeBackchannelRequest reusing one value")
		for i, err := range errs {
			if err != nil {
				wantStored(t, s, reqs[i], now, "a losing racer's request (still approved)")
			}
		}
	}},
}

// ids are the IDs of rs, in order.
func ids(rs []oauth.BackchannelRequest) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}
