package keys_test

import (
	"context"
	"sync"
	"testing"

	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/localkey"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// TestRotate_WithNonceKeysRacingRunsMakeOneNonceKey: 50 racing rotation runs that also rotate
// the DPoP nonce keys (as the scheduled run and InitialKey may overlap) all succeed and make
// exactly one nonce key between them; a later run a key's life on makes the second.
func TestRotate_WithNonceKeysRacingRunsMakeOneNonceKey(t *testing.T) {
	st, err := embedded.OpenWith(t.TempDir(), embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lb, err := localkey.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := keys.DefaultPolicy()
	p.Algs = []string{keys.ES256}
	clock := newClock()
	rot := keys.NewRotator(st, lb, p, clock, nil).WithNonceKeys(st, localkey.NonceKeys{})
	const runs = 50
	reps := make([]keys.Report, runs)
	errs := make([]error, runs)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range runs {
		wg.Go(func() {
			<-start
			reps[i], errs[i] = rot.Rotate(context.Background())
		})
	}
	close(start)
	wg.Wait()
	made := 0
	for i := range runs {
		if errs[i] != nil {
			t.Fatalf("run %d: %v", i, errs[i])
		}
		if reps[i].NonceKeys == nil {
			t.Fatalf("run %d reports nothing of the nonce keys", i)
		}
		if reps[i].NonceKeys.Made {
			made++
		}
	}
	set, err := st.NonceKeys(context.Background())
	if err != nil || made != 1 || len(set.Keys) != 1 || len(set.Keys[0].Wrapped) != oauth.NonceKeyLen {
		t.Fatalf("%d runs made a nonce key; stored %+v (%v); want one key", made, set, err)
	}
	clock.Advance(oauth.NonceKeyLife)
	rep, err := rot.Rotate(context.Background())
	if err != nil || !rep.NonceKeys.Made || rep.NonceKeys.Current != 2 {
		t.Fatalf("a run a key's life later: %+v %v, want key 2 made", rep.NonceKeys, err)
	}
}
