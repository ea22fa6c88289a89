package kmskey_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/golang-jwt/jwt/v5"

	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/kmskey"
	"github.com/acmebank/authserver/shared/keys/kmstest"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// TestRotator_OverKMS runs the key lifecycle on KMS keys: the first run creates two tagged
// keys, signing uses the current key's ARN, and a retired key's KMS key is scheduled for
// deletion when it leaves the JWKS, after which KMS refuses to sign with it.
func TestRotator_OverKMS(t *testing.T) {
	client, tr := kmstest.New(t)
	b := kmskey.New(client, kmskey.Options{TagValue: "auth-test"})
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	p := keys.DefaultPolicy()
	rot := keys.NewRotator(st, b, p, clk, nil)
	ctx := context.Background()

	first, err := rot.Rotate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	set, _ := st.Keys(ctx)
	cur, _ := set.Current(keys.RS256)
	if tags := kmstest.Tags(t, client, cur.Ref); len(set.Keys) != 2 || tr.Calls("CreateKey") != 2 || tags[kmskey.DefaultTagKey] != "auth-test" {
		t.Fatalf("first run: %d keys, %d CreateKey calls, tags %v", len(set.Keys), tr.Calls("CreateKey"), tags)
	}
	s := keys.NewSigner(st, b, clk, time.Minute)
	if _, err := s.SignJWT(ctx, jwt.MapClaims{"sub": "u"}); err != nil {
		t.Fatal(err)
	}
	if ids := tr.KeyIDs("Sign"); !slices.Equal(ids, []string{cur.Ref}) {
		t.Fatalf("signed with %v, want the current key's ARN %s", ids, cur.Ref)
	}

	clk.Advance(p.RotationPeriod)
	if rep, err := rot.Rotate(ctx); err != nil || rep.Promoted != first.Next {
		t.Fatalf("rotation: %+v, %v", rep, err)
	}
	clk.Advance(p.RetiredHold())
	rep, err := rot.Rotate(ctx)
	if err != nil || !slices.Equal(rep.Deleted, []string{first.Current}) {
		t.Fatalf("deletion run: %+v, %v", rep, err)
	}
	if st := kmstest.KeyState(t, client, cur.Ref); st != types.KeyStatePendingDeletion {
		t.Fatalf("retired KMS key is %s, want PendingDeletion", st)
	}
	if _, err := b.Sign(ctx, cur.Ref, keys.RS256, make([]byte, 32)); !errors.Is(err, keys.ErrUnknownKey) {
		t.Fatalf("Sign with a deleted key = %v, want ErrUnknownKey", err)
	}
	set, _ = st.Keys(ctx)
	if body, _ := keys.PublicJWKS(set); len(set.Published()) != 2 || string(body) == "" {
		t.Fatalf("published %d keys after deletion, want current and next", len(set.Published()))
	}
	for _, k := range set.Keys {
		if st := kmstest.KeyState(t, client, k.Ref); k.State != oauth.KeyDeleted && st != types.KeyStateEnabled {
			t.Fatalf("registered key %s is %s in KMS", k.Kid, st)
		}
	}
}

// TestRotator_KMSThrottlingFailsTheRunAndLeavesNoOrphans: throttled CreateKey fails the run
// with a transient error; the key created before it is scheduled for deletion and the
// registry is untouched, so the next run starts clean.
func TestRotator_KMSThrottlingFailsTheRunAndLeavesNoOrphans(t *testing.T) {
	client, tr := kmstest.New(t)
	b := kmskey.New(client, kmskey.Options{})
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rot := keys.NewRotator(st, b, keys.Policy{}, nil, nil)
	ctx := context.Background()
	tr.Fail("CreateKey", kmstest.Pass, 1)
	tr.Fail("CreateKey", kmstest.Throttling, 1)
	orig := tr.Calls("ScheduleKeyDeletion")
	_, err = rot.Rotate(ctx)
	if !errors.Is(err, oauth.ErrTransient) {
		t.Fatalf("Rotate = %v, want transient", err)
	}
	if got := tr.Calls("ScheduleKeyDeletion") - orig; got != 1 {
		t.Fatalf("%d keys scheduled for deletion, want the one the failed run created", got)
	}
	if set, _ := st.Keys(ctx); len(set.Keys) != 0 {
		t.Fatalf("failed run registered %d keys", len(set.Keys))
	}
	if _, err := rot.Rotate(ctx); err != nil {
		t.Fatalf("next run: %v", err)
	}
}
