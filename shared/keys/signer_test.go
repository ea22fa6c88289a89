package keys_test

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acmebank/authserver/shared/keys"
	"github.com/acmebank/authserver/shared/keys/localkey"
	"github.com/acmebank/authserver/shared/oauth"
	"github.com/golang-jwt/jwt/v5"
)

type signerFixture struct {
	reg   *registry
	back  *flakyBackend
	clock *fakeClock
	s     *keys.Signer
}

func newSignerFixture(t *testing.T) *signerFixture {
	t.Helper()
	lb, err := localkey.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &signerFixture{reg: newRegistry(t), back: &flakyBackend{Backend: lb}, clock: newClock()}
	f.s = keys.NewSigner(f.reg, f.back, f.clock, time.Minute)
	return f
}

// pointRefAtAnotherKey makes the registry's first key name another key of the backend than its
// published one, as a ref that names the wrong key would, and returns that ref.
func (f *signerFixture) pointRefAtAnotherKey(t *testing.T, alg string) string {
	t.Helper()
	ctx := context.Background()
	otherRef, _, err := f.back.CreateKey(ctx, alg)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.reg.UpdateKeys(ctx, func(s oauth.KeySet) (oauth.KeySet, error) {
		s.Keys[0].Ref = otherRef
		return s, nil
	}); err != nil {
		t.Fatal(err)
	}
	return otherRef
}

// parse verifies tok, signed with alg, with pub and returns its header.
func parse(t *testing.T, tok, alg string, pub crypto.PublicKey) map[string]any {
	t.Helper()
	p, err := jwt.Parse(tok, func(*jwt.Token) (any, error) { return pub, nil },
		jwt.WithValidMethods([]string{alg}), jwt.WithoutClaimsValidation())
	if err != nil {
		t.Fatalf("token does not verify: %v", err)
	}
	return p.Header
}

