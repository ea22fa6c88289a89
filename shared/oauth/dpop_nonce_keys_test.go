package oauth_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/keys/localkey"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/acmebank/authserver/shared/store/embedded"
)

// countingNonceKeys counts the reads of a real store's nonce keys, each made to take a
// DynamoDB round trip's time, so that racing callers overlap with a read in flight.
type countingNonceKeys struct {
	oauth.NonceKeyStore
	reads atomic.Int64
}

func (c *countingNonceKeys) NonceKeys(ctx context.Context) (oauth.NonceKeySet, error) {
	c.reads.Add(1)
	time.Sleep(20 * time.Millisecond)
	return c.NonceKeyStore.NonceKeys(ctx)
}

func nonceStore(t *testing.T) *embedded.Store {
	t.Helper()
	st, err := embedded.OpenWith(t.TempDir(), embedded.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func rotateNonceKeys(t *testing.T, st oauth.NonceKeyStore, now time.Time) oauth.NonceKeyReport {
	t.Helper()
	rep, err := oauth.RotateNonceKeys(t.Context(), st, localkey.NonceKeys{}, now)
	if err != nil {
		t.Fatalf("RotateNonceKeys: %v", err)
	}
	return rep
}

func keyring(t *testing.T, st oauth.NonceKeyStore, now time.Time) *oauth.NonceKeyring {
	t.Helper()
	r, err := oauth.NewNonceKeyring(t.Context(), st, localkey.NonceKeys{}, nil, now)
	if err != nil {
		t.Fatalf("NewNonceKeyring: %v", err)
	}
	return r
}

// nonceKeyID is the key id a nonce names (its bytes 8 to 16).
func nonceKeyID(t *testing.T, nonce string) int64 {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(nonce)
	if err != nil || len(raw) < 16 {
		t.Fatalf("nonce %q is not base64url of at least 16 bytes", nonce)
	}
	return int64(binary.BigEndian.Uint64(raw[8:16]))
}

// t0 is a time on a nonce period's boundary.
var t0 = time.Unix(1_800_000_000, 0).Truncate(oauth.DefaultNoncePeriod)

// TestNonceKeyring_NonceLivesOneToTwoPeriods: a nonce is valid in its period and the next, not
// after; a nonce of another deployment's key, an empty one and an altered one never are.
func TestNonceKeyring_NonceLivesOneToTwoPeriods(t *testing.T) {
	st, other := nonceStore(t), nonceStore(t)
	rotateNonceKeys(t, st, t0)
	rotateNonceKeys(t, other, t0)
	r, o := keyring(t, st, t0), keyring(t, other, t0)
	nonce := r.Current(t0)
	p := oauth.DefaultNoncePeriod
	for d, ok := range map[time.Duration]bool{0: true, p - time.Second: true, p + p/2: true, 2 * p: false, -p: false} {
		if got := r.Valid(nonce, t0.Add(d)); got != ok {
			t.Errorf("nonce at +%v: valid %v, want %v", d, got, ok)
		}
	}
	if o.Valid(nonce, t0) || r.Valid("", t0) || r.Valid(nonce+"x", t0) || r.Valid(nonce[:len(nonce)-2]+"AA", t0) {
		t.Fatal("a nonce of another key, an empty one or an altered one was accepted")
	}
}

// TestNonceKeyring_StoreWithoutKeyFailsToStart: an instance whose store has no nonce key does
// not start (closed), rather than run without the nonce check.
func TestNonceKeyring_StoreWithoutKeyFailsToStart(t *testing.T) {
	_, err := oauth.NewNonceKeyring(t.Context(), nonceStore(t), localkey.NonceKeys{}, nil, t0)
	if !errors.Is(err, oauth.ErrNoNonceKey) {
		t.Fatalf("NewNonceKeyring over an empty store: %v, want ErrNoNonceKey", err)
	}
}

// TestNonceKeyring_RotationTakesEffectWithoutRestartAndOlderNoncesStillVerify: after the
// rotation made a new key, a running instance issues nonces of the new key once it re-reads
// the keys (NonceKeyRefresh), and a nonce of the older key issued before still verifies there
// and in a fresh instance, until the older key is dropped.
func TestNonceKeyring_RotationTakesEffectWithoutRestartAndOlderNoncesStillVerify(t *testing.T) {
	st := nonceStore(t)
	rotateNonceKeys(t, st, t0)
	r := keyring(t, st, t0)
	t1 := t0.Add(oauth.NonceKeyLife)
	old := r.Current(t1.Add(-time.Minute)) // re-reads (a day after start): still key 1
	if id := nonceKeyID(t, old); id != 1 {
		t.Fatalf("nonce before the rotation names key %d, want 1", id)
	}
	if rep := rotateNonceKeys(t, st, t1); !rep.Made || rep.Current != 2 || len(rep.Kept) != 2 {
		t.Fatalf("rotation a key's life after the first: %+v, want key 2 made and both kept", rep)
	}
	if id := nonceKeyID(t, r.Current(t1)); id != 1 {
		t.Fatalf("nonce a minute after the last read names key %d, want 1 (re-read every %v)", id, oauth.NonceKeyRefresh)
	}
	at := t1.Add(oauth.NonceKeyRefresh - time.Minute)
	fresh := r.Current(at)
	if id := nonceKeyID(t, fresh); id != 2 {
		t.Fatalf("nonce %v after the last read names key %d, want 2", oauth.NonceKeyRefresh, id)
	}
	for name, ring := range map[string]*oauth.NonceKeyring{"running instance": r, "new instance": keyring(t, st, at)} {
		if !ring.Valid(old, at) || !ring.Valid(fresh, at) {
			t.Errorf("%s: older nonce valid %v, new one %v, want both", name, ring.Valid(old, at), ring.Valid(fresh, at))
		}
	}
	// Once the newer key is NonceKeyOverlap old, the next run drops the older one.
	later := t1.Add(oauth.NonceKeyOverlap + time.Second)
	if rep := rotateNonceKeys(t, st, later); rep.Made || len(rep.Dropped) != 1 || rep.Dropped[0] != 1 {
		t.Fatalf("rotation past the overlap: %+v, want key 1 dropped and none made", rep)
	}
	set, err := st.NonceKeys(t.Context())
	if err != nil || len(set.Keys) != 1 || set.Keys[0].ID != 2 {
		t.Fatalf("nonce keys after the drop: %+v, %v, want key 2 only", set, err)
	}
}

// TestRotateNonceKeys_RunWithNothingDueWritesNothing: the rotation is idempotent: a run before
// the newest key's life is over changes nothing stored.
func TestRotateNonceKeys_RunWithNothingDueWritesNothing(t *testing.T) {
	st := nonceStore(t)
	rotateNonceKeys(t, st, t0)
	before, _ := st.NonceKeys(t.Context())
	if rep := rotateNonceKeys(t, st, t0.Add(oauth.NonceKeyLife-time.Second)); rep.Made || rep.Current != 1 {
		t.Fatalf("run before the key's life is over: %+v, want nothing made", rep)
	}
	after, _ := st.NonceKeys(t.Context())
	if after.Version != before.Version {
		t.Fatalf("version %d → %d: a run with nothing due wrote", before.Version, after.Version)
	}
}

// TestNonceKeyring_RacingNoncesOfANewerKeyCauseOneRead: 50 verifications racing with a nonce
// of a key made after the instance read the keys (another region's or instance's nonce after
// a rotation) all pass, on one read of the store; a nonce naming a key that does not exist
// causes no further read within NonceKeyMissInterval, and one after it.
func TestNonceKeyring_RacingNoncesOfANewerKeyCauseOneRead(t *testing.T) {
	st := nonceStore(t)
	rotateNonceKeys(t, st, t0)
	counted := &countingNonceKeys{NonceKeyStore: st}
	t1 := t0.Add(oauth.NonceKeyLife)
	r, err := oauth.NewNonceKeyring(t.Context(), counted, localkey.NonceKeys{}, nil, t1.Add(-time.Second))
	if err != nil {
		t.Fatal(err)
	}
	rotateNonceKeys(t, st, t1)
	nonce := keyring(t, st, t1).Current(t1) // another instance, started after the rotation
	if nonceKeyID(t, nonce) != 2 {
		t.Fatal("the other instance does not issue with key 2")
	}
	counted.reads.Store(0)
	var wg sync.WaitGroup
	var passed atomic.Int64
	start := make(chan struct{})
	for range 50 {
		wg.Go(func() {
			<-start
			if r.Valid(nonce, t1.Add(time.Second)) {
				passed.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if passed.Load() != 50 || counted.reads.Load() != 1 {
		t.Fatalf("50 racing verifications: %d passed with %d reads, want 50 with 1", passed.Load(), counted.reads.Load())
	}

	// A nonce naming key 3, which does not exist: refused; the miss above read the keys less
	// than NonceKeyMissInterval ago, so no read until the interval is over, then one.
	raw, _ := base64.RawURLEncoding.DecodeString(nonce)
	binary.BigEndian.PutUint64(raw[8:16], 3)
	forged := base64.RawURLEncoding.EncodeToString(raw)
	for _, d := range []time.Duration{2 * time.Second, 30 * time.Second} {
		if r.Valid(forged, t1.Add(d)) {
			t.Fatal("a nonce of a key that does not exist was accepted")
		}
	}
	if n := counted.reads.Load(); n != 1 {
		t.Fatalf("nonces of an unknown key within a minute of the last miss's read: %d reads in all, want 1", n)
	}
	r.Valid(forged, t1.Add(time.Second+oauth.NonceKeyMissInterval+time.Second))
	if n := counted.reads.Load(); n != 2 {
		t.Fatalf("a nonce of an unknown key after the interval: %d reads in all, want 2", n)
	}
}
