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

// TestRotator_OverKMS runs the key lifecycle on KMS keys, for every algorithm: the first run
// creates a current and a next key of each (tagged, of the algorithm's key spec), signing uses
// the algorithm's current key's ARN and its KMS signing algorithm, and a retired key's KMS key
// is scheduled for deletion when it leaves the JWKS, after which KMS refuses to sign with it.
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
	if len(set.Keys) != 2*len(keys.Algs) || tr.Calls("CreateKey") != 2*len(keys.Algs) {
		t.Fatalf("first run: %d keys, %d CreateKey calls, want 2 per algorithm", len(set.Keys), tr.Calls("CreateKey"))
	}
	spec := map[string]types.KeySpec{keys.RS256: types.KeySpecRsa2048, keys.PS256: types.KeySpecRsa2048, keys.ES256: types.KeySpecEccNistP256}
	s := keys.NewSigner(st, b, clk, time.Minute)
	curs := map[string]oauth.SigningKey{}
	for _, alg := range keys.Algs {
		cur, ok := set.Current(alg)
		if !ok || cur.Kid != first.Algs[alg].Current {
			t.Fatalf("%s: no current key matching the report %+v", alg, first.Algs[alg])
		}
		curs[alg] = cur
		if tags := kmstest.Tags(t, client, cur.Ref); tags[kmskey.DefaultTagKey] != "auth-test" {
			t.Fatalf("%s key tags %v", alg, tags)
		}
		if md := kmstest.Describe(t, client, cur.Ref); md.KeySpec != spec[alg] {
			t.Fatalf("%s key is %s", alg, md.KeySpec)
		}
		tr.Reset()
		tok, err := s.SignJWT(ctx, alg, jwt.MapClaims{"sub": "u"})
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := keys.PublicKey(cur)
		if _, err := jwt.Parse(tok, func(*jwt.Token) (any, error) { return pub, nil }, jwt.WithValidMethods([]string{alg})); err != nil {
			t.Fatalf("%s token: %v", alg, err)
		}
		if ids := tr.KeyIDs("Sign"); !slices.Equal(ids, []string{cur.Ref}) {
			t.Fatalf("%s signed with %v, want the current key's ARN %s", alg, ids, cur.Ref)
		}
	}

	clk.Advance(p.RotationPeriod)
	rep, err := rot.Rotate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, alg := range keys.Algs {
		if rep.Algs[alg].Promoted != first.Algs[alg].Next {
			t.Fatalf("rotation of %s: %+v", alg, rep.Algs[alg])
		}
	}
	clk.Advance(p.RetiredHold())
	rep, err = rot.Rotate(ctx)
	var wantDeleted []string
	for _, alg := range keys.Algs {
		wantDeleted = append(wantDeleted, first.Algs[alg].Current)
	}
	if err != nil || !slices.Equal(rep.Deleted, wantDeleted) {
		t.Fatalf("deletion run: %+v, %v; want %v deleted", rep, err, wantDeleted)
	}
	for alg, cur := range curs {
		if st := kmstest.KeyState(t, client, cur.Ref); st != types.KeyStatePendingDeletion {
			t.Fatalf("retired %s KMS key is %s, want PendingDeletion", alg, st)
		}
		if _, err := b.Sign(ctx, cur.Ref, alg, make([]byte, 32)); !errors.Is(err, keys.ErrUnknownKey) {
			t.Fatalf("Sign with a deleted %s key = %v, want ErrUnknownKey", alg, err)
		}
	}
	set, _ = st.Keys(ctx)
	if body, _ := keys.PublicJWKS(set); len(set.Published()) != 2*len(keys.Algs) || string(body) == "" {
		t.Fatalf("published %d keys after deletion, want current and next of each algorithm", len(set.Published()))
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