func TestSignJWT_SignsWithCurrentKeyAndItsKid(t *testing.T) {
	forEachAlg(t, func(t *testing.T, alg string) {
		f := newSignerFixture(t)
		ctx := context.Background()
		if _, _, err := installKey(f.reg, f.back, alg, oauth.KeyNext, f.clock.Now()); err != nil {
			t.Fatal(err)
		}
		cur, pub, err := installKey(f.reg, f.back, alg, oauth.KeyCurrent, f.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		tok, err := f.s.SignJWT(ctx, alg, jwt.MapClaims{"sub": "u1", "aud": "c1"})
		if err != nil {
			t.Fatal(err)
		}
		h := parse(t, tok, alg, pub)
		if h["kid"] != cur.Kid || h["alg"] != alg || h["typ"] != "JWT" {
			t.Fatalf("header %v, want kid %s alg %s typ JWT", h, cur.Kid, alg)
		}
		if n := f.back.signs.Load(); n != 1 {
			t.Fatalf("%d backend Sign calls for one token, want 1", n)
		}
	})
}

func TestSignJWT_PicksUpPromotionAfterCacheTTL(t *testing.T) {
	forEachAlg(t, func(t *testing.T, alg string) {
		f := newSignerFixture(t)
		ctx := context.Background()
		old, oldPub, err := installKey(f.reg, f.back, alg, oauth.KeyCurrent, f.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.s.SignJWT(ctx, alg, jwt.MapClaims{}); err != nil {
			t.Fatal(err)
		}
		promoted, newPub, err := installKey(f.reg, f.back, alg, oauth.KeyCurrent, f.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			after   time.Duration
			wantKid string
			pub     crypto.PublicKey
		}{
			{30 * time.Second, old.Kid, oldPub},               // still cached
			{59 * time.Second, old.Kid, oldPub},               // still cached
			{time.Minute, promoted.Kid, newPub},               // cache expired: re-read
			{time.Minute + time.Second, promoted.Kid, newPub}, // cached again
		} {
			f.clock.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(tc.after))
			tok, err := f.s.SignJWT(ctx, alg, jwt.MapClaims{})
			if err != nil {
				t.Fatal(err)
			}
			if kid := parse(t, tok, alg, tc.pub)["kid"]; kid != tc.wantKid {
				t.Fatalf("after %v: kid %v, want %s", tc.after, kid, tc.wantKid)
			}
		}
	})
}

func TestSignJWT_NoCurrentKeyIsAClearError(t *testing.T) {
	forEachAlg(t, func(t *testing.T, alg string) {
		f := newSignerFixture(t)
		if _, _, err := installKey(f.reg, f.back, alg, oauth.KeyNext, f.clock.Now()); err != nil {
			t.Fatal(err)
		}
		_, err := f.s.SignJWT(context.Background(), alg, jwt.MapClaims{})
		if !errors.Is(err, keys.ErrNoCurrentKey) || errors.Is(err, oauth.ErrTransient) {
			t.Fatalf("SignJWT = %v, want ErrNoCurrentKey (not transient)", err)
		}
	})
}

func TestSignJWT_FailuresAreTransientOnlyWhenRetryable(t *testing.T) {
	forEachAlg(t, func(t *testing.T, alg string) {
		for _, tc := range []struct {
			name          string
			signErr       error
			regErr        error
			wantTransient bool
		}{
			{"backend throttled", fmt.Errorf("kms: %w: ThrottlingException", oauth.ErrTransient), nil, true},
			{"backend deadline", fmt.Errorf("kms sign: %w", context.DeadlineExceeded), nil, true},
			{"backend refused key", fmt.Errorf("kms: %w", keys.ErrUnknownKey), nil, false},
			{"backend other", errBoom, nil, false},
			{"registry throttled", nil, fmt.Errorf("dynamo: %w", oauth.ErrTransient), true},
			{"registry broken", nil, errBoom, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				f := newSignerFixture(t)
				if _, _, err := installKey(f.reg, f.back, alg, oauth.KeyCurrent, f.clock.Now()); err != nil {
					t.Fatal(err)
				}
				f.back.failSign(tc.signErr)
				f.reg.failReads = tc.regErr
				tok, err := f.s.SignJWT(context.Background(), alg, jwt.MapClaims{})
				if err == nil || tok != "" {
					t.Fatalf("SignJWT = %q, %v; want an error", tok, err)
				}
				if got := errors.Is(err, oauth.ErrTransient); got != tc.wantTransient {
					t.Fatalf("transient = %v for %v, want %v", got, err, tc.wantTransient)
				}
				if want := map[bool]string{true: oauth.ErrCodeTemporarilyUnavailable, false: oauth.ErrCodeServerError}[tc.wantTransient]; oauth.AsError(err).Code != want {
					t.Fatalf("AsError code %s, want %s", oauth.AsError(err).Code, want)
				}
			})
		}
	})
}

