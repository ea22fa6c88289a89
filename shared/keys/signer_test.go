package keys_test

import (
	"context"
	"crypto"
	"errors"
	"fmt"
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

// parse verifies tok with pub and returns its header.
func parse(t *testing.T, tok string, pub crypto.PublicKey) map[string]any {
	t.Helper()
	p, err := jwt.Parse(tok, func(*jwt.Token) (any, error) { return pub, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithoutClaimsValidation())
	if err != nil {
		t.Fatalf("token does not verify: %v", err)
	}
	return p.Header
}

func TestSignJWT_SignsWithCurrentKeyAndItsKid(t *testing.T) {
	f := newSignerFixture(t)
	ctx := context.Background()
	if _, _, err := installKey(f.reg, f.back, keys.RS256, oauth.KeyNext, f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	cur, pub, err := installKey(f.reg, f.back, keys.RS256, oauth.KeyCurrent, f.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := f.s.SignJWT(ctx, jwt.MapClaims{"sub": "u1", "aud": "c1"})
	if err != nil {
		t.Fatal(err)
	}
	h := parse(t, tok, pub)
	if h["kid"] != cur.Kid || h["alg"] != "RS256" || h["typ"] != "JWT" {
		t.Fatalf("header %v, want kid %s alg RS256 typ JWT", h, cur.Kid)
	}
	if n := f.back.signs.Load(); n != 1 {
		t.Fatalf("%d backend Sign calls for one token, want 1", n)
	}
}

func TestSignJWT_PicksUpPromotionAfterCacheTTL(t *testing.T) {
	f := newSignerFixture(t)
	ctx := context.Background()
	old, oldPub, err := installKey(f.reg, f.back, keys.RS256, oauth.KeyCurrent, f.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.SignJWT(ctx, jwt.MapClaims{}); err != nil {
		t.Fatal(err)
	}
	promoted, newPub, err := installKey(f.reg, f.back, keys.RS256, oauth.KeyCurrent, f.clock.Now())
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
		tok, err := f.s.SignJWT(ctx, jwt.MapClaims{})
		if err != nil {
			t.Fatal(err)
		}
		if kid := parse(t, tok, tc.pub)["kid"]; kid != tc.wantKid {
			t.Fatalf("after %v: kid %v, want %s", tc.after, kid, tc.wantKid)
		}
	}
}

func TestSignJWT_NoCurrentKeyIsAClearError(t *testing.T) {
	f := newSignerFixture(t)
	if _, _, err := installKey(f.reg, f.back, keys.RS256, oauth.KeyNext, f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	_, err := f.s.SignJWT(context.Background(), jwt.MapClaims{})
	if !errors.Is(err, keys.ErrNoCurrentKey) || errors.Is(err, oauth.ErrTransient) {
		t.Fatalf("SignJWT = %v, want ErrNoCurrentKey (not transient)", err)
	}
}

func TestSignJWT_FailuresAreTransientOnlyWhenRetryable(t *testing.T) {
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
			if _, _, err := installKey(f.reg, f.back, keys.RS256, oauth.KeyCurrent, f.clock.Now()); err != nil {
				t.Fatal(err)
			}
			f.back.failSign(tc.signErr)
			f.reg.failReads = tc.regErr
			tok, err := f.s.SignJWT(context.Background(), jwt.MapClaims{})
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
}

func TestSignJWT_RefusesSignatureThatDoesNotMatchPublishedKey(t *testing.T) {
	f := newSignerFixture(t)
	ctx := context.Background()
	k, _, err := installKey(f.reg, f.back, keys.RS256, oauth.KeyCurrent, f.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	// The registry's ref points at another key of the backend than its published N and E.
	otherRef, _, err := f.back.CreateKey(ctx, keys.RS256)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.reg.UpdateKeys(ctx, func(s oauth.KeySet) (oauth.KeySet, error) {
		s.Keys[0].Ref = otherRef
		return s, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.SignJWT(ctx, jwt.MapClaims{}); err == nil {
		t.Fatalf("SignJWT signed with a key that is not the published %s", k.Kid)
	}
}

func TestSignJWT_KeyGoneFromBackendRereadsTheRegistry(t *testing.T) {
	f := newSignerFixture(t)
	ctx := context.Background()
	old, _, err := installKey(f.reg, f.back, keys.RS256, oauth.KeyCurrent, f.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.SignJWT(ctx, jwt.MapClaims{}); err != nil {
		t.Fatal(err)
	}
	// An operator replaced the current key and destroyed the old one within the cache TTL.
	promoted, pub, err := installKey(f.reg, f.back, keys.RS256, oauth.KeyCurrent, f.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.back.ScheduleDeletion(ctx, old.Ref); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.SignJWT(ctx, jwt.MapClaims{}); !errors.Is(err, keys.ErrUnknownKey) {
		t.Fatalf("signing with the destroyed key = %v, want ErrUnknownKey", err)
	}
	tok, err := f.s.SignJWT(ctx, jwt.MapClaims{}) // same instant: no TTL has passed
	if err != nil {
		t.Fatal(err)
	}
	if kid := parse(t, tok, pub)["kid"]; kid != promoted.Kid {
		t.Fatalf("kid %v, want the registry's new current key %s", kid, promoted.Kid)
	}
}