func TestSignJWT_RefusesSignatureThatDoesNotMatchPublishedKey(t *testing.T) {
	forEachAlg(t, func(t *testing.T, alg string) {
		f := newSignerFixture(t)
		ctx := context.Background()
		k, _, err := installKey(f.reg, f.back, alg, oauth.KeyCurrent, f.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		// The registry's ref points at another key of the backend than its published N and E.
		f.pointRefAtAnotherKey(t, alg)
		if _, err := f.s.SignJWT(ctx, alg, jwt.MapClaims{}); err == nil {
			t.Fatalf("SignJWT signed with a key that is not the published %s", k.Kid)
		}
	})
}

func TestSignJWT_KeyGoneFromBackendRereadsTheRegistry(t *testing.T) {
	forEachAlg(t, func(t *testing.T, alg string) {
		f := newSignerFixture(t)
		ctx := context.Background()
		old, _, err := installKey(f.reg, f.back, alg, oauth.KeyCurrent, f.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.s.SignJWT(ctx, alg, jwt.MapClaims{}); err != nil {
			t.Fatal(err)
		}
		// An operator replaced the current key and destroyed the old one within the cache TTL.
		promoted, pub, err := installKey(f.reg, f.back, alg, oauth.KeyCurrent, f.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := f.back.ScheduleDeletion(ctx, old.Ref); err != nil {
			t.Fatal(err)
		}
		if _, err := f.s.SignJWT(ctx, alg, jwt.MapClaims{}); !errors.Is(err, keys.ErrUnknownKey) {
			t.Fatalf("signing with the destroyed key = %v, want ErrUnknownKey", err)
		}
		tok, err := f.s.SignJWT(ctx, alg, jwt.MapClaims{}) // same instant: no TTL has passed
		if err != nil {
			t.Fatal(err)
		}
		if kid := parse(t, tok, alg, pub)["kid"]; kid != promoted.Kid {
			t.Fatalf("kid %v, want the registry's new current key %s", kid, promoted.Kid)
		}
	})
}

// forEachAlg runs test once per algorithm, as a sub-test named after it.
func forEachAlg(t *testing.T, test func(t *testing.T, alg string)) {
	for _, alg := range keys.Algs {
		t.Run(alg, func(t *testing.T) { test(t, alg) })
	}
}

// TestSignJWT_EachAlgorithmSignsWithItsOwnKey: one Signer over a registry with a current key
// of every algorithm signs each token with the key of the algorithm asked for ("" is RS256),
// reading the registry once for all of them.
func TestSignJWT_EachAlgorithmSignsWithItsOwnKey(t *testing.T) {
	f := newSignerFixture(t)
	ctx := context.Background()
	cur := map[string]oauth.SigningKey{}
	pubs := map[string]crypto.PublicKey{}
	for _, alg := range keys.Algs {
		k, pub, err := installKey(f.reg, f.back, alg, oauth.KeyCurrent, f.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		cur[alg], pubs[alg] = k, pub
	}
	reads := countReads(f.reg)
	for _, alg := range append([]string{""}, keys.Algs...) {
		want := alg
		if want == "" {
			want = keys.RS256
		}
		tok, err := f.s.SignJWT(ctx, alg, jwt.MapClaims{"sub": "u1"})
		if err != nil {
			t.Fatalf("%q: %v", alg, err)
		}
		if h := parse(t, tok, want, pubs[want]); h["kid"] != cur[want].Kid || h["alg"] != want {
			t.Fatalf("%q: header %v, want kid %s alg %s", alg, h, cur[want].Kid, want)
		}
		// And no other algorithm's key verifies it.
		for _, other := range keys.Algs {
			if other == want {
				continue
			}
			if _, err := jwt.Parse(tok, func(*jwt.Token) (any, error) { return pubs[other], nil }, jwt.WithoutClaimsValidation()); err == nil {
				t.Fatalf("a %s token verifies with the %s key", want, other)
			}
		}
	}
	if n := reads(); n != 1 {
		t.Fatalf("%d registry reads for four tokens within the cache period, want 1", n)
	}
	if _, err := f.s.SignJWT(ctx, "RS512", jwt.MapClaims{}); !errors.Is(err, keys.ErrUnsupportedAlg) {
		t.Fatalf("SignJWT(RS512) = %v, want ErrUnsupportedAlg", err)
	}
}

// TestSignJWTWithType_PutsTheTypInTheSignedHeader: a JWT signed with a type carries it as the
// protected header's typ (RFC 9701 5's token-introspection+jwt), verifies with the published
// key, and costs one signature like an id_token; "" keeps typ JWT.
func TestSignJWTWithType_PutsTheTypInTheSignedHeader(t *testing.T) {
	forEachAlg(t, func(t *testing.T, alg string) {
		f := newSignerFixture(t)
		ctx := context.Background()
		cur, pub, err := installKey(f.reg, f.back, alg, oauth.KeyCurrent, f.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct{ typ, want string }{
			{oauth.JWTTypeIntrospection, "token-introspection+jwt"},
			{"", "JWT"},
		} {
			tok, err := f.s.SignJWTWithType(ctx, alg, tc.typ, jwt.MapClaims{"iss": "https://as"})
			if err != nil {
				t.Fatal(err)
			}
			h := parse(t, tok, alg, pub)
			if h["typ"] != tc.want || h["kid"] != cur.Kid || h["alg"] != alg {
				t.Fatalf("SignJWTWithType(%q): header %v, want typ %s kid %s alg %s", tc.typ, h, tc.want, cur.Kid, alg)
			}
		}
		if n := f.back.signs.Load(); n != 2 {
			t.Fatalf("%d backend Sign calls for two tokens, want 2", n)
		}
	})
}

// TestSignJWT_InProcessKeyIsCheckedAgainWhenTheRegistryMovesToAnotherRef: a key held in
// process is checked on its first signature only, but a registry that moves on to another ref
// under the same kid and public key (a record edited by hand, a restore gone wrong) gets no
// token out: the first signature after the re-read is checked again and refused.
func TestSignJWT_InProcessKeyIsCheckedAgainWhenTheRegistryMovesToAnotherRef(t *testing.T) {
	forEachAlg(t, func(t *testing.T, alg string) {
		f := newSignerFixture(t)
		ctx := context.Background()
		k, pub, err := installKey(f.reg, f.back, alg, oauth.KeyCurrent, f.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if !f.back.SignsInProcess(k.Ref) {
			t.Fatal("the local key backend under the test's wrapper does not sign in process")
		}
		for range 3 { // checked once, then trusted
			tok, err := f.s.SignJWT(ctx, alg, jwt.MapClaims{})
			if err != nil {
				t.Fatal(err)
			}
			parse(t, tok, alg, pub)
		}
		otherRef := f.pointRefAtAnotherKey(t, alg)
		f.clock.Advance(time.Minute) // the cache period ends: the registry is read again
		if tok, err := f.s.SignJWT(ctx, alg, jwt.MapClaims{}); err == nil {
			t.Fatalf("SignJWT signed with %s, which is not the published key %s: %.40s…", otherRef, k.Kid, tok)
		}
	})
}

// TestSignJWT_KeyHeldElsewhereHasEverySignatureChecked: a backend that does not sign in process
// (KMS) is trusted for no signature: when it starts answering with another key than the one
// published, the very next token is refused, however many it signed right before.
func TestSignJWT_KeyHeldElsewhereHasEverySignatureChecked(t *testing.T) {
	forEachAlg(t, func(t *testing.T, alg string) {
		f := newSignerFixture(t)
		ctx := context.Background()
		remote := &swappingBackend{Backend: f.back}
		s := keys.NewSigner(f.reg, remote, f.clock, time.Minute)
		_, pub, err := installKey(f.reg, f.back, alg, oauth.KeyCurrent, f.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			tok, err := s.SignJWT(ctx, alg, jwt.MapClaims{})
			if err != nil {
				t.Fatal(err)
			}
			parse(t, tok, alg, pub)
		}
		otherRef, _, err := f.back.CreateKey(ctx, alg)
		if err != nil {
			t.Fatal(err)
		}
		remote.signWith.Store(&otherRef)
		if tok, err := s.SignJWT(ctx, alg, jwt.MapClaims{}); err == nil {
			t.Fatalf("SignJWT handed out a token the published key does not verify: %.40s…", tok)
		}
	})
}

// swappingBackend is a backend that does not sign in process and, once signWith is set, signs
// every digest with that ref whatever ref it is asked for: a remote key service answering with
// another key.
type swappingBackend struct {
	keys.Backend
	signWith atomic.Pointer[string]
}

func (b *swappingBackend) Sign(ctx context.Context, ref, alg string, digest []byte) ([]byte, error) {
	if other := b.signWith.Load(); other != nil {
		ref = *other
	}
	return b.Backend.Sign(ctx, ref, alg, digest)
}
